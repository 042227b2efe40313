package queue_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// cancelBeforeFollow cancels each job just before the pool subscribes to
// its topic: the cancel's notification is gone before anyone listens, as
// when a user cancels between the pool's claim and its subscription.
type cancelBeforeFollow struct{ store.Store }

func (c cancelBeforeFollow) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	if id, ok := strings.CutPrefix(topic, "job:"); ok {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil, err
		}
		if _, err := c.Cancel(ctx, n, "cancelled before the pool followed it"); err != nil {
			return nil, err
		}
	}
	return c.Store.Subscribe(ctx, topic)
}

// TestPoolSeesCancelBeforeItFollowsTheJob: the pool claims and starts a
// job in one call and subscribes to its topic afterwards; a cancel in
// between sends its notification to no one, and the running job still
// stops at once (its first check needs no notification), long before a
// heartbeat (an hour's lease) would notice.
func TestPoolSeesCancelBeforeItFollowsTheJob(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	b := newBlocking()
	startPool(t, queue.Config{Store: cancelBeforeFollow{st}, Runner: b, LeaseFor: time.Hour})
	j := enqueue(t, st, store.NewJob{})
	recv(t, b.started, "start")
	if cause := recv(t, b.ended, "end of the job"); !errors.Is(cause, queue.ErrJobCancelled) {
		t.Errorf("context ended with %v, want ErrJobCancelled", cause)
	}
	if got, _ := st.GetJob(t.Context(), j.ID); got.State != store.StateCancelled {
		t.Errorf("job = %+v", got)
	}
}

// heldCompletions holds every CompleteMany call until release is closed.
type heldCompletions struct {
	store.Store
	calls   chan struct{}
	release chan struct{}
}

func (h heldCompletions) CompleteMany(ctx context.Context, cs []store.Completion) []store.JobOutcome {
	h.calls <- struct{}{}
	<-h.release
	return h.Store.CompleteMany(ctx, cs)
}

// TestPoolSlotRunsNextJobWhileCompletionIsRecorded: a slot whose job
// succeeded hands the completion to the completer and runs the next job
// while the store records it (claims overlap completions); every job ends
// succeeded and counted once the completions go through.
func TestPoolSlotRunsNextJobWhileCompletionIsRecorded(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, st store.Store) {
		held := heldCompletions{Store: st, calls: make(chan struct{}, 4), release: make(chan struct{})}
		started := make(chan int64, 2)
		m := queue.NewMetrics()
		stop := startPool(t, queue.Config{Store: held, Workers: 1, Metrics: m, Runner: queue.RunnerFunc(func(_ context.Context, j *queue.Job) queue.Result {
			started <- j.ID
			return queue.Result{State: store.StateSucceeded, Result: "ok"}
		})})
		first := enqueue(t, st, store.NewJob{})
		if id := recv(t, started, "start of the first job"); id != first.ID {
			t.Fatalf("started job %d, want %d", id, first.ID)
		}
		recv(t, held.calls, "completion of the first job")
		second := enqueue(t, st, store.NewJob{})
		// The only slot runs the second job while the first's
		// completion is still held.
		if id := recv(t, started, "start of the second job"); id != second.ID {
			t.Fatalf("started job %d, want %d", id, second.ID)
		}
		if j, _ := st.GetJob(t.Context(), first.ID); j.State != store.StateRunning {
			t.Fatalf("first job while its completion is held = %s, want running", j.State)
		}
		close(held.release)
		for _, id := range []int64{first.ID, second.ID} {
			if j := waitJob(t, st, id, "succeeded", inState(store.StateSucceeded)); j.Result != "ok" {
				t.Errorf("job %d = %+v", id, j)
			}
		}
		stop()
		if snap := m.Snapshot(); snap.Outcomes["succeeded"] != 2 || len(snap.Outcomes) != 1 {
			t.Errorf("outcomes = %v, want 2 succeeded", snap.Outcomes)
		}
	})
}
