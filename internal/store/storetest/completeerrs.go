package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

// ErrCompleter is a store that can complete jobs without reading them back
// (the SQL stores' CompleteManyErrs, which a queue.Pool's completer uses):
// CompleteMany's outcomes without the jobs.
type ErrCompleter interface {
	CompleteManyErrs(ctx context.Context, cs []store.Completion) []error
}

// testCompleteManyErrs: a store's CompleteManyErrs, if it has one, does
// what CompleteMany does (testCompleteMany) and reports the same error per
// item: fenced per lease, a status event each, the parent of a last
// subtask resumed, a bad item failing alone.
func testCompleteManyErrs(t *testing.T, b *bundle) {
	ec, ok := b.s.(ErrCompleter)
	if !ok {
		t.Skip("the store has no CompleteManyErrs")
	}
	parent := b.enqueue(t, store.NewJob{})
	pc := b.claimOne(t, "p")
	child := b.enqueue(t, store.NewJob{ParentJobID: parent.ID})
	if _, err := b.s.Wait(b.ctx, pc.Lease(), store.WaitParams{State: store.StateWaitingSubtasks, Reason: "subtasks"}); err != nil {
		t.Fatal(err)
	}
	plain1 := b.enqueue(t, store.NewJob{})
	plain2 := b.enqueue(t, store.NewJob{})
	stale := b.enqueue(t, store.NewJob{})
	got := b.claim(t, "w", 10)
	if diff := cmp.Diff([]int64{child.ID, plain1.ID, plain2.ID, stale.ID}, ids(got)); diff != "" {
		t.Fatalf("claimed (-want +got):\n%s", diff)
	}
	if _, err := b.s.Start(b.ctx, got[1].Lease()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Cancel(b.ctx, stale.ID, "gone"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	cs := []store.Completion{
		{Lease: got[1].Lease(), Result: "one"},
		{Lease: got[3].Lease(), Result: "cancelled meanwhile"},
		{Lease: got[0].Lease(), Result: "child"},
		{Lease: store.Lease{JobID: got[2].ID, Attempt: 1, Owner: "zombie"}, Result: "zombie"},
		{Lease: got[2].Lease(), Result: "two\x00"},
		{Lease: got[2].Lease(), Result: "two"},
		{Lease: got[2].Lease(), Result: "two again"},
	}
	errs := ec.CompleteManyErrs(b.ctx, cs)
	if len(errs) != len(cs) {
		t.Fatalf("CompleteManyErrs returned %d errors for %d items", len(errs), len(cs))
	}
	for _, k := range []int{0, 2, 5} {
		if errs[k] != nil {
			t.Errorf("item %d: %v", k, errs[k])
			continue
		}
		j := b.job(t, cs[k].Lease.JobID)
		if j.State != store.StateSucceeded || j.Result != cs[k].Result || !j.FinishedAt.Equal(b.clock.Now()) || !j.LeaseExpiresAt.IsZero() {
			t.Errorf("item %d: stored %+v; want succeeded with %q", k, j, cs[k].Result)
		}
		log := b.events(t, j.ID)
		checkGapFree(t, log)
		trail := statusTrail(t, log)
		if trail[len(trail)-1] != "succeeded/1" || log[len(log)-1].Seq != j.LastSeq {
			t.Errorf("item %d: status trail %v, last seq %d; want it to end with succeeded/1 at seq %d", k, trail, log[len(log)-1].Seq, j.LastSeq)
		}
	}
	wantErr(t, "item on a cancelled job", errs[1], store.ErrLeaseLost)
	wantErr(t, "item with another owner", errs[3], store.ErrLeaseLost)
	wantField(t, "item with a NUL in its result", errs[4], "result")
	wantErr(t, "second item for the same lease", errs[6], store.ErrLeaseLost)
	if j := b.job(t, stale.ID); j.State != store.StateCancelled {
		t.Errorf("cancelled job after CompleteManyErrs = %s", j.State)
	}
	if j := b.job(t, plain2.ID); j.Result != "two" {
		t.Errorf("job completed twice in one call has result %q, want the first item's", j.Result)
	}
	want := []string{"queued/0", "dispatching/1", "waiting_subtasks/1/subtasks", "queued/1/subtasks finished"}
	if diff := cmp.Diff(want, statusTrail(t, b.events(t, parent.ID))); diff != "" {
		t.Errorf("parent status trail (-want +got):\n%s", diff)
	}
	if errs := ec.CompleteManyErrs(b.ctx, nil); len(errs) != 0 {
		t.Errorf("CompleteManyErrs(nil) = %v", errs)
	}
}
