package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

const lease = 30 * time.Second

func (b *bundle) enqueue(t *testing.T, nj store.NewJob) store.Job {
	t.Helper()
	j, err := b.s.Enqueue(b.ctx, nj)
	if err != nil {
		t.Fatalf("Enqueue(%+v): %v", nj, err)
	}
	return j
}

func (b *bundle) claim(t *testing.T, worker string, n int) []store.Job {
	t.Helper()
	jobs, err := b.s.Claim(b.ctx, store.ClaimParams{Worker: worker, Limit: n, LeaseFor: lease})
	if err != nil {
		t.Fatalf("Claim(%s, %d): %v", worker, n, err)
	}
	return jobs
}

func (b *bundle) claimOne(t *testing.T, worker string) store.Job {
	t.Helper()
	jobs := b.claim(t, worker, 1)
	if len(jobs) != 1 {
		t.Fatalf("Claim(%s) returned %d jobs, want 1", worker, len(jobs))
	}
	return jobs[0]
}

func (b *bundle) claimNone(t *testing.T, worker string) {
	t.Helper()
	if jobs := b.claim(t, worker, 10); len(jobs) != 0 {
		t.Fatalf("Claim(%s) returned jobs %v, want none", worker, ids(jobs))
	}
}

// taskAndList returns task id as GetTask reads it and the first page of
// ListTasks.
func (b *bundle) taskAndList(t *testing.T, id int64) (store.Task, []store.Task) {
	t.Helper()
	got, err := b.s.GetTask(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.s.ListTasks(b.ctx, store.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return got, list
}

func (b *bundle) job(t *testing.T, id int64) store.Job {
	t.Helper()
	j, err := b.s.GetJob(b.ctx, id)
	if err != nil {
		t.Fatalf("GetJob(%d): %v", id, err)
	}
	return j
}

// events reads a job's whole log.
func (b *bundle) events(t *testing.T, id int64) []store.JobEvent {
	t.Helper()
	var out []store.JobEvent
	var after int64
	for {
		evs, err := b.s.ReadJobEvents(b.ctx, id, after, 500)
		if err != nil {
			t.Fatalf("ReadJobEvents(%d, %d): %v", id, after, err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
		after = evs[len(evs)-1].Seq
	}
}

// statusTrail renders the status events of a log as "state/attempt[/reason]".
func statusTrail(t *testing.T, evs []store.JobEvent) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		if e.Type != store.JobEventStatus {
			continue
		}
		var s store.StatusEvent
		if err := json.Unmarshal(e.Data, &s); err != nil {
			t.Fatalf("status event %d: %v", e.Seq, err)
		}
		v := fmt.Sprintf("%s/%d", s.State, s.Attempt)
		if s.Reason != "" {
			v += "/" + s.Reason
		}
		out = append(out, v)
	}
	return out
}

// checkGapFree fails unless the log is numbered 1..n.
func checkGapFree(t *testing.T, evs []store.JobEvent) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d, want %d (log must be gap-free and duplicate-free)", i, e.Seq, i+1)
		}
	}
}

func ids(jobs []store.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var fe *store.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("%s: got error %v, want a *store.FieldError for %q", what, err, field)
	}
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("%s: error %v does not match store.ErrInvalid", what, err)
	}
	if fe.Field != field {
		t.Fatalf("%s: error names field %q (%v), want %q", what, fe.Field, err, field)
	}
}

// Recv waits (bounded) for a notification on sub and fails t without
// one.
func Recv(t testing.TB, sub *store.Subscription) store.Notification {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case n, ok := <-sub.C():
		if !ok {
			t.Fatalf("subscription to %q closed, want a notification", sub.Topic())
		}
		return n
	case <-timer.C:
		t.Fatalf("no notification on %q within %s", sub.Topic(), waitTimeout)
	}
	return store.Notification{}
}

// claimRace runs one claimer per params, each claiming with its params
// until nothing is left and handing every job it gets to finish. check,
// if set, reports what is wrong with the i-th job of one claim. It fails t
// on a job claimed twice, on anything check reports, on an error, and
// unless exactly n distinct jobs were claimed and the store holds n jobs,
// all succeeded.
func (b *bundle) claimRace(t *testing.T, n int, params []store.ClaimParams,
	check func(p store.ClaimParams, i int, j store.Job) []string, finish func(store.Lease) error) {
	t.Helper()
	var (
		mu      sync.Mutex
		claimed = map[int64]string{}
		bad     []string
		wg      sync.WaitGroup
		errs    = make(chan error, len(params))
	)
	for _, p := range params {
		wg.Go(func() {
			for {
				got, err := b.s.Claim(b.ctx, p)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for i, j := range got {
					if prev, ok := claimed[j.ID]; ok {
						bad = append(bad, fmt.Sprintf("job %d claimed by %s and %s", j.ID, prev, j.LeaseOwner))
					}
					claimed[j.ID] = j.LeaseOwner
					if check != nil {
						bad = append(bad, check(p, i, j)...)
					}
				}
				mu.Unlock()
				for _, j := range got {
					if err := finish(j.Lease()); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("claimer: %v", err)
	}
	if len(bad) > 0 {
		t.Fatalf("%d violations, e.g. %s", len(bad), bad[0])
	}
	if len(claimed) != n {
		t.Fatalf("claimed %d distinct jobs, want %d", len(claimed), n)
	}
	counts, err := b.s.CountJobs(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[store.State]int64{store.StateSucceeded: int64(n)}, counts); diff != "" {
		t.Fatalf("job counts (-want +got):\n%s", diff)
	}
}

// drain empties sub without waiting.
func drain(sub *store.Subscription) {
	for {
		select {
		case <-sub.C():
		default:
			return
		}
	}
}

func oversize(n int) string {
	b := make([]byte, n+1)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}
