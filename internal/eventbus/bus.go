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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	// later are the followers closed with CloseLater still publishing,
	// by directory.
	later map[string]*Follower
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
	b := &Bus{pub: pub, o: o, log: o.Logger, ctx: ctx, cancel: cancel, active: map[string]bool{}, later: map[string]*Follower{}}
	b.spawn(func() { b.watchConnect(connectWait) })
	return b, nil
}

// connectWait is how long a bus may take to connect before it says
// why it is not connected.
const connectWait = 2 * time.Second

// watchConnect logs once, at start, when the bus is not connected after
// wait: why (the server refused the credentials, naming the settings
// that gave them; no server answers at the URL, naming the variable
// that set it). Without it a serve or worker with no job to publish
// said nothing about a bus that could not work. Once connected, it
// checks that the server can store the events (checkStorage).
func (b *Bus) watchConnect(wait time.Duration) {
	nc := b.pub.nc
	up := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(up)
	if !nc.IsConnected() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-up:
		case <-b.ctx.Done():
			return
		case <-t.C:
			if err := b.pub.explain(errNotYet); errors.Is(err, ErrNotConnected) {
				b.log.Warn("event bus: not connected; events wait in the logs until it is (retrying)", "err", err)
			}
			select {
			case <-up:
			case <-b.ctx.Done():
				return
			}
		}
	}
	b.checkStorage()
}

// checkStorage logs once, when the bus connects, that the server cannot
// store the events: it has no JetStream, or (unless the settings create
// the stream, at the first publish) no stream takes a session's or a
// job's subject. A serve or worker said so only at its first job.
func (b *Bus) checkStorage() {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	p := b.pub
	_, err := p.js.AccountInfo(ctx)
	if noJetStream(err) {
		err = ErrNoJetStream
	} else if err == nil && !b.o.Settings.CreateStream {
		for _, subject := range []string{TypeSessionStarted, TypeJobQueued} {
			if _, err = p.js.StreamNameBySubject(ctx, subject); err != nil {
				if errors.Is(err, jetstream.ErrStreamNotFound) {
					err = fmt.Errorf("%s: %w", subject, ErrNoStream)
				}
				break
			}
		}
	}
	if err != nil && b.ctx.Err() == nil {
		b.log.Warn("event bus: the server cannot store the events; they wait in the logs until it can (retrying)", "err", err)
	}
}

// errNotYet is what watchConnect explains: explain returns it as it
// is when the bus connected meanwhile.
var errNotYet = errors.New("connected")

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
	delete(b.later, dir)
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

// replaceFrom replaces the state file at path with v, atomically as
// writeJSON does, writing it into the file at from (renamed to path.tmp,
// then over path) rather than into a new file: from is a file no longer
// needed (a session's close mark once its event is published), and
// creating a file costs several times writing one (about 350 µs of
// system time on the machine of docs/events.md's figures). A crash
// leaves path old or new, and from there or gone.
func replaceFrom(from, path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	path = filepath.Clean(path)
	tmp := path + ".tmp"
	if err := os.Rename(from, tmp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return writeJSON(path, v)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := overwrite(tmp, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// overwrite replaces the content of an existing file in place (no
// truncation to nothing first, which frees its block only to allocate
// one again).
func overwrite(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
