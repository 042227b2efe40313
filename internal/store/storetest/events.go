package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

func testEventsConcurrent(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{})
	l := b.claimOne(t, "w").Lease()
	const writers, appends = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				// Batches of 1-3 events, numbered per writer.
				var batch []store.NewJobEvent
				for k := range 1 + (w+i)%3 {
					batch = append(batch, store.NewJobEvent{Type: "tick",
						Data: json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d,"k":%d}`, w, i, k))})
				}
				got, err := b.s.AppendJobEvents(b.ctx, l, batch)
				if err != nil {
					errs <- err
					return
				}
				for k := 1; k < len(got); k++ {
					if got[k].Seq != got[k-1].Seq+1 {
						errs <- fmt.Errorf("batch numbered %d then %d: a batch must be contiguous", got[k-1].Seq, got[k].Seq)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	log := b.events(t, j.ID)
	checkGapFree(t, log)
	// Every appended event is there exactly once, and each writer's events
	// are in the order it appended them.
	type key struct{ w, i, k int }
	seen := map[key]bool{}
	last := map[int][2]int{}
	total := 0
	for _, e := range log {
		if e.Type != "tick" {
			continue
		}
		var v struct{ W, I, K int }
		if err := json.Unmarshal(e.Data, &v); err != nil {
			t.Fatal(err)
		}
		kk := key{v.W, v.I, v.K}
		if seen[kk] {
			t.Fatalf("event %+v appears twice", kk)
		}
		seen[kk] = true
		if p, ok := last[v.W]; ok && (v.I < p[0] || (v.I == p[0] && v.K <= p[1])) {
			t.Fatalf("writer %d: event (%d,%d) after (%d,%d)", v.W, v.I, v.K, p[0], p[1])
		}
		last[v.W] = [2]int{v.I, v.K}
		total++
	}
	want := 0
	for w := range writers {
		for i := range appends {
			want += 1 + (w+i)%3
		}
	}
	if total != want {
		t.Fatalf("log has %d appended events, want %d", total, want)
	}
	if got := b.job(t, j.ID).LastSeq; got != int64(len(log)) {
		t.Fatalf("job LastSeq = %d, log has %d events", got, len(log))
	}
}

func testEventsPaging(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{})
	l := b.claimOne(t, "w").Lease()
	var batch []store.NewJobEvent
	for i := range 10 {
		batch = append(batch, store.NewJobEvent{Type: "n", Data: json.RawMessage(fmt.Sprint(i))})
	}
	if _, err := b.s.AppendJobEvents(b.ctx, l, batch); err != nil {
		t.Fatal(err)
	}
	// seq 1 queued, 2 dispatching, 3..12 the batch.
	page, err := b.s.ReadJobEvents(b.ctx, j.ID, 5, 3)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range page {
		seqs = append(seqs, e.Seq)
	}
	if diff := cmp.Diff([]int64{6, 7, 8}, seqs); diff != "" {
		t.Errorf("ReadJobEvents(after 5, limit 3) (-want +got):\n%s", diff)
	}
	if string(page[0].Data) != "3" || page[0].Attempt != 1 {
		t.Errorf("event 6 = %+v, want data 3 at attempt 1", page[0])
	}
	tail, err := b.s.ReadJobEvents(b.ctx, j.ID, 12, 10)
	if err != nil || len(tail) != 0 {
		t.Errorf("ReadJobEvents past the end = %v, %v; want none", tail, err)
	}
	_, err = b.s.ReadJobEvents(b.ctx, 999999, 0, 10)
	wantErr(t, "ReadJobEvents of an unknown job", err, store.ErrNotFound)
}

func testEventsBadInput(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{})
	l := b.claimOne(t, "w").Lease()
	tooMany := make([]store.NewJobEvent, store.MaxEventsPerAppend+1)
	for i := range tooMany {
		tooMany[i] = store.NewJobEvent{Type: "x"}
	}
	tests := []struct {
		name   string
		events []store.NewJobEvent
		field  string
	}{
		{"empty batch", nil, "events"},
		{"too many", tooMany, "events"},
		{"bad JSON in the middle", []store.NewJobEvent{{Type: "a"}, {Type: "b", Data: json.RawMessage(`{"x":`)}, {Type: "c"}}, "events[1].data"},
		{"no type", []store.NewJobEvent{{Type: "a"}, {Type: ""}}, "events[1].type"},
		{"oversize data", []store.NewJobEvent{{Type: "a", Data: json.RawMessage(`"` + oversize(store.MaxJSONBytes) + `"`)}}, "events[0].data"},
	}
	for _, tc := range tests {
		_, err := b.s.AppendJobEvents(b.ctx, l, tc.events)
		wantField(t, tc.name, err, tc.field)
	}
	log := b.events(t, j.ID)
	if got := statusTrail(t, log); len(log) != 2 || !slices.Equal(got, []string{"queued/0", "dispatching/1"}) {
		t.Fatalf("rejected appends changed the log: %v", got)
	}
	if got := b.job(t, j.ID).LastSeq; got != 2 {
		t.Fatalf("rejected appends moved LastSeq to %d, want 2", got)
	}
}

func testSystemEvents(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{})
	if _, err := b.s.Cancel(b.ctx, j.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	got, err := b.s.AppendSystemJobEvents(b.ctx, j.ID, []store.NewJobEvent{{Type: "comment", Data: json.RawMessage(`{"body":"why?"}`)}})
	if err != nil {
		t.Fatalf("AppendSystemJobEvents on a cancelled job: %v", err)
	}
	if len(got) != 1 || got[0].Seq != 3 || got[0].Attempt != 0 {
		t.Fatalf("system event = %+v, want seq 3 at attempt 0", got)
	}
	checkGapFree(t, b.events(t, j.ID))
	_, err = b.s.AppendSystemJobEvents(b.ctx, 999999, []store.NewJobEvent{{Type: "x"}})
	wantErr(t, "AppendSystemJobEvents to an unknown job", err, store.ErrNotFound)
}
