package eventbus

import (
	"context"
	"slices"
	"sync"

	"github.com/maestro-run/maestro/internal/store"
)

// jobWatch holds the store subscriptions of the live jobs' logs
// (JobTopic) for FollowJobs: a wake-up marks the job to be read and
// signals wake; take returns the marked jobs.
type jobWatch struct {
	ctx  context.Context
	src  JobSource
	wake chan struct{}
	// seen is the highest job id listed so far (by the loop only).
	seen int64

	mu      sync.Mutex
	watched map[int64]context.CancelFunc
	dirty   map[int64]bool
	wg      sync.WaitGroup
}

func newJobWatch(ctx context.Context, src JobSource) *jobWatch {
	return &jobWatch{ctx: ctx, src: src, wake: make(chan struct{}, 1),
		watched: map[int64]context.CancelFunc{}, dirty: map[int64]bool{}}
}

// live subscribes to the logs of the jobs in a live state not watched
// yet and marks them to be read (their events up to the subscription
// are read then). With all, every live job is marked; without, the jobs
// created since the last listing are marked too, whatever their state
// (one queued and finished already is no longer live). It returns how
// many jobs it found that were neither watched nor listed before.
func (w *jobWatch) live(all bool) int {
	found := 0
	if !all {
		found += w.fresh()
	}
	for after := int64(0); ; {
		jobs, err := w.src.ListJobs(w.ctx, store.JobFilter{States: liveStates, AfterID: after, Limit: store.MaxListLimit})
		if err != nil {
			// The next wake-up or reconcile lists them again.
			return found
		}
		for _, j := range jobs {
			after = j.ID
			w.saw(j.ID)
			if w.watch(j.ID) {
				found++
				w.mark(j.ID)
			} else if all {
				w.mark(j.ID)
			}
		}
		if len(jobs) < store.MaxListLimit {
			return found
		}
	}
}

// fresh marks the jobs created since the last listing (ids above seen),
// watching the live ones, and returns how many there are.
func (w *jobWatch) fresh() int {
	found := 0
	for {
		jobs, err := w.src.ListJobs(w.ctx, store.JobFilter{AfterID: w.seen, Limit: store.MaxListLimit})
		if err != nil {
			return found
		}
		for _, j := range jobs {
			w.saw(j.ID)
			if slices.Contains(liveStates, j.State) {
				w.watch(j.ID)
			}
			w.mark(j.ID)
			found++
		}
		if len(jobs) < store.MaxListLimit {
			return found
		}
	}
}

// saw records that job id was listed.
func (w *jobWatch) saw(id int64) { w.seen = max(w.seen, id) }

// watch subscribes to job id's log; false when it is watched already
// (or the subscription failed: the reconcile pass reads the job).
func (w *jobWatch) watch(id int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watched[id]; ok {
		return false
	}
	ctx, cancel := context.WithCancel(w.ctx)
	sub, err := w.src.Subscribe(ctx, store.JobTopic(id))
	if err != nil {
		cancel()
		return false
	}
	w.watched[id] = cancel
	w.wg.Go(func() {
		defer sub.Close()
		for range sub.C() {
			w.mark(id)
		}
	})
	return true
}

// unwatch ends the subscription to job id's log.
func (w *jobWatch) unwatch(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cancel, ok := w.watched[id]; ok {
		cancel()
		delete(w.watched, id)
	}
}

// mark asks for job id's log to be read.
func (w *jobWatch) mark(id int64) {
	w.mu.Lock()
	w.dirty[id] = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// take returns the jobs marked since the last take, in id order.
func (w *jobWatch) take() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.dirty))
	for id := range w.dirty {
		ids = append(ids, id)
	}
	clear(w.dirty)
	slices.Sort(ids)
	return ids
}

// close ends every subscription and waits for their goroutines.
func (w *jobWatch) close() {
	w.mu.Lock()
	for id, cancel := range w.watched {
		cancel()
		delete(w.watched, id)
	}
	w.mu.Unlock()
	w.wg.Wait()
}
