package queue_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/mcp/mcptest"
	"github.com/maestro-run/maestro/internal/pgtest"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/storetest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) {
	mcptest.RunStdioIfRequested() // the stdio MCP server of mcp_test.go
	os.Exit(pg.Main(m))
}

// waitTimeout bounds every wait for a job to reach a state.
const waitTimeout = 60 * time.Second

// clock is a settable clock for the store and the pool.
type clock struct{ *storetest.Clock }

func newClock() *clock {
	return &clock{storetest.NewClockAt(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))}
}

// Add moves the clock forward by d.
func (c *clock) Add(d time.Duration) { c.Advance(d) }

// openSQLite opens a SQLite store in a temporary directory; now nil means
// the real clock.
func openSQLite(t *testing.T, now func() time.Time) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "maestro.db"), sqlite.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openPG opens a store on dsn.
func openPG(t *testing.T, dsn string, now func() time.Time) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), dsn, postgres.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// waitJob waits (on the job's notifications, re-reading on each) until ok
// accepts the job, and returns it.
func waitJob(t *testing.T, st store.Store, id int64, what string, ok func(store.Job) bool) store.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	sub, err := st.Subscribe(ctx, store.JobTopic(id))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for {
		j, err := st.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(j) {
			return j
		}
		select {
		case <-sub.C():
		case <-ctx.Done():
			t.Fatalf("job %d: gave up waiting for %s after %s; it is %s (attempt %d, error %q)", id, what, waitTimeout, j.State, j.Attempt, j.Error)
		}
	}
}

func inState(s store.State) func(store.Job) bool {
	return func(j store.Job) bool { return j.State == s }
}

// startPool runs a pool until the test ends (or stop is called) and
// returns a function that stops it and waits for Run to return.
func startPool(t *testing.T, cfg queue.Config) (stop func()) {
	t.Helper()
	p, err := queue.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("pool: %v", err)
				}
			case <-time.After(waitTimeout):
				t.Errorf("pool did not stop within %s", waitTimeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// events reads a job's whole event log.
func events(t *testing.T, st store.Store, id int64) []store.JobEvent {
	t.Helper()
	evs, err := st.ReadJobEvents(t.Context(), id, 0, store.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
