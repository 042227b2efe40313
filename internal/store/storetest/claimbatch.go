package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

// testClaimBatchOwners: a claim with Workers leases the i-th job in claim
// order to the i-th name, records each owner in the job's status event,
// notifies each job's topic, and fences each job by its own owner.
func testClaimBatchOwners(t *testing.T, b *bundle) {
	low := b.enqueue(t, store.NewJob{Priority: -1})
	first := b.enqueue(t, store.NewJob{})
	high := b.enqueue(t, store.NewJob{Priority: 5})
	second := b.enqueue(t, store.NewJob{})
	// Names that need JSON escaping must reach the status events intact.
	workers := []string{"pool/1", `pool "2" \ <é>&`, "pool/3"}
	want := []int64{high.ID, first.ID, second.ID}

	subs := make([]*store.Subscription, len(want))
	for i, id := range want {
		sub, err := b.s.Subscribe(b.ctx, store.JobTopic(id))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs[i] = sub
	}
	expectNotified := func(what string) {
		t.Helper()
		for i, sub := range subs {
			if n := Recv(t, sub); n.Topic != store.JobTopic(want[i]) {
				t.Fatalf("%s: notification on %q, want %q", what, n.Topic, store.JobTopic(want[i]))
			}
			drain(sub)
		}
	}

	got, err := b.s.Claim(b.ctx, store.ClaimParams{Workers: workers, LeaseFor: lease})
	if err != nil {
		t.Fatalf("Claim(workers %q): %v", workers, err)
	}
	if diff := cmp.Diff(want, ids(got)); diff != "" {
		t.Fatalf("claimed (-want +got):\n%s", diff)
	}
	expectNotified("claim")
	for i, j := range got {
		if j.LeaseOwner != workers[i] || j.State != store.StateDispatching || j.Attempt != 1 || j.LastSeq != 2 {
			t.Fatalf("claimed job %d = owner %q, %s, attempt %d, last seq %d; want owner %q, dispatching, attempt 1, last seq 2",
				j.ID, j.LeaseOwner, j.State, j.Attempt, j.LastSeq, workers[i])
		}
		log := b.events(t, j.ID)
		checkGapFree(t, log)
		wantData, _ := json.Marshal(store.StatusEvent{State: store.StateDispatching, Attempt: 1, Worker: workers[i]})
		if len(log) != 2 || log[1].Type != store.JobEventStatus || string(log[1].Data) != string(wantData) {
			t.Fatalf("log of job %d = %+v, want its status event %s", j.ID, log, wantData)
		}
	}

	// Each lease names its own owner: another slot's name is refused.
	_, err = b.s.Start(b.ctx, store.Lease{JobID: got[0].ID, Attempt: 1, Owner: workers[1]})
	wantErr(t, "Start with another slot's owner", err, store.ErrLeaseLost)
	for _, j := range got {
		r, err := b.s.Start(b.ctx, j.Lease())
		if err != nil {
			t.Fatalf("Start %s: %v", j.Lease(), err)
		}
		if r.State != store.StateRunning || r.LeaseOwner != j.LeaseOwner {
			t.Fatalf("started job = %s owner %q", r.State, r.LeaseOwner)
		}
	}
	expectNotified("start")
	_, err = b.s.Start(b.ctx, got[0].Lease())
	wantErr(t, "Start twice", err, store.ErrInvalidTransition)
	for _, j := range got {
		if _, err := b.s.Complete(b.ctx, j.Lease(), "ok"); err != nil {
			t.Fatalf("Complete %s: %v", j.Lease(), err)
		}
	}
	expectNotified("complete")
	for i, j := range got {
		log := b.events(t, j.ID)
		checkGapFree(t, log)
		if diff := cmp.Diff([]string{"queued/0", "dispatching/1", "running/1", "succeeded/1"}, statusTrail(t, log)); diff != "" {
			t.Errorf("status trail of job %d (-want +got):\n%s", j.ID, diff)
		}
		wantData, _ := json.Marshal(store.StatusEvent{State: store.StateSucceeded, Attempt: 1, Worker: workers[i]})
		if last := log[len(log)-1]; string(last.Data) != string(wantData) {
			t.Errorf("final status event of job %d = %s, want %s", j.ID, last.Data, wantData)
		}
	}

	// More names than due jobs: the first names get the jobs.
	rest, err := b.s.Claim(b.ctx, store.ClaimParams{Workers: []string{"x/1", "x/2", "x/3"}, LeaseFor: lease})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 1 || rest[0].ID != low.ID || rest[0].LeaseOwner != "x/1" {
		t.Fatalf("claim of the last job = %+v, want job %d for x/1", rest, low.ID)
	}
	b.claimNone(t, "x")

	for _, tc := range []struct {
		name  string
		p     store.ClaimParams
		field string
	}{
		{"worker and workers", store.ClaimParams{Worker: "w", Workers: []string{"a"}, LeaseFor: lease}, "worker"},
		{"limit not matching", store.ClaimParams{Workers: []string{"a", "b"}, Limit: 1, LeaseFor: lease}, "limit"},
		{"empty name", store.ClaimParams{Workers: []string{"a", ""}, LeaseFor: lease}, "workers[1]"},
		{"control character", store.ClaimParams{Workers: []string{"a\nb"}, LeaseFor: lease}, "workers[0]"},
		{"too many", store.ClaimParams{Workers: make([]string, store.MaxClaim+1), LeaseFor: lease}, "workers"},
	} {
		_, err := b.s.Claim(b.ctx, tc.p)
		wantField(t, tc.name, err, tc.field)
	}
}

