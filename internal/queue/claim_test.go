package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// claimLog records the pool's Claim calls.
type claimLog struct {
	store.Store
	mu    sync.Mutex
	calls []claimCall
}

type claimCall struct {
	workers []string
	got     []store.Job
}

func (c *claimLog) Claim(ctx context.Context, p store.ClaimParams) ([]store.Job, error) {
	jobs, err := c.Store.Claim(ctx, p)
	c.mu.Lock()
	c.calls = append(c.calls, claimCall{workers: slices.Clone(p.Workers), got: jobs})
	c.mu.Unlock()
	return jobs, err
}

// nonEmpty returns the calls that claimed something.
func (c *claimLog) nonEmpty() []claimCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []claimCall
	for _, call := range c.calls {
		if len(call.got) > 0 {
			out = append(out, call)
		}
	}
	return out
}

// TestPoolClaimsForIdleSlots: the pool claims for all its idle slots in
// one store call, each job leased to the slot that runs it; a busy slot is
// never given a second job; a slot that finishes is claimed for again.
func TestPoolClaimsForIdleSlots(t *testing.T) {
	t.Parallel()
	onBothStores(t, testClaimsForIdleSlots)
}

// onBothStores runs test as parallel subtests "sqlite" and "postgres",
// each on a fresh store of that backend.
func onBothStores(t *testing.T, test func(t *testing.T, st store.Store)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var st store.Store
			if backend == "sqlite" {
				st = openSQLite(t, nil)
			} else {
				st = openPG(t, pg.Cluster(t).NewSchema(t), nil)
			}
			test(t, st)
		})
	}
}

func testClaimsForIdleSlots(t *testing.T, st store.Store) {
	const slots = 4
	var first []int64
	for range slots + 1 {
		first = append(first, enqueue(t, st, store.NewJob{}).ID)
	}
	cl := &claimLog{Store: st}
	var (
		mu      sync.Mutex
		running = map[string]int64{} // slot → job it runs
		owners  = map[int64]string{}
		bad     []string
	)
	started := make(chan int64, 2*slots)
	gate := make(chan struct{})
	startPool(t, queue.Config{Store: cl, Name: "w", Workers: slots, Runner: queue.RunnerFunc(func(ctx context.Context, j *queue.Job) queue.Result {
		mu.Lock()
		if prev, ok := running[j.LeaseOwner]; ok {
			bad = append(bad, fmt.Sprintf("slot %s got job %d while running job %d", j.LeaseOwner, j.ID, prev))
		}
		running[j.LeaseOwner] = j.ID
		owners[j.ID] = j.LeaseOwner
		mu.Unlock()
		started <- j.ID
		select {
		case <-gate:
		case <-ctx.Done():
		}
		mu.Lock()
		delete(running, j.LeaseOwner)
		mu.Unlock()
		return queue.Result{State: store.StateSucceeded}
	})})

	// The four slots start together, all from the first claim.
	for range slots {
		<-started
	}
	calls := cl.nonEmpty()
	if len(calls) != 1 || len(calls[0].got) != slots {
		t.Fatalf("claims that returned jobs: %+v; want one call returning %d jobs", calls, slots)
	}
	want := []string{"w/1", "w/2", "w/3", "w/4"}
	if got := slices.Sorted(slices.Values(calls[0].workers)); !slices.Equal(got, want) {
		t.Fatalf("first claim for slots %v, want %v", calls[0].workers, want)
	}
	for i, j := range calls[0].got {
		if j.ID != first[i] || j.LeaseOwner != calls[0].workers[i] {
			t.Errorf("claimed job %d for %q, want job %d for %q", j.ID, j.LeaseOwner, first[i], calls[0].workers[i])
		}
	}
	// Every slot is busy: the fifth job waits.
	if j, err := st.GetJob(t.Context(), first[slots]); err != nil || j.State != store.StateQueued {
		t.Fatalf("fifth job = %s, %v; want queued while every slot is busy", j.State, err)
	}
	close(gate)
	fifth := waitJob(t, st, first[slots], "succeeded", inState(store.StateSucceeded))
	for _, id := range first[:slots] {
		waitJob(t, st, id, "succeeded", inState(store.StateSucceeded))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%v", bad)
	}
	if !slices.Contains(want, fifth.LeaseOwner) || owners[fifth.ID] != fifth.LeaseOwner {
		t.Errorf("fifth job ran on %q (lease owner %q), want one of the pool's slots", owners[fifth.ID], fifth.LeaseOwner)
	}
}
