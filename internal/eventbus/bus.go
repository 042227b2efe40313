package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Options configure a Bus.
type Options struct {
	Settings Settings
	// Env is the correlation of this process's sessions (the launcher's
	// environment, CorrelationFromEnv).
	Env    Correlation
	Logger *slog.Logger
	// Poll is how often a follower looks for new records (default
	// 100 ms). The agent never waits for it.
	Poll time.Duration
	// CloseWait bounds how long closing a session waits for its last
	// events to be published (default 3 s); what is left is published by
	// the next Maestro process that catches up (Bus.CatchUp).
	CloseWait time.Duration
}

// Bus is the event publisher of one process: it follows the logs of the
// process's sessions (FollowSession), catches up on the logs earlier
// processes left unpublished (CatchUp) and follows the job logs of a
// store (FollowJobs).
type Bus struct {
	pub    *Publisher
	o      Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	active map[string]bool // session directories followed by this process
}

// Open connects to the bus (in the background when NATS is down).
func Open(o Options) (*Bus, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	if o.CloseWait <= 0 {
		o.CloseWait = 3 * time.Second
	}
	pub, err := Connect(o.Settings, o.Logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Bus{pub: pub, o: o, log: o.Logger, ctx: ctx, cancel: cancel, active: map[string]bool{}}, nil
}

// Close stops every follower (what they did not publish stays in the
// logs, from their persisted cursors) and closes the connection.
func (b *Bus) Close() error {
	b.cancel()
	b.wg.Wait()
	b.pub.Close()
	return nil
}

// go runs fn in a goroutine Close waits for.
func (b *Bus) spawn(fn func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
}

// claim marks dir as followed by this process; false when it already is.
func (b *Bus) claim(dir string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active[dir] {
		return false
	}
	b.active[dir] = true
	return true
}

func (b *Bus) release(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.active, dir)
}

// publish encodes ev and publishes it until it is acknowledged or ctx
// ends. An event that cannot be encoded can never be published: it is
// logged and skipped rather than holding up the ones after it.
func (b *Bus) publish(ctx context.Context, ev Event, corr Correlation) error {
	data, err := Encode(ev, b.o.Settings.Source, corr)
	if err != nil {
		b.log.Error("event bus: event skipped", "err", err)
		return nil
	}
	return b.pub.PublishRetry(ctx, ev.Type, ev.ID, data)
}

// readJSON reads a small state file; a missing file leaves v as it is.
func readJSON(path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return true, nil
}

// writeJSON replaces a small state file atomically (a crash leaves the
// old or the new one).
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, filepath.Clean(path)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