// testClaimBatchConcurrent: pools claiming batches for many slots at once,
// with different capabilities, never share a job, honour profile and task
// class, and run every job's lifecycle with a gap-free log.
func testClaimBatchConcurrent(t *testing.T, b *bundle) {
	const jobs, pools, slots = 600, 6, 7
	kind := map[int64]string{}
	for i := range jobs {
		nj := store.NewJob{} // a third need gpu or review
		switch i % 6 {
		case 1:
			nj.Profile = "gpu"
		case 2:
			nj.TaskClass = "review"
		}
		j := b.enqueue(t, nj)
		kind[j.ID] = nj.Profile + "/" + nj.TaskClass
	}
	var params []store.ClaimParams
	for p := range pools {
		// Even pools serve gpu, odd pools review; pool 0 serves both.
		var profiles, classes []string
		if p%2 == 0 {
			profiles = []string{"gpu"}
		} else {
			classes = []string{"review"}
		}
		if p == 0 {
			classes = []string{"review"}
		}
		names := make([]string, slots)
		for s := range names {
			names[s] = fmt.Sprintf("p%d/%d", p, s+1)
		}
		params = append(params, store.ClaimParams{Workers: names, Profiles: profiles, TaskClasses: classes, LeaseFor: lease})
	}
	check := func(p store.ClaimParams, i int, j store.Job) []string {
		var bad []string
		if j.LeaseOwner != p.Workers[i] {
			bad = append(bad, fmt.Sprintf("job %d: owner %q, want %q", j.ID, j.LeaseOwner, p.Workers[i]))
		}
		if (j.Profile != "" && !slices.Contains(p.Profiles, j.Profile)) || (j.TaskClass != "" && !slices.Contains(p.TaskClasses, j.TaskClass)) {
			bad = append(bad, fmt.Sprintf("job %d (%s/%s) claimed by %s", j.ID, j.Profile, j.TaskClass, j.LeaseOwner))
		}
		return bad
	}
	finish := func(l store.Lease) error {
		if _, err := b.s.Start(b.ctx, l); err != nil {
			return err
		}
		if _, err := b.s.AppendJobEvents(b.ctx, l, []store.NewJobEvent{{Type: "a"}, {Type: "b"}}); err != nil {
			return err
		}
		_, err := b.s.Complete(b.ctx, l, "ok")
		return err
	}
	b.claimRace(t, len(kind), params, check, finish)
}

// testCompleteMany: CompleteMany completes each item as Complete would:
// fenced per lease, a status event each, the parent of a last subtask
// resumed, and a bad item failing alone; each outcome carries its job as
// completed.
func testCompleteMany(t *testing.T, b *bundle) {
	checkCompleteBatch(t, b, "CompleteMany", func(cs []store.Completion) []error {
		outs := b.s.CompleteMany(b.ctx, cs)
		if len(outs) != len(cs) {
			t.Fatalf("CompleteMany returned %d outcomes for %d items", len(outs), len(cs))
		}
		errs := make([]error, len(outs))
		for k, o := range outs {
			errs[k] = o.Err
			if o.Err == nil && (o.Job.ID != cs[k].Lease.JobID || o.Job.State != store.StateSucceeded || o.Job.Result != cs[k].Result ||
				!o.Job.FinishedAt.Equal(b.clock.Now()) || !o.Job.LeaseExpiresAt.IsZero()) {
				t.Errorf("item %d: %+v; want job %d succeeded with %q", k, o.Job, cs[k].Lease.JobID, cs[k].Result)
			}
		}
		return errs
	})
}

