package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// testRunState: a job's run state is saved under its lease, read back by
// any later attempt (another worker resuming the job), replaced by each
// save, and refused to a lease that no longer holds the job.
func testRunState(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{})
	if _, err := b.s.RunState(b.ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RunState of a job that saved none: err = %v, want ErrNotFound", err)
	}
	first := b.claimOne(t, "w1").Lease()
	if _, err := b.s.Start(b.ctx, first); err != nil {
		t.Fatal(err)
	}
	// Binary data (compressed state) survives unchanged.
	data1 := []byte{0x1f, 0x8b, 0x00, 0xff, 'a'}
	data2 := bytes.Repeat([]byte{0x00, 0x01, 0xfe}, 100_000)
	for _, tc := range []struct {
		movement string
		data     []byte
	}{{"plan", data1}, {"implement", data2}} {
		if err := b.s.SaveRunState(b.ctx, first, tc.movement, tc.data); err != nil {
			t.Fatalf("SaveRunState(%s): %v", tc.movement, err)
		}
		got, err := b.s.RunState(b.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.JobID != j.ID || got.Attempt != 1 || got.Movement != tc.movement || !bytes.Equal(got.Data, tc.data) || !got.UpdatedAt.Equal(b.clock.Now()) {
			t.Fatalf("RunState after saving %s = {job %d attempt %d movement %q %d bytes at %v}, want {job %d attempt 1 movement %q %d bytes at %v}",
				tc.movement, got.JobID, got.Attempt, got.Movement, len(got.Data), got.UpdatedAt, j.ID, tc.movement, len(tc.data), b.clock.Now())
		}
	}
	for name, data := range map[string][]byte{"empty": nil, "too large": make([]byte, store.MaxRunStateBytes+1)} {
		err := b.s.SaveRunState(b.ctx, first, "plan", data)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SaveRunState with %s data: err = %v, want ErrInvalid", name, err)
		}
	}

	// The worker dies; another claims the job and finds the state.
	b.clock.Advance(lease + time.Second)
	if _, err := b.s.ReapExpired(b.ctx, 10); err != nil {
		t.Fatal(err)
	}
	second := b.claimOne(t, "w2").Lease()
	got, err := b.s.RunState(b.ctx, j.ID)
	if err != nil || got.Movement != "implement" || !bytes.Equal(got.Data, data2) {
		t.Fatalf("RunState at the second claim = movement %q, %d bytes, err %v; want the first attempt's", got.Movement, len(got.Data), err)
	}
	// The old worker, if it was only slow, can no longer write.
	err = b.s.SaveRunState(b.ctx, first, "zombie", []byte("zombie"))
	wantErr(t, "SaveRunState with the reaped lease", err, store.ErrLeaseLost)
	if err := b.s.SaveRunState(b.ctx, second, "review", []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.s.RunState(b.ctx, j.ID); err != nil || got.Attempt != 2 || string(got.Data) != "second" {
		t.Fatalf("RunState after the second attempt saved = attempt %d %q, err %v; want attempt 2 \"second\"", got.Attempt, got.Data, err)
	}
	// A waiting job holds no lease: nothing may write its state.
	if _, err := b.s.Wait(b.ctx, second, store.WaitParams{State: store.StateWaitingHuman, Reason: "question"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SaveRunState of a waiting job", b.s.SaveRunState(b.ctx, second, "review", []byte("late")), store.ErrLeaseLost)
	if got, _ := b.s.RunState(b.ctx, j.ID); string(got.Data) != "second" {
		t.Errorf("RunState after refused writes = %q, want \"second\"", got.Data)
	}
}

// testCancelCascades: cancelling a parent job cancels its unfinished
// subtasks (child jobs), queued or running, and leaves finished ones.
func testCancelCascades(t *testing.T, b *bundle) {
	parent := b.enqueue(t, store.NewJob{})
	pc := b.claimOne(t, "p")
	done := b.enqueue(t, store.NewJob{ParentJobID: parent.ID})
	dc := b.claimOne(t, "c1")
	if _, err := b.s.Complete(b.ctx, dc.Lease(), "done"); err != nil {
		t.Fatal(err)
	}
	running := b.enqueue(t, store.NewJob{ParentJobID: parent.ID})
	rc := b.claimOne(t, "c2")
	if _, err := b.s.Start(b.ctx, rc.Lease()); err != nil {
		t.Fatal(err)
	}
	queued := b.enqueue(t, store.NewJob{ParentJobID: parent.ID})
	other := b.enqueue(t, store.NewJob{})
	if _, err := b.s.Wait(b.ctx, pc.Lease(), store.WaitParams{State: store.StateWaitingSubtasks, Reason: "subtasks"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Cancel(b.ctx, parent.ID, "user"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   int64
		want store.State
	}{{parent.ID, store.StateCancelled}, {done.ID, store.StateSucceeded}, {running.ID, store.StateCancelled}, {queued.ID, store.StateCancelled}, {other.ID, store.StateQueued}} {
		if got := b.job(t, c.id); got.State != c.want {
			t.Errorf("job %d after cancelling its parent = %s, want %s", c.id, got.State, c.want)
		}
	}
	_, err := b.s.Heartbeat(b.ctx, rc.Lease(), lease)
	wantErr(t, "Heartbeat of a cancelled subtask", err, store.ErrLeaseLost)
	if got, want := b.job(t, queued.ID).Error, fmt.Sprintf("its parent job %d was cancelled", parent.ID); got != want {
		t.Errorf("queued subtask's error = %q, want %q", got, want)
	}
}
