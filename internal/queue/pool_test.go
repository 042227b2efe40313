package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

func enqueue(t *testing.T, st store.Store, nj store.NewJob) store.Job {
	t.Helper()
	j, err := st.Enqueue(t.Context(), nj)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestPoolRunsJobToSuccess(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	m := queue.NewMetrics()
	stop := startPool(t, queue.Config{Store: st, Name: "w", Workers: 2, Metrics: m, Runner: queue.RunnerFunc(func(ctx context.Context, j *queue.Job) queue.Result {
		if err := j.Emit(ctx, store.NewJobEvent{Type: "note", Data: json.RawMessage(`{"n":1}`)}); err != nil {
			return queue.Result{State: store.StateFailed, Error: err.Error()}
		}
		if err := j.Checkpoint(ctx, "work", []byte(`{"step":1}`)); err != nil {
			return queue.Result{State: store.StateFailed, Error: err.Error()}
		}
		return queue.Result{State: store.StateSucceeded, Result: "done " + j.Piece,
			Usage: llm.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 56, CacheWriteTokens: 7}, CostUSD: 0.0125}
	})})
	j := enqueue(t, st, store.NewJob{Piece: "p"})
	got := waitJob(t, st, j.ID, "succeeded", inState(store.StateSucceeded))
	// The pool counts the outcome right after the store records it; once
	// Run has returned, every attempt is counted.
	stop()
	if got.Result != "done p" || got.Attempt != 1 || got.Movement != "work" || !strings.HasPrefix(got.LeaseOwner, "w/") {
		t.Errorf("job = %+v", got)
	}
	var types []string
	for _, e := range events(t, st, j.ID) {
		types = append(types, string(e.Type))
	}
	// queued, running (claimed and started at once), note, succeeded
	if want := "status status note status"; strings.Join(types, " ") != want {
		t.Errorf("event types = %v, want %s", types, want)
	}
	snap := m.Snapshot()
	if snap.Claimed != 1 || snap.Outcomes["succeeded"] != 1 {
		t.Errorf("metrics = %+v", snap)
	}
	var b strings.Builder
	m.WritePrometheus(&b)
	for _, line := range []string{"maestro_queue_jobs_claimed_total 1", `maestro_queue_attempts_total{outcome="succeeded"} 1`, `maestro_queue_claim_latency_seconds_bucket{le="+Inf"} 1`,
		`maestro_queue_tokens_total{kind="input"} 1200`, `maestro_queue_tokens_total{kind="output"} 340`,
		`maestro_queue_tokens_total{kind="cache_read"} 56`, `maestro_queue_tokens_total{kind="cache_write"} 7`,
		`maestro_queue_cost_usd_total 0.0125`} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, b.String())
		}
	}
}

func TestPoolRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openSQLite(t, clk.Now)
	var mu sync.Mutex
	var backoffFor []int
	startPool(t, queue.Config{
		Store: st, Now: clk.Now, Poll: time.Hour, // only wake-ups claim
		Backoff: func(attempt int) time.Duration {
			mu.Lock()
			backoffFor = append(backoffFor, attempt)
			mu.Unlock()
			return time.Hour
		},
		Runner: queue.RunnerFunc(func(ctx context.Context, j *queue.Job) queue.Result {
			if j.Attempt == 1 {
				return queue.Result{State: store.StateFailed, Error: "flaky"}
			}
			return queue.Result{State: store.StateSucceeded, Result: "second time lucky"}
		}),
	})
	j := enqueue(t, st, store.NewJob{MaxAttempts: 3})
	queued := waitJob(t, st, j.ID, "queued for a retry", func(j store.Job) bool { return j.State == store.StateQueued && j.Attempt == 1 })
	if want := clk.Now().Add(time.Hour); !queued.ScheduledAt.Equal(want) || queued.Error != "flaky" {
		t.Fatalf("retry scheduled at %s with error %q, want %s and \"flaky\"", queued.ScheduledAt, queued.Error, want)
	}
	clk.Add(time.Hour)
	if err := st.Notify(t.Context(), store.TopicJobs, ""); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, st, j.ID, "succeeded", inState(store.StateSucceeded))
	if done.Attempt != 2 || done.Result != "second time lucky" {
		t.Errorf("job = %+v", done)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(backoffFor) != 1 || backoffFor[0] != 1 {
		t.Errorf("Backoff called for attempts %v, want [1]", backoffFor)
	}
}

