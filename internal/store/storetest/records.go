package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

func testTasks(t *testing.T, b *bundle) {
	now := b.clock.Now()
	task, job, err := b.s.CreateTask(b.ctx, store.NewTask{Owner: "ann", Title: "Fix the build", Body: "It fails.",
		Piece: "general", Profile: "gpu", TaskClass: "code", Priority: 3, MaxAttempts: 4, Payload: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Task{ID: task.ID, Owner: "ann", Title: "Fix the build", Body: "It fails.", Piece: "general",
		CreatedAt: now, UpdatedAt: now, JobID: job.ID, JobState: store.StateQueued, JobPiece: "general"}
	if diff := cmp.Diff(want, task); diff != "" {
		t.Errorf("CreateTask (-want +got):\n%s", diff)
	}
	got, err := b.s.GetTask(b.ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetTask (-want +got):\n%s", diff)
	}
	if job.TaskID != task.ID || job.Piece != "general" || job.Profile != "gpu" || job.TaskClass != "code" ||
		job.Priority != 3 || job.MaxAttempts != 4 || string(job.Payload) != `{"a":1}` {
		t.Errorf("the task's job = %+v", job)
	}
	_, err = b.s.GetTask(b.ctx, 999999)
	wantErr(t, "GetTask(unknown)", err, store.ErrNotFound)

	for i := range 4 {
		owner := "bob"
		if i%2 == 0 {
			owner = "ann"
		}
		if _, _, err := b.s.CreateTask(b.ctx, store.NewTask{Owner: owner, Title: fmt.Sprintf("task %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := b.s.ListTasks(b.ctx, store.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 || all[0].Title != "task 3" || all[4].ID != task.ID {
		t.Fatalf("ListTasks = %d tasks, want 5 newest first", len(all))
	}
	anns, err := b.s.ListTasks(b.ctx, store.TaskFilter{Owner: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if len(anns) != 3 {
		t.Errorf("ListTasks(owner ann) = %d, want 3", len(anns))
	}
	page, err := b.s.ListTasks(b.ctx, store.TaskFilter{BeforeID: all[1].ID, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].ID != all[2].ID || page[1].ID != all[3].ID {
		t.Errorf("ListTasks(before %d, limit 2) = %+v", all[1].ID, page)
	}
}

func testTaskBadInput(t *testing.T, b *bundle) {
	tests := []struct {
		name  string
		task  store.NewTask
		field string
	}{
		{"no title", store.NewTask{}, "title"},
		{"blank title", store.NewTask{Title: "  \n"}, "title"},
		{"title too long", store.NewTask{Title: oversize(store.MaxTitleBytes)}, "title"},
		{"body too long", store.NewTask{Title: "t", Body: oversize(store.MaxBodyBytes)}, "body"},
		{"body not UTF-8", store.NewTask{Title: "t", Body: "\xc3\x28"}, "body"},
		{"owner with a tab", store.NewTask{Title: "t", Owner: "a\tb"}, "owner"},
		{"bad payload", store.NewTask{Title: "t", Payload: json.RawMessage(`[`)}, "payload"},
		{"bad max attempts", store.NewTask{Title: "t", MaxAttempts: 1000}, "max_attempts"},
	}
	for _, tc := range tests {
		_, _, err := b.s.CreateTask(b.ctx, tc.task)
		wantField(t, tc.name, err, tc.field)
	}
	_, _, err := b.s.CreateTask(b.ctx, store.NewTask{Title: "t", ScheduleID: 999999})
	wantErr(t, "CreateTask with an unknown schedule", err, store.ErrNotFound)
	tasks, err := b.s.ListTasks(b.ctx, store.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := b.s.CountJobs(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 0 || len(counts) != 0 {
		t.Fatalf("rejected tasks left %d tasks and jobs %v behind", len(tasks), counts)
	}
}

func testComments(t *testing.T, b *bundle) {
	task, _, err := b.s.CreateTask(b.ctx, store.NewTask{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var made []store.Comment
	for i, kind := range []string{store.AuthorUser, store.AuthorAgent, store.AuthorSystem} {
		c, resumed, err := b.s.AddComment(b.ctx, store.NewComment{TaskID: task.ID, AuthorKind: kind, Author: "x", Body: fmt.Sprintf("c%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if len(resumed) != 0 {
			t.Fatalf("AddComment resumed %v with nothing waiting", ids(resumed))
		}
		made = append(made, c)
	}
	if made[0].TaskID != task.ID || made[0].AuthorKind != store.AuthorUser || made[0].Body != "c0" || !made[0].CreatedAt.Equal(b.clock.Now()) {
		t.Errorf("comment = %+v", made[0])
	}
	got, err := b.s.ListComments(b.ctx, task.ID, made[0].ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(made[1:], got); diff != "" {
		t.Errorf("ListComments(after the first) (-want +got):\n%s", diff)
	}
	bad := []struct {
		name  string
		c     store.NewComment
		field string
	}{
		{"no body", store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser}, "body"},
		{"body too long", store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Body: oversize(store.MaxCommentBytes)}, "body"},
		{"unknown author kind", store.NewComment{TaskID: task.ID, AuthorKind: "robot", Body: "x"}, "author_kind"},
		{"no task", store.NewComment{AuthorKind: store.AuthorUser, Body: "x"}, "task_id"},
	}
	for _, tc := range bad {
		_, _, err := b.s.AddComment(b.ctx, tc.c)
		wantField(t, tc.name, err, tc.field)
	}
	_, _, err = b.s.AddComment(b.ctx, store.NewComment{TaskID: 999999, AuthorKind: store.AuthorUser, Body: "x"})
	wantErr(t, "AddComment to an unknown task", err, store.ErrNotFound)
	_, err = b.s.ListComments(b.ctx, 999999, 0, 0)
	wantErr(t, "ListComments of an unknown task", err, store.ErrNotFound)
	if all, _ := b.s.ListComments(b.ctx, task.ID, 0, 0); len(all) != 3 {
		t.Errorf("rejected comments were stored: %d comments, want 3", len(all))
	}
}

func testPieces(t *testing.T, b *bundle) {
	p, err := b.s.CreatePiece(b.ctx, "review", "name: review\n")
	if err != nil {
		t.Fatal(err)
	}
	now := b.clock.Now()
	want := store.Piece{Name: "review", YAML: "name: review\n", Version: 1, CreatedAt: now, UpdatedAt: now}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("CreatePiece (-want +got):\n%s", diff)
	}
	_, err = b.s.CreatePiece(b.ctx, "review", "other")
	wantErr(t, "CreatePiece with a taken name", err, store.ErrConflict)

	b.clock.Advance(time.Minute)
	p2, err := b.s.UpdatePiece(b.ctx, "review", "name: review\n# v2\n", 1)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Version != 2 || !p2.UpdatedAt.Equal(b.clock.Now()) || !p2.CreatedAt.Equal(now) {
		t.Errorf("UpdatePiece = %+v", p2)
	}
	_, err = b.s.UpdatePiece(b.ctx, "review", "stale", 1)
	wantErr(t, "UpdatePiece at a stale version", err, store.ErrConflict)
	p3, err := b.s.UpdatePiece(b.ctx, "review", "name: review\n# v3\n", 0)
	if err != nil || p3.Version != 3 {
		t.Fatalf("unconditional UpdatePiece = %+v, %v", p3, err)
	}
	_, err = b.s.UpdatePiece(b.ctx, "missing", "x", 0)
	wantErr(t, "UpdatePiece of an unknown piece", err, store.ErrNotFound)

	if _, err := b.s.CreatePiece(b.ctx, "chat-2", "name: chat-2\n"); err != nil {
		t.Fatal(err)
	}
	list, err := b.s.ListPieces(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "chat-2" || list[1].Name != "review" {
		t.Fatalf("ListPieces = %+v, want chat-2 and review by name", list)
	}
	err = b.s.DeletePiece(b.ctx, "review", 2)
	wantErr(t, "DeletePiece at a stale version", err, store.ErrConflict)
	if err := b.s.DeletePiece(b.ctx, "review", 3); err != nil {
		t.Fatal(err)
	}
	_, err = b.s.GetPiece(b.ctx, "review")
	wantErr(t, "GetPiece after delete", err, store.ErrNotFound)
	err = b.s.DeletePiece(b.ctx, "review", 0)
	wantErr(t, "DeletePiece twice", err, store.ErrNotFound)
}

// testPieceVersions: every create and update keeps a version; a refused
// update keeps none; each version reads back with its YAML and time; a
// deleted piece loses its history, and a piece created again under its
// name starts a new one at version 1.
func testPieceVersions(t *testing.T, b *bundle) {
	t0 := b.clock.Now()
	if _, err := b.s.CreatePiece(b.ctx, "hist", "name: hist\n"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	t1 := b.clock.Now()
	if _, err := b.s.UpdatePiece(b.ctx, "hist", "name: hist\n# v2\n", 1); err != nil {
		t.Fatal(err)
	}
	_, err := b.s.UpdatePiece(b.ctx, "hist", "name: hist\n# stale\n", 1)
	wantErr(t, "UpdatePiece at a stale version", err, store.ErrConflict)
	_, err = b.s.UpdatePiece(b.ctx, "hist", "", 0)
	wantField(t, "UpdatePiece with empty yaml", err, "yaml")
	b.clock.Advance(time.Minute)
	t2 := b.clock.Now()
	if _, err := b.s.UpdatePiece(b.ctx, "hist", "name: hist\n# v3\n", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.CreatePiece(b.ctx, "other", "name: other\n"); err != nil {
		t.Fatal(err)
	}

	list, err := b.s.PieceVersions(b.ctx, "hist")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.PieceVersion{{Name: "hist", Version: 3, CreatedAt: t2}, {Name: "hist", Version: 2, CreatedAt: t1}, {Name: "hist", Version: 1, CreatedAt: t0}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("PieceVersions (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		version int64
		yaml    string
		at      time.Time
	}{{1, "name: hist\n", t0}, {2, "name: hist\n# v2\n", t1}, {3, "name: hist\n# v3\n", t2}} {
		v, err := b.s.GetPieceVersion(b.ctx, "hist", tc.version)
		if err != nil {
			t.Fatalf("GetPieceVersion %d: %v", tc.version, err)
		}
		if diff := cmp.Diff(store.PieceVersion{Name: "hist", Version: tc.version, YAML: tc.yaml, CreatedAt: tc.at}, v); diff != "" {
			t.Errorf("GetPieceVersion %d (-want +got):\n%s", tc.version, diff)
		}
	}
	_, err = b.s.GetPieceVersion(b.ctx, "hist", 4)
	wantErr(t, "GetPieceVersion of a version to come", err, store.ErrNotFound)
	_, err = b.s.PieceVersions(b.ctx, "missing")
	wantErr(t, "PieceVersions of an unknown piece", err, store.ErrNotFound)

	if err := b.s.DeletePiece(b.ctx, "hist", 0); err != nil {
		t.Fatal(err)
	}
	_, err = b.s.PieceVersions(b.ctx, "hist")
	wantErr(t, "PieceVersions after delete", err, store.ErrNotFound)
	_, err = b.s.GetPieceVersion(b.ctx, "hist", 1)
	wantErr(t, "GetPieceVersion after delete", err, store.ErrNotFound)
	if _, err := b.s.CreatePiece(b.ctx, "hist", "name: hist\n# again\n"); err != nil {
		t.Fatalf("CreatePiece again after delete: %v", err)
	}
	if list, err := b.s.PieceVersions(b.ctx, "hist"); err != nil || len(list) != 1 || list[0].Version != 1 {
		t.Errorf("PieceVersions of the piece created again = %+v, %v; want version 1 only", list, err)
	}
	if list, err := b.s.PieceVersions(b.ctx, "other"); err != nil || len(list) != 1 {
		t.Errorf("PieceVersions of another piece = %+v, %v; want its one version", list, err)
	}
}

func testPiecesBadInput(t *testing.T, b *bundle) {
	if _, err := b.s.CreatePiece(b.ctx, "keep", "name: keep\n"); err != nil {
		t.Fatal(err)
	}
	before, err := b.s.GetPiece(b.ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, piece, yaml, field string
	}{
		{"upper case name", "Keep", "x", "name"},
		{"name with underscore", "my_piece", "x", "name"},
		{"leading hyphen", "-x", "x", "name"},
		{"name too long", oversize(store.MaxNameBytes), "x", "name"},
		{"empty yaml", "keep", "", "yaml"},
		{"oversize yaml", "keep", oversize(store.MaxPieceBytes), "yaml"},
		{"yaml with NUL", "keep", "a\x00", "yaml"},
	}
	for _, tc := range tests {
		_, err := b.s.UpdatePiece(b.ctx, tc.piece, tc.yaml, 0)
		wantField(t, "UpdatePiece: "+tc.name, err, tc.field)
		_, err = b.s.CreatePiece(b.ctx, tc.piece, tc.yaml)
		wantField(t, "CreatePiece: "+tc.name, err, tc.field)
	}
	after, err := b.s.GetPiece(b.ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("rejected updates changed the stored piece (-before +after):\n%s", diff)
	}
	if list, _ := b.s.ListPieces(b.ctx); len(list) != 1 {
		t.Fatalf("rejected creates stored pieces: %d pieces", len(list))
	}
}

func newSchedule(name string, next time.Time) store.NewSchedule {
	return store.NewSchedule{Name: name, CronExpr: "*/5 * * * *", Owner: "ops", Title: "nightly " + name,
		Body: "run it", Piece: "general", Profile: "cpu", TaskClass: "maint", NextRunAt: next}
}

func testSchedules(t *testing.T, b *bundle) {
	now := b.clock.Now()
	s, err := b.s.CreateSchedule(b.ctx, newSchedule("nightly", now.Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	want := store.Schedule{ID: s.ID, Name: "nightly", CronExpr: "*/5 * * * *", Enabled: true, Owner: "ops",
		Title: "nightly nightly", Body: "run it", Piece: "general", Profile: "cpu", TaskClass: "maint",
		NextRunAt: now.Add(time.Minute), CreatedAt: now, UpdatedAt: now}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("CreateSchedule (-want +got):\n%s", diff)
	}
	_, err = b.s.CreateSchedule(b.ctx, newSchedule("nightly", now))
	wantErr(t, "CreateSchedule with a taken name", err, store.ErrConflict)
	off := newSchedule("off", now)
	off.Disabled = true
	offS, err := b.s.CreateSchedule(b.ctx, off)
	if err != nil {
		t.Fatal(err)
	}

	if due, err := b.s.DueSchedules(b.ctx, 10); err != nil || len(due) != 0 {
		t.Fatalf("DueSchedules before the tick = %+v, %v; want none (disabled ones never)", due, err)
	}
	b.clock.Advance(time.Minute)
	due, err := b.s.DueSchedules(b.ctx, 10)
	if err != nil || len(due) != 1 || due[0].ID != s.ID {
		t.Fatalf("DueSchedules at the tick = %+v, %v; want %d", due, err, s.ID)
	}
	tick := due[0].NextRunAt
	task, job, fired, err := b.s.FireSchedule(b.ctx, store.FireParams{ScheduleID: s.ID, Tick: tick, Next: tick.Add(5 * time.Minute)})
	if err != nil || !fired {
		t.Fatalf("FireSchedule = %v, %v; want fired", fired, err)
	}
	if task.ScheduleID != s.ID || task.Title != "nightly nightly" || task.Owner != "ops" || job.TaskID != task.ID ||
		job.Piece != "general" || job.Profile != "cpu" || job.TaskClass != "maint" || job.State != store.StateQueued {
		t.Errorf("fired task %+v job %+v", task, job)
	}
	got, err := b.s.GetSchedule(b.ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.NextRunAt.Equal(tick.Add(5*time.Minute)) || !got.LastFiredAt.Equal(tick) {
		t.Errorf("after firing: next %s last %s", got.NextRunAt, got.LastFiredAt)
	}
	if _, _, fired, err := b.s.FireSchedule(b.ctx, store.FireParams{ScheduleID: offS.ID, Tick: now, Next: now.Add(time.Hour)}); err != nil || fired {
		t.Fatalf("FireSchedule of a disabled schedule = %v, %v; want not fired", fired, err)
	}
	_, _, _, err = b.s.FireSchedule(b.ctx, store.FireParams{ScheduleID: s.ID, Tick: tick, Next: tick})
	wantField(t, "FireSchedule with next == tick", err, "next")

	upd := newSchedule("renamed", now.Add(time.Hour))
	upd.CronExpr = "@hourly"
	u, err := b.s.UpdateSchedule(b.ctx, s.ID, upd)
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "renamed" || u.CronExpr != "@hourly" || !u.LastFiredAt.Equal(tick) || !u.CreatedAt.Equal(now) {
		t.Errorf("UpdateSchedule = %+v", u)
	}
	_, err = b.s.UpdateSchedule(b.ctx, s.ID, newSchedule("off", now))
	wantErr(t, "UpdateSchedule to a taken name", err, store.ErrConflict)
	_, err = b.s.UpdateSchedule(b.ctx, 999999, upd)
	wantErr(t, "UpdateSchedule of an unknown schedule", err, store.ErrNotFound)
	list, err := b.s.ListSchedules(b.ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListSchedules = %+v, %v", list, err)
	}
	bad := newSchedule("x", now)
	bad.CronExpr = ""
	_, err = b.s.CreateSchedule(b.ctx, bad)
	wantField(t, "CreateSchedule without a cron expression", err, "cron_expr")
	bad = newSchedule("x", time.Time{})
	_, err = b.s.CreateSchedule(b.ctx, bad)
	wantField(t, "CreateSchedule without a first run", err, "next_run_at")

	if err := b.s.DeleteSchedule(b.ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteSchedule twice", b.s.DeleteSchedule(b.ctx, s.ID), store.ErrNotFound)
	kept, err := b.s.GetTask(b.ctx, task.ID)
	if err != nil {
		t.Fatalf("the fired task must outlive its schedule: %v", err)
	}
	if kept.ScheduleID != 0 {
		t.Errorf("task of a deleted schedule still points at %d", kept.ScheduleID)
	}
}

func testScheduleFireOnce(t *testing.T, b *bundle) {
	tick := b.clock.Now()
	s, err := b.s.CreateSchedule(b.ctx, newSchedule("every", tick))
	if err != nil {
		t.Fatal(err)
	}
	const firers, ticks = 8, 5
	for n := range ticks {
		at := tick.Add(time.Duration(n) * time.Minute)
		var fired atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, firers)
		for range firers {
			wg.Go(func() {
				_, _, ok, err := b.s.FireSchedule(b.ctx, store.FireParams{ScheduleID: s.ID, Tick: at, Next: at.Add(time.Minute)})
				if err != nil {
					errs <- err
				}
				if ok {
					fired.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := fired.Load(); got != 1 {
			t.Fatalf("tick %d fired %d times, want exactly 1", n, got)
		}
	}
	tasks, err := b.s.ListTasks(b.ctx, store.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != ticks {
		t.Fatalf("%d tasks for %d ticks", len(tasks), ticks)
	}
}

func testAudit(t *testing.T, b *bundle) {
	var made []store.AuditEntry
	for i, target := range []string{"task:1", "piece:review", "task:1"} {
		e, err := b.s.AppendAudit(b.ctx, store.NewAuditEntry{Actor: "ann", Action: "update", Target: target,
			Details: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, e)
	}
	if made[0].Actor != "ann" || string(made[0].Details) != `{"n":0}` || !made[0].CreatedAt.Equal(b.clock.Now()) {
		t.Errorf("AppendAudit = %+v", made[0])
	}
	all, err := b.s.ListAudit(b.ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.AuditEntry{made[2], made[1], made[0]}, all); diff != "" {
		t.Errorf("ListAudit (-want +got):\n%s", diff)
	}
	task1, err := b.s.ListAudit(b.ctx, store.AuditFilter{Target: "task:1", BeforeID: made[2].ID})
	if err != nil || len(task1) != 1 || task1[0].ID != made[0].ID {
		t.Errorf("ListAudit(task:1, before %d) = %+v, %v", made[2].ID, task1, err)
	}
	_, err = b.s.AppendAudit(b.ctx, store.NewAuditEntry{Action: "x"})
	wantField(t, "AppendAudit without an actor", err, "actor")
	_, err = b.s.AppendAudit(b.ctx, store.NewAuditEntry{Actor: "a", Action: "x", Details: json.RawMessage("nope")})
	wantField(t, "AppendAudit with bad details", err, "details")
}

func testSessions(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{})
	created := b.clock.Now()
	s, err := b.s.PutSession(b.ctx, store.Session{ID: "0195d3a2-aaaa", JobID: j.ID, ExecutorType: "replay", Provider: "replay",
		Model: "demo", Workspace: "/tmp/ws", Title: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	s2, err := b.s.PutSession(b.ctx, store.Session{ID: "0195d3a2-aaaa", JobID: j.ID, ExecutorType: "live", Provider: "anthropic", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Session{ID: "0195d3a2-aaaa", JobID: j.ID, ExecutorType: "live", Provider: "anthropic", Model: "m",
		CreatedAt: created, UpdatedAt: b.clock.Now()}
	if diff := cmp.Diff(want, s2); diff != "" {
		t.Errorf("second PutSession (-want +got):\n%s", diff)
	}
	if s.CreatedAt != s2.CreatedAt {
		t.Errorf("CreatedAt changed on update")
	}
	if _, err := b.s.PutSession(b.ctx, store.Session{ID: "other"}); err != nil {
		t.Fatal(err)
	}
	got, err := b.s.GetSession(b.ctx, "0195d3a2-aaaa")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetSession (-want +got):\n%s", diff)
	}
	byJob, err := b.s.ListSessions(b.ctx, store.SessionFilter{JobID: j.ID})
	if err != nil || len(byJob) != 1 {
		t.Errorf("ListSessions(job) = %+v, %v", byJob, err)
	}
	all, err := b.s.ListSessions(b.ctx, store.SessionFilter{})
	if err != nil || len(all) != 2 || all[0].ID != "other" {
		t.Errorf("ListSessions = %+v, %v; want 2, newest first", all, err)
	}
	_, err = b.s.GetSession(b.ctx, "missing")
	wantErr(t, "GetSession(unknown)", err, store.ErrNotFound)
	_, err = b.s.PutSession(b.ctx, store.Session{ID: "x", JobID: 999999})
	wantErr(t, "PutSession with an unknown job", err, store.ErrNotFound)
	_, err = b.s.PutSession(b.ctx, store.Session{})
	wantField(t, "PutSession without an id", err, "id")
}

func testLeaders(t *testing.T, b *bundle) {
	elect := func(owner string) bool {
		t.Helper()
		ok, err := b.s.ElectLeader(b.ctx, "maintenance", owner, time.Minute)
		if err != nil {
			t.Fatalf("ElectLeader(%s): %v", owner, err)
		}
		return ok
	}
	if !elect("a") {
		t.Fatal("a was not elected with no leader")
	}
	if elect("b") {
		t.Fatal("b was elected while a leads")
	}
	b.clock.Advance(50 * time.Second)
	if !elect("a") {
		t.Fatal("a could not extend its term")
	}
	b.clock.Advance(50 * time.Second)
	if elect("b") {
		t.Fatal("b was elected before a's extended term ended")
	}
	b.clock.Advance(11 * time.Second)
	if !elect("b") {
		t.Fatal("b was not elected after a's term expired")
	}
	if err := b.s.ResignLeader(b.ctx, "maintenance", "a"); err != nil {
		t.Fatal(err)
	}
	if elect("a") {
		t.Fatal("a's resignation (not the leader) ended b's term")
	}
	if err := b.s.ResignLeader(b.ctx, "maintenance", "b"); err != nil {
		t.Fatal(err)
	}
	if !elect("a") {
		t.Fatal("a was not elected after b resigned")
	}
	if ok, err := b.s.ElectLeader(b.ctx, "other-role", "b", time.Minute); err != nil || !ok {
		t.Fatalf("roles are independent: ElectLeader(other-role, b) = %v, %v", ok, err)
	}
	_, err := b.s.ElectLeader(b.ctx, "x", "", time.Minute)
	wantField(t, "ElectLeader without an owner", err, "owner")
}

func testNotifications(t *testing.T, b *bundle) {
	jobs, err := b.s.Subscribe(b.ctx, store.TopicJobs)
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Close()
	j := b.enqueue(t, store.NewJob{})
	if n := Recv(t, jobs); n.Topic != store.TopicJobs {
		t.Fatalf("notification on %q, want %q", n.Topic, store.TopicJobs)
	}
	evs, err := b.s.Subscribe(b.ctx, store.JobTopic(j.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	l := b.claimOne(t, "w").Lease()
	Recv(t, evs) // the dispatching status event
	drain(evs)
	if _, err := b.s.AppendJobEvents(b.ctx, l, []store.NewJobEvent{{Type: "x"}}); err != nil {
		t.Fatal(err)
	}
	if n := Recv(t, evs); n.Topic != store.JobTopic(j.ID) {
		t.Fatalf("notification on %q, want %q", n.Topic, store.JobTopic(j.ID))
	}
	// A retry queues the job again: claimers are woken.
	drain(jobs)
	if _, err := b.s.Fail(b.ctx, l, store.FailParams{Error: "x"}); err != nil {
		t.Fatal(err)
	}
	Recv(t, jobs)

	custom, err := b.s.Subscribe(b.ctx, "custom")
	if err != nil {
		t.Fatal(err)
	}
	defer custom.Close()
	if err := b.s.Notify(b.ctx, "custom", "hello"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.Notification{Topic: "custom", Payload: "hello"}, Recv(t, custom)); diff != "" {
		t.Errorf("custom notification (-want +got):\n%s", diff)
	}
	// Nothing arrives on an unrelated topic: a further Notify on "custom"
	// is the next thing "custom" sees, not the job traffic.
	drain(custom)
	b.enqueue(t, store.NewJob{})
	if err := b.s.Notify(b.ctx, "custom", "second"); err != nil {
		t.Fatal(err)
	}
	if got := Recv(t, custom); got.Payload != "second" {
		t.Errorf("custom got %+v, want only its own notification", got)
	}
	wantField(t, "Notify with a bad topic", b.s.Notify(b.ctx, "a\nb", ""), "topic")
}

func testSubscriptionContext(t *testing.T, b *bundle) {
	ctx, cancel := context.WithCancel(b.ctx)
	sub, err := b.s.Subscribe(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-sub.C():
			if !ok {
				sub.Close() // harmless after the context closed it
				return
			}
		case <-timer.C:
			t.Fatal("subscription channel not closed after its context ended")
		}
	}
}