// checkCompleteBatch runs one batch of completions through complete (a
// store's CompleteMany or CompleteManyErrs, as one error per item): a
// running and a dispatching job, the last subtask of a waiting parent, a
// job cancelled meanwhile, another owner's lease, a NUL in a result and a
// second item for one lease. Each good item's job is stored succeeded
// with its result and a gap-free log ending in its status event; each bad
// item fails alone with its error; the parent is queued again.
func checkCompleteBatch(t *testing.T, b *bundle, what string, complete func([]store.Completion) []error) {
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
	if _, err := b.s.Start(b.ctx, got[1].Lease()); err != nil { // running and dispatching both complete
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
	errs := complete(cs)
	if len(errs) != len(cs) {
		t.Fatalf("%s returned %d errors for %d items", what, len(errs), len(cs))
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
		t.Errorf("cancelled job after %s = %s", what, j.State)
	}
	if j := b.job(t, plain2.ID); j.Result != "two" {
		t.Errorf("job completed twice in one call has result %q, want the first item's", j.Result)
	}
	// The child was the parent's last subtask.
	want := []string{"queued/0", "dispatching/1", "waiting_subtasks/1/subtasks", "queued/1/subtasks finished"}
	if diff := cmp.Diff(want, statusTrail(t, b.events(t, parent.ID))); diff != "" {
		t.Errorf("parent status trail (-want +got):\n%s", diff)
	}
	if errs := complete(nil); len(errs) != 0 {
		t.Errorf("%s(nil) = %v", what, errs)
	}
}

// testStartMany: StartMany starts each item as Start would: fenced per
// lease, a status event each, a bad item failing alone.
func testStartMany(t *testing.T, b *bundle) {
	for range 3 {
		b.enqueue(t, store.NewJob{})
	}
	got, err := b.s.Claim(b.ctx, store.ClaimParams{Workers: []string{"s/1", "s/2", "s/3"}, LeaseFor: lease})
	if err != nil || len(got) != 3 {
		t.Fatalf("Claim = %d jobs, %v; want 3", len(got), err)
	}
	if _, err := b.s.Cancel(b.ctx, got[1].ID, "gone"); err != nil {
		t.Fatal(err)
	}
	sub, err := b.s.Subscribe(b.ctx, store.JobTopic(got[2].ID))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	b.clock.Advance(time.Second)
	leases := []store.Lease{
		got[0].Lease(),
		got[1].Lease(),
		{JobID: got[2].ID, Attempt: 1, Owner: "s/1"},
		got[2].Lease(),
		got[0].Lease(),
		{JobID: got[0].ID, Attempt: 0, Owner: "s/1"},
	}
	outs := b.s.StartMany(b.ctx, leases)
	if len(outs) != len(leases) {
		t.Fatalf("StartMany returned %d outcomes for %d leases", len(outs), len(leases))
	}
	for _, k := range []int{0, 3} {
		o := outs[k]
		if o.Err != nil || o.Job.ID != leases[k].JobID || o.Job.State != store.StateRunning || o.Job.LeaseOwner != leases[k].Owner ||
			!o.Job.UpdatedAt.Equal(b.clock.Now()) || o.Job.LastSeq != 3 {
			t.Errorf("item %d: %+v, %v; want job %d running at seq 3", k, o.Job, o.Err, leases[k].JobID)
		}
		log := b.events(t, o.Job.ID)
		checkGapFree(t, log)
		wantData, _ := json.Marshal(store.StatusEvent{State: store.StateRunning, Attempt: 1, Worker: leases[k].Owner})
		if len(log) != 3 || string(log[2].Data) != string(wantData) {
			t.Errorf("item %d: log %+v, want the running status event %s last", k, log, wantData)
		}
	}
	if n := Recv(t, sub); n.Topic != store.JobTopic(got[2].ID) {
		t.Errorf("notification on %q, want %q", n.Topic, store.JobTopic(got[2].ID))
	}
	wantErr(t, "item on a cancelled job", outs[1].Err, store.ErrLeaseLost)
	wantErr(t, "item with another slot's owner", outs[2].Err, store.ErrLeaseLost)
	wantErr(t, "item started twice", outs[4].Err, store.ErrInvalidTransition)
	wantErr(t, "item with attempt 0", outs[5].Err, store.ErrInvalid)
	if j := b.job(t, got[1].ID); j.State != store.StateCancelled {
		t.Errorf("cancelled job after StartMany = %s", j.State)
	}
	if outs := b.s.StartMany(b.ctx, nil); len(outs) != 0 {
		t.Errorf("StartMany(nil) = %v", outs)
	}
}
