package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

func testMigrate(t *testing.T, b *bundle) {
	for range 2 {
		applied, err := b.s.Migrate(b.ctx)
		if err != nil {
			t.Fatalf("Migrate on a migrated store: %v", err)
		}
		if len(applied) != 0 {
			t.Fatalf("Migrate on a migrated store applied %v, want nothing", applied)
		}
	}
	// The store still works after re-running migrations.
	b.enqueue(t, store.NewJob{})
}

func testEnqueue(t *testing.T, b *bundle) {
	now := b.clock.Now()
	j := b.enqueue(t, store.NewJob{Piece: "general", Priority: 5, Payload: json.RawMessage(`{"k": [1, 2]}`)})
	want := store.Job{ID: j.ID, Piece: "general", Priority: 5, Payload: json.RawMessage(`{"k": [1, 2]}`),
		State: store.StateQueued, MaxAttempts: store.DefaultMaxAttempts, ScheduledAt: now, LastSeq: 1,
		CreatedAt: now, UpdatedAt: now}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("Enqueue result (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, b.job(t, j.ID)); diff != "" {
		t.Errorf("GetJob after Enqueue (-want +got):\n%s", diff)
	}
	// Defaults: payload {}.
	d := b.enqueue(t, store.NewJob{})
	if string(d.Payload) != "{}" {
		t.Errorf("default payload = %s, want {}", d.Payload)
	}
	if got := statusTrail(t, b.events(t, j.ID)); !slices.Equal(got, []string{"queued/0"}) {
		t.Errorf("events after Enqueue = %v, want [queued/0]", got)
	}
	_, err := b.s.GetJob(b.ctx, 999999)
	wantErr(t, "GetJob(unknown)", err, store.ErrNotFound)
	_, err = b.s.Enqueue(b.ctx, store.NewJob{TaskID: 999999})
	wantErr(t, "Enqueue with an unknown task", err, store.ErrNotFound)
	_, err = b.s.Enqueue(b.ctx, store.NewJob{ParentJobID: 999999})
	wantErr(t, "Enqueue with an unknown parent", err, store.ErrNotFound)
}

func testEnqueueBadInput(t *testing.T, b *bundle) {
	tests := []struct {
		name  string
		job   store.NewJob
		field string
	}{
		{"payload not JSON", store.NewJob{Payload: json.RawMessage(`{"a":`)}, "payload"},
		{"payload too large", store.NewJob{Payload: json.RawMessage(`"` + oversize(store.MaxJSONBytes) + `"`)}, "payload"},
		{"max attempts too high", store.NewJob{MaxAttempts: store.MaxAttemptsLimit + 1}, "max_attempts"},
		{"max attempts negative", store.NewJob{MaxAttempts: -1}, "max_attempts"},
		{"profile with newline", store.NewJob{Profile: "a\nb"}, "profile"},
		{"task class too long", store.NewJob{TaskClass: oversize(store.MaxLabelBytes)}, "task_class"},
		{"piece with NUL", store.NewJob{Piece: "a\x00b"}, "piece"},
		{"piece not UTF-8", store.NewJob{Piece: "a\xffb"}, "piece"},
		{"priority out of range", store.NewJob{Priority: store.MaxPriority + 1}, "priority"},
		{"negative task id", store.NewJob{TaskID: -1}, "task_id"},
	}
	for _, tc := range tests {
		_, err := b.s.Enqueue(b.ctx, tc.job)
		wantField(t, tc.name, err, tc.field)
	}
	counts, err := b.s.CountJobs(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 0 {
		t.Errorf("rejected enqueues stored jobs: %v", counts)
	}
	_, err = b.s.Claim(b.ctx, store.ClaimParams{Worker: "", LeaseFor: lease})
	wantField(t, "Claim without a worker", err, "worker")
	_, err = b.s.Claim(b.ctx, store.ClaimParams{Worker: "w", LeaseFor: 0})
	wantField(t, "Claim without a lease", err, "lease_for")
	_, err = b.s.Claim(b.ctx, store.ClaimParams{Worker: "w", LeaseFor: lease, Limit: store.MaxClaim + 1})
	wantField(t, "Claim too many", err, "limit")
}

func testClaimOrder(t *testing.T, b *bundle) {
	low := b.enqueue(t, store.NewJob{Priority: -1})
	first := b.enqueue(t, store.NewJob{})
	second := b.enqueue(t, store.NewJob{})
	high := b.enqueue(t, store.NewJob{Priority: 10})
	later := b.enqueue(t, store.NewJob{Priority: 100, RunAt: b.clock.Now().Add(time.Minute)})

	got := b.claim(t, "w1", 10)
	if diff := cmp.Diff([]int64{high.ID, first.ID, second.ID, low.ID}, ids(got)); diff != "" {
		t.Fatalf("claim order (-want +got):\n%s", diff)
	}
	for _, j := range got {
		if j.State != store.StateDispatching || j.Attempt != 1 || j.LeaseOwner != "w1" ||
			!j.LeaseExpiresAt.Equal(b.clock.Now().Add(lease)) || !j.AttemptedAt.Equal(b.clock.Now()) {
			t.Fatalf("claimed job = %+v, want dispatching, attempt 1, owner w1, lease until now+%s", j, lease)
		}
	}
	b.claimNone(t, "w1")
	b.clock.Advance(time.Minute)
	if j := b.claimOne(t, "w2"); j.ID != later.ID {
		t.Fatalf("claimed %d after its run time, want %d", j.ID, later.ID)
	}
}

func testClaimFilters(t *testing.T, b *bundle) {
	plain := b.enqueue(t, store.NewJob{})
	gpu := b.enqueue(t, store.NewJob{Profile: "gpu"})
	review := b.enqueue(t, store.NewJob{TaskClass: "review"})
	gpuReview := b.enqueue(t, store.NewJob{Profile: "gpu", TaskClass: "review"})

	tests := []struct {
		name              string
		profiles, classes []string
		want              []int64
	}{
		{"no capabilities", nil, nil, []int64{plain.ID}},
		{"gpu", []string{"gpu"}, nil, []int64{plain.ID, gpu.ID}},
		{"review", nil, []string{"review"}, []int64{plain.ID, review.ID}},
		{"gpu and review", []string{"cpu", "gpu"}, []string{"review"}, []int64{plain.ID, gpu.ID, review.ID, gpuReview.ID}},
		{"other", []string{"tpu"}, []string{"docs"}, []int64{plain.ID}},
	}
	for _, tc := range tests {
		// Claim, record, then release so the next case sees every job.
		jobs, err := b.s.Claim(b.ctx, store.ClaimParams{Worker: "w", Profiles: tc.profiles, TaskClasses: tc.classes, Limit: 10, LeaseFor: lease})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := ids(jobs)
		slices.Sort(got)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: claimed (-want +got):\n%s", tc.name, diff)
		}
		for _, j := range jobs {
			if _, err := b.s.Release(b.ctx, j.Lease()); err != nil {
				t.Fatalf("%s: release: %v", tc.name, err)
			}
		}
	}
}

