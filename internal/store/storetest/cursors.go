package storetest

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

// testJobEventCursors: a job's publish cursor starts at 0, only moves
// forward (also when processes race to advance it), is listed in job id
// order, and is not recorded for a job that does not exist.
func testJobEventCursors(t *testing.T, b *bundle) {
	j1 := b.enqueue(t, store.NewJob{Piece: "general"})
	j2 := b.enqueue(t, store.NewJob{Piece: "general"})
	cursor := func(id int64) int64 {
		t.Helper()
		seq, err := b.s.JobEventCursor(b.ctx, id)
		if err != nil {
			t.Fatalf("JobEventCursor(%d): %v", id, err)
		}
		return seq
	}
	advance := func(id, seq int64) {
		t.Helper()
		if err := b.s.AdvanceJobEventCursor(b.ctx, id, seq); err != nil {
			t.Fatalf("AdvanceJobEventCursor(%d, %d): %v", id, seq, err)
		}
	}
	if got := cursor(j1.ID); got != 0 {
		t.Errorf("cursor of a job never published = %d, want 0", got)
	}
	advance(j1.ID, 3)
	advance(j1.ID, 2) // a slower process, behind
	advance(j1.ID, 3)
	if got := cursor(j1.ID); got != 3 {
		t.Errorf("cursor after 3, 2, 3 = %d, want 3 (never back)", got)
	}
	advance(j1.ID, 7)
	advance(j2.ID, 1)
	const gone = 1 << 40
	advance(gone, 5)
	if got := cursor(gone); got != 0 {
		t.Errorf("cursor of a job that does not exist = %d, want 0", got)
	}
	got, err := b.s.ListJobEventCursors(b.ctx, 0, 0)
	want := []store.JobEventCursor{{JobID: j1.ID, Seq: 7}, {JobID: j2.ID, Seq: 1}}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("ListJobEventCursors = %+v, %v; want %+v", got, err, want)
	}
	if got, err := b.s.ListJobEventCursors(b.ctx, 0, 1); err != nil || !cmp.Equal(want[:1], got) {
		t.Errorf("ListJobEventCursors(limit 1) = %+v, %v; want %+v", got, err, want[:1])
	}
	if got, err := b.s.ListJobEventCursors(b.ctx, j1.ID, 0); err != nil || !cmp.Equal(want[1:], got) {
		t.Errorf("ListJobEventCursors(after %d) = %+v, %v; want %+v", j1.ID, got, err, want[1:])
	}
	err = b.s.AdvanceJobEventCursor(b.ctx, j2.ID, -1)
	wantErr(t, "AdvanceJobEventCursor to -1", err, store.ErrInvalid)

	// Processes racing, each advancing past what it published: the
	// cursor ends at the highest, whatever the order.
	j3 := b.enqueue(t, store.NewJob{Piece: "general"})
	const racers = 8
	var wg sync.WaitGroup
	errs := make(chan error, racers*10)
	for r := range racers {
		wg.Go(func() {
			for i := range 10 {
				seq := int64((i*racers + r*7) % (racers * 10))
				if err := b.s.AdvanceJobEventCursor(b.ctx, j3.ID, seq+1); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("AdvanceJobEventCursor, racing: %v", err)
	}
	if got := cursor(j3.ID); got != racers*10 {
		t.Errorf("cursor after racing advances = %d, want %d", got, racers*10)
	}
}
