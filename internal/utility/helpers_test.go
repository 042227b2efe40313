package utility

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// validator checks every emitted frame against the protocol's JSON
// Schemas; building it is slow, so it is built once per test binary.
var validator = sync.OnceValues(protocol.NewValidator)

// waitTimeout bounds every wait for an asynchronous message.
const waitTimeout = 20 * time.Second

// recorder collects the messages a Manager emits, validating each frame.
type recorder struct {
	t  *testing.T
	ch chan protocol.Message

	mu  sync.Mutex
	all []protocol.Message
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, ch: make(chan protocol.Message, 4096)}
}

// validFrame reports why msg is not a frame the protocol's JSON Schemas
// accept, or nil.
func validFrame(msg protocol.Message) error {
	line, err := protocol.Marshal(msg)
	if err != nil {
		return fmt.Errorf("marshal %T: %w", msg, err)
	}
	v, err := validator()
	if err != nil {
		return fmt.Errorf("build validator: %w", err)
	}
	if err := v.ValidateServerFrame(line); err != nil {
		return fmt.Errorf("frame does not validate against the protocol schemas: %s: %w", line, err)
	}
	return nil
}

func (r *recorder) emit(msg protocol.Message) {
	if err := validFrame(msg); err != nil {
		r.t.Error(err)
	}
	r.mu.Lock()
	r.all = append(r.all, msg)
	r.mu.Unlock()
	select {
	case r.ch <- msg:
	default:
		r.t.Errorf("recorder channel full; dropped %T", msg)
	}
}

// messages returns everything emitted so far.
func (r *recorder) messages() []protocol.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.Message(nil), r.all...)
}

// next waits for the next message satisfying ok, returning it and the
// messages skipped on the way.
func next[T protocol.Message](t *testing.T, r *recorder, ok func(T) bool) (T, []protocol.Message) {
	t.Helper()
	var skipped []protocol.Message
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		select {
		case msg := <-r.ch:
			if m, is := msg.(T); is && (ok == nil || ok(m)) {
				return m, skipped
			}
			skipped = append(skipped, msg)
		case <-timeout.C:
			var zero T
			t.Fatalf("timed out waiting for %T; got meanwhile: %s", zero, describe(skipped))
			return zero, skipped
		}
	}
}

// find returns the first message of msgs that is a T and passes ok.
func find[T protocol.Message](msgs []protocol.Message, ok func(T) bool) (T, bool) {
	for _, msg := range msgs {
		if m, is := msg.(T); is && ok(m) {
			return m, true
		}
	}
	var zero T
	return zero, false
}

func describe(msgs []protocol.Message) string {
	s := ""
	for _, m := range msgs {
		line, _ := protocol.Marshal(m)
		s += "\n  " + string(line)
	}
	return s
}

// fixture is a Manager on a fresh workspace.
type fixture struct {
	m   *Manager
	rec *recorder
	dir string // the workspace (real path)
	out string // a directory outside the workspace
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "ws")
	out := filepath.Join(base, "outside")
	for _, d := range []string{dir, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixtureIn(t, dir)
	f.out = out
	return f
}

// newFixtureIn is a fixture whose workspace is dir (a real path).
func newFixtureIn(t *testing.T, dir string) *fixture {
	t.Helper()
	root, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t)
	m := New(Config{Root: root, Emit: rec.emit, KillGrace: 300 * time.Millisecond, DrainDelay: 300 * time.Millisecond})
	t.Cleanup(func() {
		m.Close()
		root.Close()
	})
	return &fixture{m: m, rec: rec, dir: dir}
}

// write creates a file (and its parents) under dir.
func write(t *testing.T, dir, rel, content string) string {
	t.Helper()
	wstest.WriteFiles(t, dir, map[string]string{rel: content})
	return filepath.Join(dir, filepath.FromSlash(rel))
}

// wantError checks that err is an *Error with the given code and text.
func wantError(t *testing.T, err error, code int, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *Error %d %q", err, err, code, msg)
	}
	if e.Code != code || e.Message != msg {
		t.Errorf("error = %d %q, want %d %q", e.Code, e.Message, code, msg)
	}
}

func ptr[T any](v T) *T { return &v }

func str(v any) string { return fmt.Sprint(v) }
