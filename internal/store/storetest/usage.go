package storetest

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// testJobUsage: ListJobUsage reads each job of the window once, with the
// cost its log added up, the tokens of its response_end events, and its
// task's title and piece; replay jobs only when asked; a window that ends
// before it starts is refused.
func testJobUsage(t *testing.T, b *bundle) {
	start := b.clock.Now()
	ev := func(data string) store.NewJobEvent {
		return store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(data)}
	}
	newTask := func(title, piece string, events ...store.NewJobEvent) store.Task {
		t.Helper()
		task, job, err := b.s.CreateTask(b.ctx, store.NewTask{Title: title, Piece: piece})
		if err != nil {
			t.Fatal(err)
		}
		if len(events) > 0 {
			if _, err := b.s.AppendSystemJobEvents(b.ctx, job.ID, events); err != nil {
				t.Fatalf("append events of %q: %v", title, err)
			}
		}
		b.clock.Advance(24 * time.Hour)
		return task
	}
	live := newTask("live", "review",
		ev(`{"type":"ready","provider":"anthropic","model":"claude-x","executor_type":"live"}`),
		ev(`{"type":"response_end","usage":{"input_tokens":100,"output_tokens":20,"total_cost_usd":0.5}}`),
		ev(`{"type":"response_end","usage":{"input_tokens":10,"output_tokens":"5","total_cost_usd":0.25}}`),
		ev(`{"type":"response_start","usage":{"input_tokens":1000}}`),
		ev(`["not an object"]`))
	replay := newTask("replayed", "",
		ev(`{"type":"ready","provider":"replay","model":"demo","executor_type":"replay"}`),
		ev(`{"type":"response_end","usage":{"input_tokens":7,"output_tokens":3,"total_cost_usd":1}}`))
	idle := newTask("idle", "chat")
	end := b.clock.Now()

	want := map[int64]store.JobUsage{
		live.JobID:   {TaskID: live.ID, Title: "live", Piece: "review", Executor: "live", Model: "anthropic/claude-x", CostUSD: 0.75, InputTokens: 110, OutputTokens: 20, CreatedAt: start},
		replay.JobID: {TaskID: replay.ID, Title: "replayed", Executor: "replay", Model: "replay/demo", CostUSD: 1, InputTokens: 7, OutputTokens: 3, CreatedAt: start.Add(24 * time.Hour)},
		idle.JobID:   {TaskID: idle.ID, Title: "idle", Piece: "chat", CreatedAt: start.Add(48 * time.Hour)},
	}
	for _, tc := range []struct {
		name string
		f    store.UsageFilter
		jobs []int64
	}{
		{"all but replay", store.UsageFilter{From: start, To: end}, []int64{live.JobID, idle.JobID}},
		{"with replay", store.UsageFilter{From: start, To: end, IncludeReplay: true}, []int64{live.JobID, replay.JobID, idle.JobID}},
		{"from the second day", store.UsageFilter{From: start.Add(time.Hour), To: end, IncludeReplay: true}, []int64{replay.JobID, idle.JobID}},
		{"to the first job only", store.UsageFilter{From: start, To: start.Add(time.Hour)}, []int64{live.JobID}},
		{"empty window", store.UsageFilter{From: end, To: end}, nil},
	} {
		got, err := b.s.ListJobUsage(b.ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: ListJobUsage: %v", tc.name, err)
		}
		if len(got) != len(tc.jobs) {
			t.Fatalf("%s: %d rows %+v, want jobs %v", tc.name, len(got), got, tc.jobs)
		}
		for i, g := range got {
			w := want[tc.jobs[i]]
			w.JobID = tc.jobs[i]
			if g.JobID != w.JobID || g.TaskID != w.TaskID || g.Title != w.Title || g.Piece != w.Piece || g.Executor != w.Executor ||
				g.Model != w.Model || g.Agent != w.Agent || math.Abs(g.CostUSD-w.CostUSD) > 1e-9 ||
				g.InputTokens != w.InputTokens || g.OutputTokens != w.OutputTokens || !g.CreatedAt.Equal(w.CreatedAt) {
				t.Errorf("%s: row %d = %+v, want %+v", tc.name, i, g, w)
			}
		}
	}
	if _, err := b.s.ListJobUsage(b.ctx, store.UsageFilter{From: end, To: start}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a window ending before it starts: %v, want ErrInvalid", err)
	}
}