func TestPoolNoRetryAndAbort(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	startPool(t, queue.Config{Store: st, Backoff: func(int) time.Duration { return 0 }, Runner: queue.RunnerFunc(func(ctx context.Context, j *queue.Job) queue.Result {
		if j.Piece == "abort" {
			return queue.Result{State: store.StateAborted, Error: "gave up"}
		}
		return queue.Result{State: store.StateFailed, Error: "bad input", NoRetry: true}
	})})
	a := enqueue(t, st, store.NewJob{Piece: "abort", MaxAttempts: 5})
	f := enqueue(t, st, store.NewJob{Piece: "fail", MaxAttempts: 5})
	if got := waitJob(t, st, a.ID, "aborted", inState(store.StateAborted)); got.Attempt != 1 || got.Error != "gave up" {
		t.Errorf("aborted job = %+v", got)
	}
	if got := waitJob(t, st, f.ID, "failed", inState(store.StateFailed)); got.Attempt != 1 || got.Error != "bad input" {
		t.Errorf("failed job = %+v", got)
	}
}

func TestPoolPanicIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	startPool(t, queue.Config{Store: st, Backoff: func(int) time.Duration { return 0 }, Runner: queue.RunnerFunc(func(ctx context.Context, j *queue.Job) queue.Result {
		if j.Attempt == 1 {
			panic("boom")
		}
		return queue.Result{State: store.StateSucceeded}
	})})
	j := enqueue(t, st, store.NewJob{MaxAttempts: 2})
	waitJob(t, st, j.ID, "succeeded", inState(store.StateSucceeded))
	found := false
	for _, e := range events(t, st, j.ID) {
		var s store.StatusEvent
		if e.Type == store.JobEventStatus && json.Unmarshal(e.Data, &s) == nil && s.State == store.StateQueued && strings.Contains(s.Error, "runner panicked: boom") {
			found = true
		}
	}
	if !found {
		t.Errorf("no retry status event with the panic; events: %+v", events(t, st, j.ID))
	}
}

// blocking is a runner whose first attempt blocks until its context ends
// and reports why; later attempts succeed.
type blocking struct {
	started chan *queue.Job
	ended   chan error // context.Cause of the first attempt
	after   chan error // Emit after the context ended
}

func newBlocking() *blocking {
	return &blocking{started: make(chan *queue.Job, 1), ended: make(chan error, 1), after: make(chan error, 1)}
}

func (b *blocking) Run(ctx context.Context, j *queue.Job) queue.Result {
	if j.Attempt > 1 {
		return queue.Result{State: store.StateSucceeded, Result: "attempt 2"}
	}
	b.started <- j
	<-ctx.Done()
	b.ended <- context.Cause(ctx)
	b.after <- j.Emit(context.Background(), store.NewJobEvent{Type: "zombie"})
	return queue.Result{State: store.StateFailed, Error: "interrupted"}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("no %s within %s", what, waitTimeout)
	}
	var zero T
	return zero
}

func TestPoolStopsJobWhoseLeaseWasLost(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openSQLite(t, clk.Now)
	b := newBlocking()
	m := queue.NewMetrics()
	startPool(t, queue.Config{Store: st, Runner: b, LeaseFor: time.Hour, Metrics: m})
	j := enqueue(t, st, store.NewJob{MaxAttempts: 3})
	recv(t, b.started, "start")
	// The lease expires (as if the worker had stalled) and is reaped.
	clk.Add(2 * time.Hour)
	reaped, err := st.ReapExpired(t.Context(), 10)
	if err != nil || len(reaped) != 1 {
		t.Fatalf("reap = %v, %v", reaped, err)
	}
	if cause := recv(t, b.ended, "end of attempt 1"); !errors.Is(cause, queue.ErrJobCancelled) {
		t.Errorf("attempt 1 context ended with %v, want ErrJobCancelled", cause)
	}
	if err := recv(t, b.after, "zombie emit"); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Emit after the lease was lost = %v, want ErrLeaseLost", err)
	}
	done := waitJob(t, st, j.ID, "succeeded", inState(store.StateSucceeded))
	if done.Attempt != 2 {
		t.Errorf("job = %+v", done)
	}
	for _, e := range events(t, st, j.ID) {
		if e.Type == "zombie" {
			t.Errorf("the stale attempt wrote an event: %+v", e)
		}
	}
	if snap := m.Snapshot(); snap.Outcomes["lost"] != 1 || snap.Outcomes["succeeded"] != 1 {
		t.Errorf("outcomes = %v", snap.Outcomes)
	}
}

