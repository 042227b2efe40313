package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/storetest"
)

// TestBatchNotificationsReachEveryJob: a claim and a CompleteMany of more
// jobs than one batched notification carries (300 topics) still notify
// every job's topic, on another store of the same database too (its
// listener splits the batch), and each job's subscribers hear the claim
// before the completion.
func TestBatchNotificationsReachEveryJob(t *testing.T) {
	t.Parallel()
	const n = 320 // two notifications per statement: 300 topics and 20
	a, b, ids := twoStoresWithJobs(t, n)
	ctx := t.Context()
	var subs []*store.Subscription
	for _, s := range []store.Store{a, b} {
		for _, id := range ids {
			sub, err := s.Subscribe(ctx, store.JobTopic(id))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sub.Close)
			subs = append(subs, sub)
		}
	}
	expect := func(what string) {
		t.Helper()
		for _, sub := range subs {
			if got := storetest.Recv(t, sub); got.Topic != sub.Topic() || got.Payload != "" {
				t.Fatalf("%s: notification %+v on %q, want the topic with no payload", what, got, sub.Topic())
			}
		}
	}

	workers := make([]string, n)
	for i := range workers {
		workers[i] = fmt.Sprintf("w/%d", i+1)
	}
	claimed, err := a.Claim(ctx, store.ClaimParams{Workers: workers, LeaseFor: time.Minute, Start: true})
	if err != nil || len(claimed) != n {
		t.Fatalf("Claim(%d workers) = %d jobs, %v; want %d", n, len(claimed), err, n)
	}
	expect("claim")
	cs := make([]store.Completion, n)
	for i, j := range claimed {
		cs[i] = store.Completion{Lease: j.Lease()}
	}
	for i, o := range a.CompleteMany(ctx, cs) {
		if o.Err != nil || o.Job.State != store.StateSucceeded {
			t.Fatalf("CompleteMany item %d = %s, %v; want succeeded", i, o.Job.State, o.Err)
		}
	}
	expect("complete")
}
