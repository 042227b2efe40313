// Package eventbus publishes Maestro's platform events: CloudEvents 1.0
// (structured JSON) on NATS JetStream subjects of the catalogue in
// docs/events.md ("Platform events"), following the session logs and the
// job logs as outboxes. A publisher never blocks the agent: it reads a log
// after it was written, from a cursor persisted beside the log, publishes
// each event with its id as Nats-Msg-Id (JetStream de-duplicates a
// re-sent event) and waits for the acknowledgement, retrying with backoff
// while NATS is down. After a restart of Maestro or of NATS it continues
// from the persisted cursor. Wire contract §16 describes the bus.
package eventbus

import (
	"cmp"
	"strings"

	"github.com/maestro-run/maestro/internal/config"
)

// Settings say where and how to publish.
type Settings struct {
	// URL is the NATS server; empty disables the bus.
	URL string
	// Token, User and Password authenticate to NATS (all optional).
	Token, User, Password string
	// CreateStream creates (or updates) the stream StreamName on
	// StreamSubjects before publishing; otherwise the stream is expected
	// to exist (the platform owns it).
	CreateStream bool
	// Source is the CloudEvents source attribute (default "maestro").
	Source string
}

// The stream --event-bus-create-stream creates.
const (
	StreamName     = "MAESTRO"
	StreamSubjects = "maestro.>"
)

// FromEnv returns the bus settings from the environment and the
// configuration file: MAESTRO_EVENT_BUS_URL, EVALOPS_NATS_URL or NATS_URL
// (in that order), else event_bus.url; MAESTRO_EVENT_BUS=0|false (alias
// MAESTRO_AUDIT_BUS) disables the bus even when a URL is set. The boolean
// reports whether the bus is enabled.
func FromEnv(getenv func(string) string, cfg config.EventBus) (Settings, bool) {
	for _, k := range []string{"MAESTRO_EVENT_BUS", "MAESTRO_AUDIT_BUS"} {
		switch strings.ToLower(strings.TrimSpace(getenv(k))) {
		case "0", "false", "off", "no":
			return Settings{}, false
		}
	}
	s := Settings{
		URL:      cmp.Or(getenv("MAESTRO_EVENT_BUS_URL"), getenv("EVALOPS_NATS_URL"), getenv("NATS_URL"), cfg.URL),
		Token:    cmp.Or(getenv("MAESTRO_EVENT_BUS_TOKEN"), getenv("NATS_TOKEN")),
		User:     cmp.Or(getenv("MAESTRO_EVENT_BUS_USER"), getenv("NATS_USER")),
		Password: cmp.Or(getenv("MAESTRO_EVENT_BUS_PASSWORD"), getenv("NATS_PASSWORD")),
		Source:   cmp.Or(getenv("MAESTRO_EVENT_BUS_SOURCE"), cfg.Source, "maestro"),
	}
	switch strings.ToLower(getenv("MAESTRO_EVENT_BUS_CREATE_STREAM")) {
	case "1", "true", "yes":
		s.CreateStream = true
	default:
		s.CreateStream = cfg.CreateStream
	}
	return s, s.URL != ""
}