func TestPoolCancelStopsRunningJob(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	b := newBlocking()
	startPool(t, queue.Config{Store: st, Runner: b, LeaseFor: time.Hour}) // only the notification can stop it in time
	j := enqueue(t, st, store.NewJob{})
	recv(t, b.started, "start")
	if _, err := st.Cancel(t.Context(), j.ID, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, b.ended, "end of the job"); !errors.Is(cause, queue.ErrJobCancelled) {
		t.Errorf("context ended with %v, want ErrJobCancelled", cause)
	}
	if got, _ := st.GetJob(t.Context(), j.ID); got.State != store.StateCancelled {
		t.Errorf("job = %+v", got)
	}
}

func TestPoolShutdown(t *testing.T) {
	t.Parallel()
	t.Run("releases what does not finish", func(t *testing.T) {
		t.Parallel()
		st := openSQLite(t, nil)
		b := newBlocking()
		stop := startPool(t, queue.Config{Store: st, Runner: b, ShutdownGrace: 50 * time.Millisecond})
		j := enqueue(t, st, store.NewJob{MaxAttempts: 1})
		recv(t, b.started, "start")
		stop()
		if cause := recv(t, b.ended, "end of the job"); !errors.Is(cause, queue.ErrShutdown) {
			t.Errorf("context ended with %v, want ErrShutdown", cause)
		}
		got, err := st.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.StateQueued || got.Attempt != 1 || got.MaxAttempts != 2 {
			t.Errorf("released job = %+v, want queued with attempt 1 not counted", got)
		}
	})
	t.Run("EndGrace releases at once", func(t *testing.T) {
		// A worker's second Ctrl-C: it waited the whole grace.
		t.Parallel()
		st := openSQLite(t, nil)
		b := newBlocking()
		p, err := queue.NewPool(queue.Config{Store: st, Runner: b, ShutdownGrace: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		j := enqueue(t, st, store.NewJob{MaxAttempts: 1})
		recv(t, b.started, "start")
		cancel()
		p.EndGrace()
		if cause := recv(t, b.ended, "end of the job"); !errors.Is(cause, queue.ErrShutdown) {
			t.Errorf("context ended with %v, want ErrShutdown", cause)
		}
		if err := recv(t, done, "pool stop"); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.GetJob(t.Context(), j.ID); got.State != store.StateQueued || got.MaxAttempts != 2 {
			t.Errorf("job = %+v, want it released", got)
		}
	})
	t.Run("lets a finishing job finish", func(t *testing.T) {
		t.Parallel()
		st := openSQLite(t, nil)
		started, finish := make(chan struct{}), make(chan struct{})
		stop := startPool(t, queue.Config{Store: st, ShutdownGrace: time.Minute, Runner: queue.RunnerFunc(func(ctx context.Context, j *queue.Job) queue.Result {
			close(started)
			<-finish
			return queue.Result{State: store.StateSucceeded, Result: ctxState(ctx)}
		})})
		j := enqueue(t, st, store.NewJob{})
		recv(t, started, "start")
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		select {
		case <-stopped:
			t.Fatal("the pool stopped before its running job finished")
		default:
		}
		close(finish)
		recv(t, stopped, "pool stop")
		got, _ := st.GetJob(t.Context(), j.ID)
		if got.State != store.StateSucceeded || got.Result != "context live" {
			t.Errorf("job = %+v", got)
		}
	})
}

func ctxState(ctx context.Context) string {
	if ctx.Err() != nil {
		return "context ended"
	}
	return "context live"
}

func TestPoolFiltersProfiles(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	var mu sync.Mutex
	ran := map[int64]bool{}
	startPool(t, queue.Config{Store: st, Profiles: []string{"gpu"}, Runner: queue.RunnerFunc(func(ctx context.Context, j *queue.Job) queue.Result {
		mu.Lock()
		ran[j.ID] = true
		mu.Unlock()
		return queue.Result{State: store.StateSucceeded}
	})})
	other := enqueue(t, st, store.NewJob{Profile: "cpu-big"})
	gpu := enqueue(t, st, store.NewJob{Profile: "gpu"})
	waitJob(t, st, gpu.ID, "succeeded", inState(store.StateSucceeded))
	plain := enqueue(t, st, store.NewJob{})
	waitJob(t, st, plain.ID, "succeeded", inState(store.StateSucceeded))
	if got, _ := st.GetJob(t.Context(), other.ID); got.State != store.StateQueued {
		t.Errorf("a job for another profile ran: %+v", got)
	}
}

func TestNewPoolChecksConfig(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	r := queue.RunnerFunc(func(context.Context, *queue.Job) queue.Result { return queue.Result{} })
	for name, cfg := range map[string]queue.Config{
		"no store":         {Runner: r},
		"no runner":        {Store: st},
		"negative workers": {Store: st, Runner: r, Workers: -1},
	} {
		if _, err := queue.NewPool(cfg); err == nil {
			t.Errorf("%s: NewPool accepted it", name)
		}
	}
}

// deaf is a store whose job notifications never arrive.
type deaf struct{ store.Store }

func (d deaf) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	if strings.HasPrefix(topic, "job:") {
		return nil, errors.New("no notifications here")
	}
	return d.Store.Subscribe(ctx, topic)
}

// Without notifications, the heartbeat is what notices a lost lease.
func TestPoolHeartbeatNoticesLostLease(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openSQLite(t, clk.Now)
	b := newBlocking()
	startPool(t, queue.Config{Store: deaf{st}, Runner: b, LeaseFor: 300 * time.Millisecond})
	j := enqueue(t, st, store.NewJob{MaxAttempts: 3})
	recv(t, b.started, "start")
	clk.Add(time.Hour)
	if reaped, err := st.ReapExpired(t.Context(), 10); err != nil || len(reaped) != 1 {
		t.Fatalf("reap = %v, %v", reaped, err)
	}
	if cause := recv(t, b.ended, "end of attempt 1"); !errors.Is(cause, queue.ErrJobCancelled) {
		t.Errorf("attempt 1 context ended with %v, want ErrJobCancelled", cause)
	}
	if got := waitJob(t, st, j.ID, "succeeded", inState(store.StateSucceeded)); got.Attempt != 2 {
		t.Errorf("job = %+v", got)
	}
}

// TestPoolSlotDoesNotWaitForTheCompleter: while the completer's call is on
// its way (here held), a one-slot pool goes on running short jobs and
// handing over their completions; it does not stall until the call returns.
func TestPoolSlotDoesNotWaitForTheCompleter(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, st store.Store) {
		const n = 6
		var ids []int64
		for range n {
			ids = append(ids, enqueue(t, st, store.NewJob{}).ID)
		}
		h := heldCompletions{Store: st, calls: make(chan struct{}, n), release: make(chan struct{})}
		firstCall := make(chan struct{})
		defer func() { // before the pool stops, also on failure
			select {
			case <-h.release:
			default:
				close(h.release)
			}
		}()
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		ran := make(chan int64, n)
		startPool(t, queue.Config{Store: h, Name: "w", Workers: 1, Runner: queue.RunnerFunc(func(_ context.Context, j *queue.Job) queue.Result {
			if j.ID == ids[1] {
				// Go on once the first job's completion is being
				// recorded (held).
				select {
				case <-h.calls:
					close(firstCall)
				case <-ctx.Done():
				}
			}
			ran <- j.ID
			return queue.Result{State: store.StateSucceeded}
		})})
		for k := range n {
			select {
			case <-ran:
			case <-ctx.Done():
				t.Fatalf("%d of %d jobs ran while the completer's call was held; the slot waits for the completer", k, n)
			}
		}
		<-firstCall
		close(h.release)
		for _, id := range ids {
			waitJob(t, st, id, "succeeded", inState(store.StateSucceeded))
		}
	})
}

