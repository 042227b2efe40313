package store

import (
	"context"
	"time"
)

// Processes records the `maestro serve` and `maestro worker` processes that
// share the store, and the settings they must agree on
// (docs/scale-out.md, "One artifact location" and "Process names").
type Processes interface {
	// InitSetting records value under key (by naming the process that
	// records it) unless the key holds a value already, and returns the
	// recorded setting: the one just written, or the earlier one.
	InitSetting(ctx context.Context, key, value, by string) (Setting, error)
	// PutSetting records value under key, replacing any earlier value.
	PutSetting(ctx context.Context, key, value, by string) (Setting, error)
	// GetSetting returns the setting of key; ErrNotFound if none.
	GetSetting(ctx context.Context, key string) (Setting, error)

	// StartProcess records p as the running holder of the name p.Name
	// (started and heartbeated now). The name is free when no process
	// holds it, when its holder stopped, or when its holder's heartbeat is
	// older than staleBefore (it died). Otherwise nothing is written and
	// the error is ErrConflict, returned with the holder's record.
	StartProcess(ctx context.Context, p Process, staleBefore time.Time) (Process, error)
	// HeartbeatProcess refreshes the heartbeat of the record of instance
	// under name. ErrNotFound if that record no longer holds the name (it
	// stopped, or another process took the name once its heartbeat was
	// stale).
	HeartbeatProcess(ctx context.Context, name, instance string) error
	// StopProcess marks the record of instance under name stopped: the
	// name is free at once. ErrNotFound as for HeartbeatProcess.
	StopProcess(ctx context.Context, name, instance string) error
	// ListProcesses returns the running processes whose heartbeat is not
	// older than staleBefore, by name.
	ListProcesses(ctx context.Context, staleBefore time.Time) ([]Process, error)
}

// SettingArtifacts is the setting of the artifact location every process
// on the store uses: "s3://bucket/prefix", an absolute directory, or ""
// (each process's data directory).
const SettingArtifacts = "artifacts"

// Setting is one recorded setting.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// UpdatedBy names the process that recorded the value ("serve NAME").
	UpdatedBy string    `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Process kinds.
const (
	ProcessServe  = "serve"
	ProcessWorker = "worker"
)

// Process is the record of a serve or worker process under its --name.
type Process struct {
	Name string `json:"name"`
	// Kind is ProcessServe or ProcessWorker.
	Kind string `json:"kind"`
	// Instance tells one start of a process from another under the same
	// name (random per start).
	Instance string `json:"instance"`
	// Address says where the process runs: a serve's advertised URL, a
	// worker's host and pid.
	Address string `json:"address"`
	// Host and PID are the machine's host name and the process id: a
	// process on the same host whose pid no longer runs has crashed.
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Artifacts is the process's artifact location (as SettingArtifacts).
	Artifacts   string    `json:"artifacts"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// StoppedAt is zero while the process runs.
	StoppedAt time.Time `json:"stopped_at,omitzero"`
}

// ValidateSetting checks an InitSetting or PutSetting input.
func ValidateSetting(key, value, by string) error {
	if err := label("key", key, true); err != nil {
		return err
	}
	if err := text("value", value, 4096, false); err != nil {
		return err
	}
	return label("by", by, false)
}

// ValidateProcess checks a StartProcess input.
func ValidateProcess(p Process) error {
	if err := label("name", p.Name, true); err != nil {
		return err
	}
	if p.Kind != ProcessServe && p.Kind != ProcessWorker {
		return invalid("kind", "expected %q or %q, found %q", ProcessServe, ProcessWorker, p.Kind)
	}
	if err := label("instance", p.Instance, true); err != nil {
		return err
	}
	if err := text("address", p.Address, 2048, false); err != nil {
		return err
	}
	if err := label("host", p.Host, false); err != nil {
		return err
	}
	return text("artifacts", p.Artifacts, 4096, false)
}