func testClaimConcurrent(t *testing.T, b *bundle) {
	const jobs, workers = 2000, 8
	for i := range jobs {
		b.enqueue(t, store.NewJob{Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	params := make([]store.ClaimParams, workers)
	for w := range params {
		params[w] = store.ClaimParams{Worker: fmt.Sprintf("w%d", w), Limit: 10, LeaseFor: lease}
	}
	finish := func(l store.Lease) error {
		_, err := b.s.Complete(b.ctx, l, "ok")
		return err
	}
	b.claimRace(t, jobs, params, nil, finish)
}

// testSetPiece: a job given no piece records the one chosen for it, and
// its task shows it (maestro tasks list's PIECE column).
func testSetPiece(t *testing.T, b *bundle) {
	task, j, err := b.s.CreateTask(b.ctx, store.NewTask{Title: "classify me"})
	if err != nil {
		t.Fatal(err)
	}
	if task.JobPiece != "" {
		t.Fatalf("a new task's job piece = %q, want none yet", task.JobPiece)
	}
	c := b.claimOne(t, "w1")
	if c.ID != j.ID {
		t.Fatalf("claimed job %d, want %d", c.ID, j.ID)
	}
	wantErr(t, "SetPiece with no piece", b.s.SetPiece(b.ctx, c.Lease(), ""), store.ErrInvalid)
	if err := b.s.SetPiece(b.ctx, c.Lease(), "chat"); err != nil {
		t.Fatalf("SetPiece: %v", err)
	}
	if got := b.job(t, j.ID); got.Piece != "chat" {
		t.Errorf("job piece = %q, want chat", got.Piece)
	}
	got, list := b.taskAndList(t, task.ID)
	if got.Piece != "" || got.JobPiece != "chat" || len(list) == 0 || list[0].ID != task.ID || list[0].JobPiece != "chat" {
		t.Errorf("task after SetPiece: get %+v, list %+v; want piece unset (not forced) and job piece chat", got, list)
	}
}

func testLifecycle(t *testing.T, b *bundle) {
	task, j, err := b.s.CreateTask(b.ctx, store.NewTask{Title: "t", Piece: "general"})
	if err != nil {
		t.Fatal(err)
	}
	c := b.claimOne(t, "w1")
	if c.ID != j.ID {
		t.Fatalf("claimed job %d, want %d", c.ID, j.ID)
	}
	b.clock.Advance(time.Second)
	r, err := b.s.Start(b.ctx, c.Lease())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if r.State != store.StateRunning {
		t.Fatalf("after Start state = %s, want running", r.State)
	}
	_, err = b.s.Start(b.ctx, c.Lease())
	wantErr(t, "Start twice", err, store.ErrInvalidTransition)

	b.clock.Advance(10 * time.Second)
	until, err := b.s.Heartbeat(b.ctx, c.Lease(), time.Minute)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if want := b.clock.Now().Add(time.Minute); !until.Equal(want) {
		t.Fatalf("Heartbeat extended to %s, want %s", until, want)
	}
	if err := b.s.Checkpoint(b.ctx, c.Lease(), "plan", []byte(`{"visits":{"plan":1}}`)); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	evs, err := b.s.AppendJobEvents(b.ctx, c.Lease(), []store.NewJobEvent{
		{Type: "movement_start", Data: json.RawMessage(`{"movement":"plan"}`)},
		{Type: "tool_start", Data: json.RawMessage(`{"tool":"Read"}`)},
	})
	if err != nil {
		t.Fatalf("AppendJobEvents: %v", err)
	}
	if evs[0].Seq != 4 || evs[1].Seq != 5 || evs[0].Attempt != 1 {
		t.Fatalf("appended events %+v, want seq 4 and 5 at attempt 1", evs)
	}
	mid := b.job(t, j.ID)
	if mid.Movement != "plan" || string(mid.Checkpoint) != `{"visits":{"plan":1}}` || !mid.HeartbeatAt.Equal(b.clock.Now()) {
		t.Fatalf("job after checkpoint = %+v", mid)
	}
	b.clock.Advance(time.Second)
	done, err := b.s.Complete(b.ctx, c.Lease(), "all done")
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if done.State != store.StateSucceeded || done.Result != "all done" || !done.FinishedAt.Equal(b.clock.Now()) ||
		!done.LeaseExpiresAt.IsZero() || done.LeaseOwner != "w1" || done.LastSeq != 6 {
		t.Fatalf("completed job = %+v", done)
	}
	log := b.events(t, j.ID)
	checkGapFree(t, log)
	if diff := cmp.Diff([]string{"queued/0", "dispatching/1", "running/1", "succeeded/1"}, statusTrail(t, log)); diff != "" {
		t.Errorf("status trail (-want +got):\n%s", diff)
	}
	if log[3].Type != "movement_start" || string(log[3].Data) != `{"movement":"plan"}` {
		t.Errorf("event 4 = %+v, want the appended movement_start verbatim", log[3])
	}
	got, err := b.s.GetTask(b.ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.JobID != j.ID || got.JobState != store.StateSucceeded {
		t.Errorf("task shows job %d %s, want %d succeeded", got.JobID, got.JobState, j.ID)
	}
	_, err = b.s.Complete(b.ctx, c.Lease(), "again")
	wantErr(t, "Complete twice", err, store.ErrLeaseLost)
}

func testLeaseExpiry(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{MaxAttempts: 2})
	c1 := b.claimOne(t, "w1")
	b.clock.Advance(lease - time.Second)
	if got, err := b.s.ReapExpired(b.ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReapExpired before expiry = %v, %v; want nothing", ids(got), err)
	}
	// A heartbeat keeps it alive past the original expiry.
	if _, err := b.s.Heartbeat(b.ctx, c1.Lease(), lease); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Second)
	if got, err := b.s.ReapExpired(b.ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReapExpired after a heartbeat = %v, %v; want nothing", ids(got), err)
	}
	// The worker dies: no more heartbeats.
	b.clock.Advance(lease)
	reaped, err := b.s.ReapExpired(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].ID != j.ID || reaped[0].State != store.StateQueued || !strings.Contains(reaped[0].Error, "lease expired") {
		t.Fatalf("ReapExpired = %+v, want job %d queued with a lease-expired error", reaped, j.ID)
	}
	c2 := b.claimOne(t, "w2")
	if c2.ID != j.ID || c2.Attempt != 2 {
		t.Fatalf("reclaimed %d at attempt %d, want %d at attempt 2", c2.ID, c2.Attempt, j.ID)
	}
	// The last attempt also expires: no attempts left, so it fails.
	b.clock.Advance(lease + time.Second)
	reaped, err = b.s.ReapExpired(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].State != store.StateFailed || reaped[0].FinishedAt.IsZero() {
		t.Fatalf("ReapExpired on the last attempt = %+v, want failed", reaped)
	}
	b.claimNone(t, "w3")
	want := []string{"queued/0", "dispatching/1", "queued/1/lease expired", "dispatching/2", "failed/2/lease expired"}
	log := b.events(t, j.ID)
	checkGapFree(t, log)
	if diff := cmp.Diff(want, statusTrail(t, log)); diff != "" {
		t.Errorf("status trail (-want +got):\n%s", diff)
	}
}

func testFencing(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{})
	stale := b.claimOne(t, "w1").Lease()
	b.clock.Advance(lease + time.Second)
	if _, err := b.s.ReapExpired(b.ctx, 10); err != nil {
		t.Fatal(err)
	}
	fresh := b.claimOne(t, "w2").Lease()
	if _, err := b.s.Start(b.ctx, fresh); err != nil {
		t.Fatal(err)
	}
	before := b.job(t, j.ID)
	beforeLog := b.events(t, j.ID)

	// A zombie w1 (attempt 1) and an impostor claiming attempt 2 with the
	// wrong owner are both refused, whatever they try.
	impostor := store.Lease{JobID: j.ID, Attempt: fresh.Attempt, Owner: "w1"}
	for _, l := range []store.Lease{stale, impostor} {
		calls := map[string]error{}
		_, calls["Start"] = b.s.Start(b.ctx, l)
		_, calls["Heartbeat"] = b.s.Heartbeat(b.ctx, l, lease)
		calls["Checkpoint"] = b.s.Checkpoint(b.ctx, l, "x", nil)
		calls["SetPiece"] = b.s.SetPiece(b.ctx, l, "x")
		calls["SaveRunState"] = b.s.SaveRunState(b.ctx, l, "x", []byte("x"))
		_, calls["Complete"] = b.s.Complete(b.ctx, l, "zombie result")
		_, calls["Fail"] = b.s.Fail(b.ctx, l, store.FailParams{Error: "zombie"})
		_, calls["Wait"] = b.s.Wait(b.ctx, l, store.WaitParams{State: store.StateWaitingHuman})
		_, calls["Release"] = b.s.Release(b.ctx, l)
		_, calls["AppendJobEvents"] = b.s.AppendJobEvents(b.ctx, l, []store.NewJobEvent{{Type: "zombie"}})
		for name, err := range calls {
			wantErr(t, fmt.Sprintf("%s with lease %s", name, l), err, store.ErrLeaseLost)
		}
	}
	if diff := cmp.Diff(before, b.job(t, j.ID)); diff != "" {
		t.Fatalf("stale calls changed the job (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeLog, b.events(t, j.ID)); diff != "" {
		t.Fatalf("stale calls changed the log (-before +after):\n%s", diff)
	}
	_, err := b.s.Heartbeat(b.ctx, store.Lease{JobID: 999999, Attempt: 1, Owner: "w"}, lease)
	wantErr(t, "Heartbeat on an unknown job", err, store.ErrNotFound)
	if _, err := b.s.Complete(b.ctx, fresh, "ok"); err != nil {
		t.Fatalf("Complete with the current lease: %v", err)
	}
}

func testRetryBackoff(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{MaxAttempts: 3})
	for attempt := 1; attempt <= 2; attempt++ {
		c := b.claimOne(t, "w")
		if c.Attempt != attempt {
			t.Fatalf("claim %d has attempt %d", attempt, c.Attempt)
		}
		f, err := b.s.Fail(b.ctx, c.Lease(), store.FailParams{Error: fmt.Sprintf("boom %d", attempt), RetryAfter: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if f.State != store.StateQueued || !f.ScheduledAt.Equal(b.clock.Now().Add(10*time.Second)) || f.Error != fmt.Sprintf("boom %d", attempt) {
			t.Fatalf("after Fail: %+v, want queued at now+10s", f)
		}
		b.claimNone(t, "w")
		b.clock.Advance(10 * time.Second)
	}
	c := b.claimOne(t, "w")
	f, err := b.s.Fail(b.ctx, c.Lease(), store.FailParams{Error: "boom 3", RetryAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if f.State != store.StateFailed || f.Attempt != 3 || f.FinishedAt.IsZero() {
		t.Fatalf("after the last Fail: %+v, want failed at attempt 3", f)
	}
	b.clock.Advance(time.Hour)
	b.claimNone(t, "w")
	log := b.events(t, j.ID)
	checkGapFree(t, log)
	want := []string{"queued/0", "dispatching/1", "queued/1/retry", "dispatching/2", "queued/2/retry", "dispatching/3", "failed/3"}
	if diff := cmp.Diff(want, statusTrail(t, log)); diff != "" {
		t.Errorf("status trail (-want +got):\n%s", diff)
	}
	var st store.StatusEvent
	if err := json.Unmarshal(log[2].Data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Error != "boom 1" || st.RetryAt.IsZero() {
		t.Errorf("retry status event = %+v, want the error and retry_at", st)
	}
}

func testFailFinal(t *testing.T, b *bundle) {
	tests := []struct {
		name string
		p    store.FailParams
		want store.State
	}{
		{"no retry", store.FailParams{Error: "bad request", NoRetry: true}, store.StateFailed},
		{"abort", store.FailParams{Error: "loop detected", Abort: true}, store.StateAborted},
	}
	for _, tc := range tests {
		b.enqueue(t, store.NewJob{MaxAttempts: 5})
		c := b.claimOne(t, "w")
		f, err := b.s.Fail(b.ctx, c.Lease(), tc.p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if f.State != tc.want || f.Error != tc.p.Error {
			t.Errorf("%s: job %+v, want %s", tc.name, f, tc.want)
		}
	}
	// Over-long errors are truncated, not rejected.
	b.enqueue(t, store.NewJob{})
	c := b.claimOne(t, "w")
	f, err := b.s.Fail(b.ctx, c.Lease(), store.FailParams{Error: oversize(2 * store.MaxErrorBytes), NoRetry: true})
	if err != nil {
		t.Fatalf("Fail with a long error: %v", err)
	}
	if len(f.Error) > store.MaxErrorBytes {
		t.Errorf("stored error has %d bytes, want at most %d", len(f.Error), store.MaxErrorBytes)
	}
	b.claimNone(t, "w")
}

func testRetry(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{MaxAttempts: 1})
	c := b.claimOne(t, "w")
	if _, err := b.s.Fail(b.ctx, c.Lease(), store.FailParams{Error: "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := b.s.Retry(b.ctx, j.ID, 2)
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if r.State != store.StateQueued || r.MaxAttempts != 3 || r.Error != "" || !r.FinishedAt.IsZero() {
		t.Fatalf("after Retry: %+v, want queued with max_attempts 3", r)
	}
	c = b.claimOne(t, "w")
	if c.Attempt != 2 {
		t.Fatalf("attempt after Retry = %d, want 2 (attempts never go back: they fence)", c.Attempt)
	}
	_, err = b.s.Retry(b.ctx, j.ID, 1)
	wantErr(t, "Retry a dispatching job", err, store.ErrInvalidTransition)
	_, err = b.s.Retry(b.ctx, 999999, 1)
	wantErr(t, "Retry an unknown job", err, store.ErrNotFound)
}

func testWaitHuman(t *testing.T, b *bundle) {
	task, j, err := b.s.CreateTask(b.ctx, store.NewTask{Title: "ask me"})
	if err != nil {
		t.Fatal(err)
	}
	c := b.claimOne(t, "w1")
	w, err := b.s.Wait(b.ctx, c.Lease(), store.WaitParams{State: store.StateWaitingHuman, Reason: "question", Question: "Which branch?"})
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if w.State != store.StateWaitingHuman || w.WaitReason != "question" || !w.LeaseExpiresAt.IsZero() {
		t.Fatalf("after Wait: %+v", w)
	}
	comments, err := b.s.ListComments(b.ctx, task.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(comments) != 1 || comments[0].AuthorKind != store.AuthorAgent || comments[0].Body != "Which branch?" {
		t.Fatalf("comments after Wait = %+v, want the agent's question", comments)
	}
	b.claimNone(t, "w1")
	b.clock.Advance(time.Hour)
	if got, _ := b.s.ReapExpired(b.ctx, 10); len(got) != 0 {
		t.Fatalf("a waiting job was reaped: %v", ids(got))
	}
	// A comment that does not ask to resume leaves the job waiting.
	if _, resumed, err := b.s.AddComment(b.ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorSystem, Body: "note"}); err != nil || len(resumed) != 0 {
		t.Fatalf("AddComment(system) = %v, %v; want no resumed job", ids(resumed), err)
	}
	_, resumed, err := b.s.AddComment(b.ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Author: "ann", Body: "main", ResumeWaiting: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resumed) != 1 || resumed[0].ID != j.ID || resumed[0].State != store.StateQueued {
		t.Fatalf("AddComment resumed %+v, want job %d queued", resumed, j.ID)
	}
	c2 := b.claimOne(t, "w2")
	if c2.ID != j.ID || c2.Attempt != 2 {
		t.Fatalf("claimed %d attempt %d after the answer, want %d attempt 2", c2.ID, c2.Attempt, j.ID)
	}
	want := []string{"queued/0", "dispatching/1", "waiting_human/1/question", "queued/1/comment", "dispatching/2"}
	if diff := cmp.Diff(want, statusTrail(t, b.events(t, j.ID))); diff != "" {
		t.Errorf("status trail (-want +got):\n%s", diff)
	}
	// A job without a task cannot post a question; nothing changes.
	lone := b.enqueue(t, store.NewJob{})
	lc := b.claimOne(t, "w3")
	_, err = b.s.Wait(b.ctx, lc.Lease(), store.WaitParams{State: store.StateWaitingHuman, Question: "?"})
	wantField(t, "Wait with a question and no task", err, "question")
	if got := b.job(t, lone.ID); got.State != store.StateDispatching {
		t.Fatalf("rejected Wait left the job %s, want dispatching", got.State)
	}
	_, err = b.s.Wait(b.ctx, lc.Lease(), store.WaitParams{State: store.StateRunning})
	wantField(t, "Wait for a non-waiting state", err, "state")
}

// testAttemptsAddUp: waiting for a person is not an attempt (each answered
// question gives the job its claim back), and Retry adds extra attempts to
// what is left (issue 15 item 6).
func testAttemptsAddUp(t *testing.T, b *bundle) {
	task, j, err := b.s.CreateTask(b.ctx, store.NewTask{Title: "ask twice", MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	left := func(j store.Job) int { return j.MaxAttempts - j.Attempt }
	for i := range 2 {
		c := b.claimOne(t, "w")
		if left(c) != 1 {
			t.Fatalf("question %d: claimed at attempt %d/%d, want 1 attempt left", i+1, c.Attempt, c.MaxAttempts)
		}
		if _, err := b.s.Wait(b.ctx, c.Lease(), store.WaitParams{State: store.StateWaitingHuman, Reason: "question", Question: "Which?"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.s.AddComment(b.ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Body: "this", ResumeWaiting: true}); err != nil {
			t.Fatal(err)
		}
	}
	c := b.claimOne(t, "w")
	if c.ID != j.ID || c.Attempt > c.MaxAttempts || left(c) != 1 {
		t.Fatalf("after two answers: attempt %d/%d, want the first attempt's budget (1 left)", c.Attempt, c.MaxAttempts)
	}
	// The first failure after the answers is retried: an attempt remains.
	f, err := b.s.Fail(b.ctx, c.Lease(), store.FailParams{Error: "model error", RetryAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if f.State != store.StateQueued {
		t.Fatalf("first model error after two answered questions: %s at %d/%d, want queued", f.State, f.Attempt, f.MaxAttempts)
	}

	// Cancelled at attempt 1 of 3 (2 left): retry --extra 1 leaves 3.
	k := b.enqueue(t, store.NewJob{MaxAttempts: 3})
	if kc := b.claimOne(t, "w"); kc.ID != k.ID {
		t.Fatalf("claimed job %d, want %d", kc.ID, k.ID)
	}
	if _, err := b.s.Cancel(b.ctx, k.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	r, err := b.s.Retry(b.ctx, k.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Attempt != 1 || r.MaxAttempts != 4 {
		t.Fatalf("retry --extra 1 of a job cancelled at 1/3: %d/%d, want 1/4 (3 left)", r.Attempt, r.MaxAttempts)
	}
}

func testWaitSubtasks(t *testing.T, b *bundle) {
	parent := b.enqueue(t, store.NewJob{})
	pc := b.claimOne(t, "p")
	const n = 6
	for range n {
		b.enqueue(t, store.NewJob{ParentJobID: parent.ID})
	}
	w, err := b.s.Wait(b.ctx, pc.Lease(), store.WaitParams{State: store.StateWaitingSubtasks, Reason: "subtasks"})
	if err != nil {
		t.Fatal(err)
	}
	if w.State != store.StateWaitingSubtasks {
		t.Fatalf("parent after Wait = %s, want waiting_subtasks", w.State)
	}
	children := b.claim(t, "c", n)
	if len(children) != n {
		t.Fatalf("claimed %d children, want %d", len(children), n)
	}
	// The children finish concurrently; exactly the last one resumes the
	// parent.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, c := range children {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = b.s.Complete(b.ctx, c.Lease(), "child done")
			} else {
				_, err = b.s.Fail(b.ctx, c.Lease(), store.FailParams{Error: "child failed", NoRetry: true})
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := b.job(t, parent.ID); got.State != store.StateQueued {
		t.Fatalf("parent after its children finished = %s, want queued", got.State)
	}
	want := []string{"queued/0", "dispatching/1", "waiting_subtasks/1/subtasks", "queued/1/subtasks finished"}
	if diff := cmp.Diff(want, statusTrail(t, b.events(t, parent.ID))); diff != "" {
		t.Errorf("parent status trail (-want +got):\n%s", diff)
	}
	kids, err := b.s.ListJobs(b.ctx, store.JobFilter{ParentJobID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != n {
		t.Errorf("ListJobs(parent) = %d jobs, want %d", len(kids), n)
	}
}

func testWaitSubtasksDone(t *testing.T, b *bundle) {
	parent := b.enqueue(t, store.NewJob{})
	pc := b.claimOne(t, "p")
	b.enqueue(t, store.NewJob{ParentJobID: parent.ID})
	cc := b.claimOne(t, "c")
	if _, err := b.s.Complete(b.ctx, cc.Lease(), "early"); err != nil {
		t.Fatal(err)
	}
	w, err := b.s.Wait(b.ctx, pc.Lease(), store.WaitParams{State: store.StateWaitingSubtasks})
	if err != nil {
		t.Fatal(err)
	}
	if w.State != store.StateQueued {
		t.Fatalf("Wait for finished subtasks left the parent %s, want queued", w.State)
	}
}

func testCancel(t *testing.T, b *bundle) {
	queued := b.enqueue(t, store.NewJob{})
	running := b.enqueue(t, store.NewJob{})
	c, err := b.s.Cancel(b.ctx, queued.ID, "not needed")
	if err != nil {
		t.Fatal(err)
	}
	if c.State != store.StateCancelled || c.Error != "not needed" || c.FinishedAt.IsZero() {
		t.Fatalf("cancelled job = %+v", c)
	}
	r := b.claimOne(t, "w")
	if r.ID != running.ID {
		t.Fatalf("claimed %d, want %d (the cancelled job must not be claimed)", r.ID, running.ID)
	}
	if _, err := b.s.Start(b.ctx, r.Lease()); err != nil {
		t.Fatal(err)
	}
	sub, err := b.s.Subscribe(b.ctx, store.JobTopic(running.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := b.s.Cancel(b.ctx, running.ID, "user"); err != nil {
		t.Fatal(err)
	}
	Recv(t, sub)
	_, err = b.s.Heartbeat(b.ctx, r.Lease(), lease)
	wantErr(t, "Heartbeat after Cancel", err, store.ErrLeaseLost)
	_, err = b.s.Complete(b.ctx, r.Lease(), "too late")
	wantErr(t, "Complete after Cancel", err, store.ErrLeaseLost)
	before := b.job(t, running.ID)
	_, err = b.s.Cancel(b.ctx, running.ID, "again")
	wantErr(t, "Cancel twice", err, store.ErrInvalidTransition)
	if diff := cmp.Diff(before, b.job(t, running.ID)); diff != "" {
		t.Fatalf("a refused Cancel changed the job:\n%s", diff)
	}
	_, err = b.s.Cancel(b.ctx, 999999, "")
	wantErr(t, "Cancel an unknown job", err, store.ErrNotFound)
}

func testRelease(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{MaxAttempts: 1})
	c := b.claimOne(t, "w1")
	r, err := b.s.Release(b.ctx, c.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if r.State != store.StateQueued || r.MaxAttempts != 2 || !r.LeaseExpiresAt.IsZero() {
		t.Fatalf("released job = %+v, want queued with max_attempts 2", r)
	}
	c2 := b.claimOne(t, "w2")
	if c2.ID != j.ID || c2.Attempt != 2 {
		t.Fatalf("claim after release = %d attempt %d", c2.ID, c2.Attempt)
	}
	// The released attempt did not count: a failure now still ends it (1
	// real attempt allowed), and the release did not let it retry.
	f, err := b.s.Fail(b.ctx, c2.Lease(), store.FailParams{Error: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if f.State != store.StateFailed {
		t.Fatalf("after Fail = %s, want failed", f.State)
	}
}

// testFailNotCounted: an attempt failed for a cause not the job's (an
// artifact store outage) queues the job again after the delay even when it
// was its last attempt, and leaves it as many attempts as before.
func testFailNotCounted(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{MaxAttempts: 1})
	for attempt := 1; attempt <= 3; attempt++ {
		c := b.claimOne(t, "w")
		if c.ID != j.ID || c.Attempt != attempt {
			t.Fatalf("claim %d = job %d attempt %d", attempt, c.ID, c.Attempt)
		}
		f, err := b.s.Fail(b.ctx, c.Lease(), store.FailParams{Error: "artifact store unreachable: connection refused", RetryAfter: 8 * time.Second, NotCounted: true})
		if err != nil {
			t.Fatal(err)
		}
		if f.State != store.StateQueued || f.MaxAttempts != attempt+1 || !f.ScheduledAt.Equal(b.clock.Now().Add(8*time.Second)) || !f.FinishedAt.IsZero() {
			t.Fatalf("after a Fail not counted: %+v, want queued at now+8s with max_attempts %d", f, attempt+1)
		}
		b.claimNone(t, "w")
		b.clock.Advance(8 * time.Second)
	}
	// The attempts not counted left the one real attempt: a failure now
	// ends the job.
	c := b.claimOne(t, "w")
	f, err := b.s.Fail(b.ctx, c.Lease(), store.FailParams{Error: "boom", RetryAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if f.State != store.StateFailed || f.Attempt != 4 {
		t.Fatalf("after a counted Fail: %+v, want failed at attempt 4", f)
	}
	log := b.events(t, j.ID)
	var st store.StatusEvent
	if err := json.Unmarshal(log[2].Data, &st); err != nil {
		t.Fatal(err)
	}
	if st.State != store.StateQueued || st.Reason != "retry in 8s, attempt not counted" || st.Error != "artifact store unreachable: connection refused" || st.RetryAt.IsZero() {
		t.Errorf("status event of the Fail not counted = %+v", st)
	}
	j2 := b.enqueue(t, store.NewJob{})
	c = b.claimOne(t, "w")
	for _, p := range []store.FailParams{{NotCounted: true, NoRetry: true}, {NotCounted: true, Abort: true}} {
		_, err := b.s.Fail(b.ctx, c.Lease(), p)
		wantField(t, fmt.Sprintf("Fail %+v", p), err, "not_counted")
	}
	if got := b.job(t, j2.ID); got.State != store.StateDispatching {
		t.Errorf("job after refused Fails = %s, want still dispatching", got.State)
	}
}

func testInvalidTransitions(t *testing.T, b *bundle) {
	j := b.enqueue(t, store.NewJob{})
	c := b.claimOne(t, "w")
	if _, err := b.s.Start(b.ctx, c.Lease()); err != nil {
		t.Fatal(err)
	}
	before := b.job(t, j.ID)
	beforeLog := b.events(t, j.ID)

	_, err := b.s.Resume(b.ctx, j.ID)
	wantErr(t, "Resume a running job", err, store.ErrInvalidTransition)
	_, err = b.s.Retry(b.ctx, j.ID, 1)
	wantErr(t, "Retry a running job", err, store.ErrInvalidTransition)
	_, err = b.s.Complete(b.ctx, c.Lease(), oversize(store.MaxBodyBytes))
	wantField(t, "Complete with an oversize result", err, "result")
	_, err = b.s.Complete(b.ctx, c.Lease(), "bad \x00 byte")
	wantField(t, "Complete with a NUL byte", err, "result")
	err = b.s.Checkpoint(b.ctx, c.Lease(), "m", []byte(`{not json`))
	wantField(t, "Checkpoint with bad JSON", err, "checkpoint")
	_, err = b.s.Fail(b.ctx, c.Lease(), store.FailParams{RetryAfter: -time.Second})
	wantField(t, "Fail with a negative delay", err, "retry_after")
	_, err = b.s.Heartbeat(b.ctx, c.Lease(), 0)
	wantField(t, "Heartbeat with no extension", err, "extend")
	_, err = b.s.Complete(b.ctx, store.Lease{JobID: j.ID, Attempt: 0, Owner: "w"}, "")
	wantField(t, "Complete with a malformed lease", err, "lease.attempt")

	if diff := cmp.Diff(before, b.job(t, j.ID)); diff != "" {
		t.Fatalf("rejected calls changed the job (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeLog, b.events(t, j.ID)); diff != "" {
		t.Fatalf("rejected calls changed the log (-before +after):\n%s", diff)
	}
	_, err = b.s.Resume(b.ctx, 999999)
	wantErr(t, "Resume an unknown job", err, store.ErrNotFound)
	_, err = b.s.ListJobs(b.ctx, store.JobFilter{States: []store.State{"bogus"}})
	wantField(t, "ListJobs with an unknown state", err, "states[0]")
}

func testCountJobs(t *testing.T, b *bundle) {
	for range 3 {
		b.enqueue(t, store.NewJob{})
	}
	c := b.claimOne(t, "w")
	if _, err := b.s.Complete(b.ctx, c.Lease(), ""); err != nil {
		t.Fatal(err)
	}
	b.claimOne(t, "w")
	got, err := b.s.CountJobs(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[store.State]int64{store.StateQueued: 1, store.StateDispatching: 1, store.StateSucceeded: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CountJobs (-want +got):\n%s", diff)
	}
	list, err := b.s.ListJobs(b.ctx, store.JobFilter{States: []store.State{store.StateQueued, store.StateSucceeded}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Errorf("ListJobs(queued, succeeded) = %d jobs, want 2", len(list))
	}
	page, err := b.s.ListJobs(b.ctx, store.JobFilter{AfterID: list[0].ID, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].ID <= list[0].ID {
		t.Errorf("ListJobs(after %d, limit 1) = %v", list[0].ID, ids(page))
	}
}