// TestPoolClaimsForAllSlotsOfAShortBatch: when a claim filled every slot
// it asked for and the jobs are short, the next claim waits for those
// slots (claimGather) and fills them all, rather than claiming for the
// first slots free and splitting the pool into groups that take turns.
func TestPoolClaimsForAllSlotsOfAShortBatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := openSQLite(t, nil)
		const workers, batches = 8, 6
		for range workers * batches {
			enqueue(t, st, store.NewJob{})
		}
		cl := &claimLog{Store: st}
		ctx, cancel := context.WithCancel(t.Context())
		pool, err := queue.NewPool(queue.Config{Store: cl, Name: "w", Workers: workers, Poll: time.Hour,
			Runner: queue.RunnerFunc(func(context.Context, *queue.Job) queue.Result {
				return queue.Result{State: store.StateSucceeded}
			})})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- pool.Run(ctx) }()
		time.Sleep(time.Minute) // fake time: long after the queue is drained
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		counts, err := st.CountJobs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if counts[store.StateSucceeded] != workers*batches || len(counts) != 1 {
			t.Fatalf("job counts %v, want %d succeeded", counts, workers*batches)
		}
		var full [][2]int // slots claimed for, jobs returned
		for _, c := range cl.nonEmpty() {
			full = append(full, [2]int{len(c.workers), len(c.got)})
		}
		want := slices.Repeat([][2]int{{workers, workers}}, batches)
		if diff := cmp.Diff(want, full); diff != "" {
			t.Errorf("claims that returned jobs, [slots, jobs] (-want +got):\n%s", diff)
		}
	})
}
