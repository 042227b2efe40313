package storetest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

// testClaimStart: a claim with Start hands the jobs over running, with one
// status event (running: the job is never seen dispatching) in a gap-free
// log, each job's topic notified, the lease fencing every
// later call, and the job completing like any started job. A job with a
// Worker claim (Limit) is started the same way.
func testClaimStart(t *testing.T, b *bundle) {
	first := b.enqueue(t, store.NewJob{})
	high := b.enqueue(t, store.NewJob{Priority: 3})
	second := b.enqueue(t, store.NewJob{})
	workers := []string{"cs/1", `cs "2" \ <é>`}
	want := []int64{high.ID, first.ID}

	sub, err := b.s.Subscribe(b.ctx, store.JobTopic(high.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	got, err := b.s.Claim(b.ctx, store.ClaimParams{Workers: workers, LeaseFor: lease, Start: true})
	if err != nil {
		t.Fatalf("Claim(Start): %v", err)
	}
	if diff := cmp.Diff(want, ids(got)); diff != "" {
		t.Fatalf("claimed (-want +got):\n%s", diff)
	}
	if n := Recv(t, sub); n.Topic != store.JobTopic(high.ID) {
		t.Fatalf("notification on %q, want %q", n.Topic, store.JobTopic(high.ID))
	}
	for i, j := range got {
		if j.State != store.StateRunning || j.LeaseOwner != workers[i] || j.Attempt != 1 || j.LastSeq != 2 ||
			!j.LeaseExpiresAt.Equal(b.clock.Now().Add(lease)) {
			t.Fatalf("claimed job %d = %s, owner %q, attempt %d, last seq %d, lease until %v; want running, owner %q, attempt 1, last seq 2",
				j.ID, j.State, j.LeaseOwner, j.Attempt, j.LastSeq, j.LeaseExpiresAt, workers[i])
		}
		if stored := b.job(t, j.ID); stored.State != store.StateRunning || stored.LastSeq != 2 {
			t.Fatalf("stored job %d = %s at seq %d, want running at 2", j.ID, stored.State, stored.LastSeq)
		}
		log := b.events(t, j.ID)
		checkGapFree(t, log)
		if diff := cmp.Diff([]string{"queued/0", "running/1"}, statusTrail(t, log)); diff != "" {
			t.Fatalf("status trail of job %d (-want +got):\n%s", j.ID, diff)
		}
		wantData, _ := json.Marshal(store.StatusEvent{State: store.StateRunning, Attempt: 1, Worker: workers[i]})
		if ev := log[1]; string(ev.Data) != string(wantData) {
			t.Errorf("status event %d of job %d = %s, want %s", ev.Seq, j.ID, ev.Data, wantData)
		}
	}

	// Already running: Start refuses it; the lease fences as for any
	// started job; it completes.
	_, err = b.s.Start(b.ctx, got[0].Lease())
	wantErr(t, "Start of a job claimed with Start", err, store.ErrInvalidTransition)
	_, err = b.s.Complete(b.ctx, store.Lease{JobID: got[0].ID, Attempt: 1, Owner: workers[1]}, "x")
	wantErr(t, "Complete with another slot's owner", err, store.ErrLeaseLost)
	for _, j := range got {
		done, err := b.s.Complete(b.ctx, j.Lease(), "ok")
		if err != nil || done.State != store.StateSucceeded || done.LastSeq != 3 {
			t.Fatalf("Complete %s = %s at seq %d, %v; want succeeded at 3", j.Lease(), done.State, done.LastSeq, err)
		}
		checkGapFree(t, b.events(t, j.ID))
	}

	// A single worker's claim starts too; nothing due leaves nothing.
	one, err := b.s.Claim(b.ctx, store.ClaimParams{Worker: "cs1", Limit: 2, LeaseFor: lease, Start: true})
	if err != nil || len(one) != 1 || one[0].ID != second.ID || one[0].State != store.StateRunning || one[0].LastSeq != 2 {
		t.Fatalf("Claim(worker, Start) = %+v, %v; want job %d running at seq 2", one, err, second.ID)
	}
	if diff := cmp.Diff([]string{"queued/0", "running/1"}, statusTrail(t, b.events(t, second.ID))); diff != "" {
		t.Errorf("status trail of job %d (-want +got):\n%s", second.ID, diff)
	}
	if none, err := b.s.Claim(b.ctx, store.ClaimParams{Worker: "cs1", Limit: 1, LeaseFor: lease, Start: true}); err != nil || len(none) != 0 {
		t.Errorf("Claim(Start) of an empty queue = %+v, %v", none, err)
	}
}
