package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// counting wraps the engine runner (piece "noop") and counts runs per job.
type counting struct {
	inner queue.Runner
	mu    sync.Mutex
	runs  map[int64]int
	total int
	want  int
	all   chan struct{}
}

func newCounting(t *testing.T, want int) *counting {
	return &counting{
		inner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: t.TempDir()}),
		runs:  map[int64]int{}, want: want, all: make(chan struct{}),
	}
}

func (c *counting) Run(ctx context.Context, j *queue.Job) queue.Result {
	res := c.inner.Run(ctx, j)
	c.mu.Lock()
	c.runs[j.ID]++
	c.total++
	if c.total == c.want {
		close(c.all)
	}
	c.mu.Unlock()
	return res
}

const concurrencyJobs = 2000

// TestConcurrencyPostgres: 2,000 noop jobs, 8 workers in 2 pools on two
// separate store handles (two processes' worth): none lost, none run twice.
func TestConcurrencyPostgres(t *testing.T) {
	t.Parallel()
	dsn := pg.Cluster(t).NewSchema(t)
	a, b := openPG(t, dsn, nil), openPG(t, dsn, nil)
	testConcurrency(t, []store.Store{a, b}, 4)
}

// TestConcurrencySQLite: the same with 8 workers in one process.
func TestConcurrencySQLite(t *testing.T) {
	t.Parallel()
	testConcurrency(t, []store.Store{openSQLite(t, nil)}, 8)
}

func testConcurrency(t *testing.T, stores []store.Store, workersEach int) {
	ctx := t.Context()
	ids := make([]int64, 0, concurrencyJobs)
	for range concurrencyJobs {
		j, err := stores[0].Enqueue(ctx, store.NewJob{Piece: queue.NoopPiece})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	c := newCounting(t, concurrencyJobs)
	started := time.Now()
	var stops []func()
	m := queue.NewMetrics()
	for i, st := range stores {
		stops = append(stops, startPool(t, queue.Config{
			Store: st, Runner: c, Workers: workersEach, Name: "proc" + string(rune('A'+i)), Metrics: m,
			Poll: 100 * time.Millisecond,
		}))
	}
	// Generous: the whole suite shares two cores.
	select {
	case <-c.all:
	case <-time.After(5 * time.Minute):
		c.mu.Lock()
		t.Fatalf("only %d of %d runs within 5 minutes", c.total, concurrencyJobs)
	}
	for _, stop := range stops {
		stop()
	}
	elapsed := time.Since(started)
	t.Logf("%d jobs, %d workers: %s (%.0f jobs/s)", concurrencyJobs, workersEach*len(stores), elapsed, concurrencyJobs/elapsed.Seconds())
	if snap := m.Snapshot(); snap.Claimed != concurrencyJobs || snap.ClaimErrors != 0 || snap.Outcomes["succeeded"] != concurrencyJobs {
		t.Errorf("metrics: %+v", snap)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if n := c.runs[id]; n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
	counts, err := stores[0].CountJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[store.StateSucceeded] != concurrencyJobs || len(counts) != 1 {
		t.Errorf("job states = %v, want all %d succeeded", counts, concurrencyJobs)
	}
	// Both processes took part.
	if len(stores) > 1 {
		owners := map[byte]int{}
		var after int64
		for {
			js, err := stores[0].ListJobs(ctx, store.JobFilter{AfterID: after})
			if err != nil {
				t.Fatal(err)
			}
			if len(js) == 0 {
				break
			}
			for _, j := range js {
				owners[j.LeaseOwner[4]]++
				if j.Attempt != 1 {
					t.Errorf("job %d took %d attempts", j.ID, j.Attempt)
				}
				after = j.ID
			}
		}
		if owners['A'] == 0 || owners['B'] == 0 {
			t.Errorf("jobs per process = %v; both should have run some", owners)
		}
	}
}
