package storetest

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/maestro-run/maestro/internal/store"
)

// testTaskFilter: ListTasks filters by the state of each task's latest job
// and by text (title or body, ignoring case, or the id), with paging.
func testTaskFilter(t *testing.T, b *bundle) {
	create := func(title, body string) store.Task {
		t.Helper()
		task, _, err := b.s.CreateTask(b.ctx, store.NewTask{Owner: "ann", Title: title, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	fix := create("Fix Login bug", "")
	docs := create("Write docs", "the login page needs screenshots")
	deploy := create("Deploy", "")
	if _, err := b.s.Cancel(b.ctx, fix.JobID, "test"); err != nil {
		t.Fatal(err)
	}
	if j := b.claimOne(t, "w1"); j.ID != docs.JobID {
		t.Fatalf("claimed job %d, want %d (docs)", j.ID, docs.JobID)
	}

	list := func(f store.TaskFilter) []int64 {
		t.Helper()
		tasks, err := b.s.ListTasks(b.ctx, f)
		if err != nil {
			t.Fatalf("ListTasks(%+v): %v", f, err)
		}
		var out []int64
		for _, task := range tasks {
			if len(f.States) > 0 && !slices.Contains(f.States, task.JobState) {
				t.Errorf("ListTasks(%+v): task %d has state %s", f, task.ID, task.JobState)
			}
			out = append(out, task.ID)
		}
		return out
	}
	cancelled, queued, dispatching := store.StateCancelled, store.StateQueued, store.StateDispatching
	tests := []struct {
		name   string
		filter store.TaskFilter
		want   []int64
	}{
		{"one state", store.TaskFilter{States: []store.State{cancelled}}, []int64{fix.ID}},
		{"two states", store.TaskFilter{States: []store.State{queued, dispatching}}, []int64{deploy.ID, docs.ID}},
		{"state none has", store.TaskFilter{States: []store.State{store.StateFailed}}, nil},
		{"search title and body ignoring case", store.TaskFilter{Search: "LOGIN"}, []int64{docs.ID, fix.ID}},
		{"search and state", store.TaskFilter{Search: "login", States: []store.State{cancelled}}, []int64{fix.ID}},
		{"search by id", store.TaskFilter{Search: fmt.Sprint(deploy.ID)}, []int64{deploy.ID}},
		{"search no match", store.TaskFilter{Search: "nothing like it"}, nil},
		{"state first page", store.TaskFilter{States: []store.State{queued, dispatching}, Limit: 1}, []int64{deploy.ID}},
		{"state next page", store.TaskFilter{States: []store.State{queued, dispatching}, BeforeID: deploy.ID, Limit: 1}, []int64{docs.ID}},
		{"search next page", store.TaskFilter{Search: "login", BeforeID: docs.ID}, []int64{fix.ID}},
		{"state and other owner", store.TaskFilter{States: []store.State{cancelled}, Owner: "bob"}, nil},
	}
	for _, tc := range tests {
		if got := list(tc.filter); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListTasks(%+v) = %v, want %v", tc.name, tc.filter, got, tc.want)
		}
	}

	// Only the latest job counts: a new job of fix makes it queued, and
	// cancelling deploy's older job leaves deploy as its newer job is.
	if _, err := b.s.Enqueue(b.ctx, store.NewJob{TaskID: fix.ID, Piece: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Enqueue(b.ctx, store.NewJob{TaskID: deploy.ID, Piece: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Cancel(b.ctx, deploy.JobID, "test"); err != nil {
		t.Fatal(err)
	}
	if got := list(store.TaskFilter{States: []store.State{cancelled}}); len(got) != 0 {
		t.Errorf("cancelled after new jobs = %v, want none", got)
	}
	if got, want := list(store.TaskFilter{States: []store.State{queued}}), []int64{deploy.ID, fix.ID}; !slices.Equal(got, want) {
		t.Errorf("queued after new jobs = %v, want %v", got, want)
	}

	_, err := b.s.ListTasks(b.ctx, store.TaskFilter{States: []store.State{"sleeping"}})
	wantField(t, "ListTasks(unknown state)", err, "states[0]")
}

// BenchTaskListFiltered measures one filtered page (50 tasks, newest
// first) over 10,000 tasks: 1 in 100 failed, the rest succeeded, each
// title holding its number. Setting up the tasks is not timed.
func BenchTaskListFiltered(b *testing.B, newStore Factory) {
	const tasks = 10_000
	s := newStore(b, nil)
	ctx := b.Context()
	for i := range tasks {
		task, _, err := s.CreateTask(ctx, store.NewTask{Title: fmt.Sprintf("task number %d", i), Body: "some body text"})
		if err != nil {
			b.Fatal(err)
		}
		if i%100 == 0 {
			if _, err := s.Cancel(ctx, task.JobID, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The others stay queued. A cancelled page walks the index of a state
	// holding 1% of the tasks; a queued page the one holding 99%.
	for _, bc := range []struct {
		name   string
		filter store.TaskFilter
		want   int
	}{
		{"state=rare", store.TaskFilter{States: []store.State{store.StateCancelled}, Limit: 50}, 50},
		{"state=common", store.TaskFilter{States: []store.State{store.StateQueued}, Limit: 50}, 50},
		{"state=rare,page-2", store.TaskFilter{States: []store.State{store.StateCancelled}, BeforeID: 5000, Limit: 50}, 50},
		{"states=two", store.TaskFilter{States: []store.State{store.StateCancelled, store.StateFailed}, Limit: 50}, 50},
		{"search=rare", store.TaskFilter{Search: "NUMBER 999", Limit: 50}, 11},
		{"unfiltered", store.TaskFilter{Limit: 50}, 50},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				page, err := s.ListTasks(ctx, bc.filter)
				if err != nil {
					b.Fatal(err)
				}
				if len(page) != bc.want {
					b.Fatalf("page of %d tasks, want %d", len(page), bc.want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
		})
	}
}

// testTaskUsage: the task list carries what the latest job's log said
// (migration 004): the executor and model of its latest ready, the agent
// CLI of its latest agent movement, the sum of its model calls' costs, and
// when it was claimed and finished. Events of other kinds, and usage
// without a numeric cost, change nothing.
func testTaskUsage(t *testing.T, b *bundle) {
	task, _, err := b.s.CreateTask(b.ctx, store.NewTask{Title: "Write a report"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := b.s.CreateTask(b.ctx, store.NewTask{Title: "Untouched"})
	if err != nil {
		t.Fatal(err)
	}
	j := b.claimOne(t, "w1")
	if j.ID != task.JobID {
		t.Fatalf("claimed job %d, want %d", j.ID, task.JobID)
	}
	ev := func(kind store.JobEventKind, data string) store.NewJobEvent {
		return store.NewJobEvent{Type: kind, Data: json.RawMessage(data)}
	}
	if _, err := b.s.AppendJobEvents(b.ctx, j.Lease(), []store.NewJobEvent{
		ev(store.JobEventProtocol, `{"type":"ready","provider":"replay","model":"demo","executor_type":"replay"}`),
		ev(store.JobEventProtocol, `{"type":"ready","provider":"anthropic","model":"claude-x","executor_type":"live"}`),
		ev(store.JobEventProtocol, `{"type":"response_end","usage":{"input_tokens":10,"total_cost_usd":0.25}}`),
		ev(store.JobEventProtocol, `{"type":"response_end","usage":{"total_cost_usd":"1.5"}}`),
		ev(store.JobEventProtocol, `{"type":"response_end"}`),
		ev(store.JobEventProtocol, `["not an object"]`),
		ev(store.JobEventRunEvent, `{"kind":"movement_started","data":{"movement":"plan"}}`),
		ev(store.JobEventRunEvent, `{"kind":"movement_started","data":{"movement":"code","agent":"codex"}}`),
		ev(store.JobEventRunEvent, `{"kind":"movement_started","data":"odd"}`),
		ev("custom", `{"type":"response_end","usage":{"total_cost_usd":100}}`),
		ev(store.JobEventProtocol, `{"type":"response_end","usage":{"total_cost_usd":0.5}}`),
	}); err != nil {
		t.Fatalf("AppendJobEvents: %v", err)
	}
	check := func(when string, want store.Task, finished bool) {
		t.Helper()
		got, list := b.taskAndList(t, task.ID)
		for _, lt := range list {
			if lt.ID == other.ID && (lt.JobExecutor != "" || lt.JobModel != "" || lt.JobAgent != "" || lt.JobCostUSD != 0 || !lt.JobAttemptedAt.IsZero()) {
				t.Errorf("%s: the untouched task has %+v", when, lt)
			}
			if lt.ID != task.ID {
				continue
			}
			for name, g := range map[string]store.Task{"GetTask": got, "ListTasks": lt} {
				if g.JobExecutor != want.JobExecutor || g.JobModel != want.JobModel || g.JobAgent != want.JobAgent ||
					math.Abs(g.JobCostUSD-want.JobCostUSD) > 1e-9 {
					t.Errorf("%s: %s = executor %q model %q agent %q cost %v, want %q %q %q %v", when, name,
						g.JobExecutor, g.JobModel, g.JobAgent, g.JobCostUSD, want.JobExecutor, want.JobModel, want.JobAgent, want.JobCostUSD)
				}
				if g.JobAttemptedAt.IsZero() || g.JobFinishedAt.IsZero() == finished {
					t.Errorf("%s: %s attempted %v finished %v (finished: %v)", when, name, g.JobAttemptedAt, g.JobFinishedAt, finished)
				}
			}
		}
	}
	want := store.Task{JobExecutor: "live", JobModel: "anthropic/claude-x", JobAgent: "codex", JobCostUSD: 0.75}
	check("running", want, false)
	if _, err := b.s.Complete(b.ctx, j.Lease(), "done"); err != nil {
		t.Fatal(err)
	}
	check("succeeded", want, true)
}
