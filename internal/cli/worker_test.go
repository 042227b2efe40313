package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// watchOut is a concurrency-safe buffer that closes seen once ok holds
// for everything written so far.
type watchOut struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	ok   func(out []byte) bool
	seen chan struct{}
}

func newWatchOut(ok func(out []byte) bool) *watchOut {
	return &watchOut{ok: ok, seen: make(chan struct{})}
}

func (w *watchOut) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.ok != nil && w.ok(w.buf.Bytes()) {
		close(w.seen)
		w.ok = nil
	}
	return n, err
}

func (w *watchOut) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestWorkerRunsQueuedJobAndStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home, data := filepath.Join(dir, "home"), filepath.Join(dir, "data")
	st, err := sqlite.Open(t.Context(), filepath.Join(data, "maestro.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "health check", Piece: queue.NoopPiece})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	stderr := newWatchOut(func(out []byte) bool { return bytes.Contains(out, []byte("job finished")) })
	env := map[string]string{"MAESTRO_HOME": home}
	ios := &IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: stderr, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, ios, []string{"worker", "--data-dir", data, "--workers", "2", "--name", "test-worker"})
	}()
	select {
	case <-stderr.seen:
	case <-time.After(60 * time.Second):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("no job finished within 60s; stderr:\n%s\ngoroutines:\n%s", stderr.String(), buf)
	}
	cancel() // as SIGINT would
	select {
	case c := <-code:
		if c != ExitOK {
			t.Errorf("exit %d; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not stop")
	}
	out := stderr.String()
	for _, want := range []string{"maestro worker test-worker: 2 worker(s)", ", files in the data directory\n", "state=succeeded", "maestro worker: stopping: no new jobs; running jobs get 10s to finish", "maestro worker: stopped",
		"maestro worker: warning: on SQLite (no --db, no MAESTRO_DB) this worker holds " + filepath.Join(data, "maestro.db") + " alone: no maestro serve can open it beside this worker"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	st, err = sqlite.Open(t.Context(), filepath.Join(data, "maestro.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.GetJob(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateSucceeded || !strings.HasPrefix(got.LeaseOwner, "test-worker/") {
		t.Errorf("job = %+v", got)
	}
}

func TestWorkerFlagErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"worker", "--workers", "0"}, ExitUsage, "--workers must be at least 1"},
		{[]string{"worker", "--lease", "10ms"}, ExitUsage, "--lease must be at least"},
		{[]string{"worker", "--db", "mysql://x"}, ExitUsage, "--db: expected a postgres://"}, // a usage error, before the store opens
		// The store's error is the flag's, its password hidden.
		{[]string{"worker", "--db", "postgres://maestro:hunter2@127.0.0.1:1/maestro?connect_timeout=5"}, ExitError,
			"--db postgres://maestro:xxxxx@127.0.0.1:1/maestro?connect_timeout=5: open PostgreSQL store: PostgreSQL at 127.0.0.1:1 cannot be reached"},
		{[]string{"worker", "extra"}, ExitUsage, "unknown command"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		dir := t.TempDir()
		ios := &IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &stderr, Getenv: func(k string) string {
			if k == "MAESTRO_HOME" {
				return dir
			}
			return ""
		}}
		if code := Run(t.Context(), ios, append(tt.args, "--data-dir", dir)); code != tt.code || !strings.Contains(stderr.String(), tt.want) || strings.Contains(stderr.String(), "hunter2") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
}
