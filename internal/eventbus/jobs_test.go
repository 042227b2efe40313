package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// jobBus starts a NATS server, a bus publishing to it (with corr) and an
// SQLite store for the job follower tests.
func jobBus(t *testing.T, corr eventbus.Correlation) (*bustest.Server, *eventbus.Bus, *sqlite.Store) {
	t.Helper()
	srv := bustest.Start(t)
	b := newBus(t, srv, corr, true)
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "maestro.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return srv, b, st
}

// claimStart claims the next job as worker w1 and starts it.
func claimStart(t *testing.T, st store.Store) store.Lease {
	t.Helper()
	claimed, err := st.Claim(t.Context(), store.ClaimParams{Worker: "w1", Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	l := claimed[0].Lease()
	if _, err := st.Start(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	return l
}

// runningJob queues a task on the piece noop, claims and starts its job,
// and appends frames to its log as the runner's protocol events.
func runningJob(t *testing.T, st store.Store, frames ...string) store.Lease {
	t.Helper()
	if _, _, err := st.CreateTask(t.Context(), store.NewTask{Owner: "alice", Title: "t", Piece: "noop"}); err != nil {
		t.Fatal(err)
	}
	l := claimStart(t, st)
	if len(frames) == 0 {
		return l
	}
	evs := make([]store.NewJobEvent, len(frames))
	for i, f := range frames {
		evs[i] = store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(f)}
	}
	if _, err := st.AppendJobEvents(t.Context(), l, evs); err != nil {
		t.Fatal(err)
	}
	return l
}

// A queued job's lifecycle and its agent's tool calls are published with
// the task's correlation (submitter, payload metadata), not the
// process's.
func TestJobLogBecomesPlatformEvents(t *testing.T) {
	ctx := t.Context()
	srv, b, st := jobBus(t, eventbus.Correlation{OrganizationID: "process-org"})
	_, job, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "t", Piece: "noop",
		Payload: json.RawMessage(`{"metadata":{"organization_id":"org_j","workspace_id":"ws_j","agent_run_id":"run_j"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	l := claimStart(t, st)
	if _, err := st.AppendJobEvents(ctx, l, []store.NewJobEvent{
		{Type: store.JobEventProtocol, Data: json.RawMessage(`{"type":"tool_call","call_id":"c1","tool":"Bash","args":{},"requires_approval":false}`)},
		{Type: store.JobEventProtocol, Data: json.RawMessage(`{"type":"tool_end","call_id":"c1","success":true}`)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Complete(ctx, l, "done"); err != nil {
		t.Fatal(err)
	}
	_, job2, err := st.CreateTask(ctx, store.NewTask{Owner: "bob", Title: "u", Piece: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, job2.ID, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(t.TempDir(), "jobs.json")
	go b.FollowJobs(ctx, st, stateFile, 10*time.Millisecond)

	want := []string{eventbus.TypeJobQueued, eventbus.TypeJobStarted, eventbus.TypeToolCallAttempted,
		eventbus.TypeToolCallCompleted, eventbus.TypeJobSucceeded, eventbus.TypeJobQueued, eventbus.TypeJobCancelled}
	msgs := srv.Wait(len(want))
	if got := types(msgs); !slices.Equal(got, want) {
		t.Fatalf("published types:\n got %q\nwant %q", got, want)
	}
	for _, m := range msgs[:5] {
		ext := m.Event.Extensions()
		for k, v := range map[string]string{"organizationid": "org_j", "workspaceid": "ws_j", "agentrunid": "run_j",
			"userid": "alice", "taskid": fmt.Sprint(job.TaskID)} {
			if fmt.Sprint(ext[k]) != v {
				t.Errorf("%s: extension %s = %v, want %q", m.Event.Type(), k, ext[k], v)
			}
		}
	}
	if ext := msgs[6].Event.Extensions(); ext["userid"] != "bob" || ext["organizationid"] != nil {
		t.Errorf("cancelled job's extensions: %v", ext)
	}
}

// The job follower follows the store's wake-ups, not a clock: with the
// reconcile pass an hour away, a job queued, run and finished after it
// started is published as it happens, and one queued again after it
// finished is followed again.
func TestJobFollowerFollowsStoreWakeUps(t *testing.T) {
	ctx := t.Context()
	srv, b, st := jobBus(t, eventbus.Correlation{})
	// A job finished before the follower starts: the catch-up.
	_, old, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "old", Piece: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, old.ID, "old"); err != nil {
		t.Fatal(err)
	}
	go b.FollowJobs(ctx, st, filepath.Join(t.TempDir(), "jobs.json"), time.Hour)
	srv.Wait(2)

	_, job, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "t", Piece: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if got := types(srv.Wait(3)[2:]); !slices.Equal(got, []string{eventbus.TypeJobQueued}) {
		t.Fatalf("after enqueue: %q", got)
	}
	l := claimStart(t, st)
	if _, err := st.AppendJobEvents(ctx, l, []store.NewJobEvent{
		{Type: store.JobEventProtocol, Data: json.RawMessage(`{"type":"tool_call","call_id":"c1","tool":"Bash","args":{},"requires_approval":false}`)},
		{Type: store.JobEventProtocol, Data: json.RawMessage(`{"type":"tool_end","call_id":"c1","success":false,"error_code":"failed"}`)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Fail(ctx, l, store.FailParams{Error: "boom", NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	// Finished (no longer watched), then queued again.
	if _, err := st.Retry(ctx, job.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Complete(ctx, claimStart(t, st), "done"); err != nil {
		t.Fatal(err)
	}
	want := []string{eventbus.TypeJobStarted, eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted,
		eventbus.TypeJobFailed, eventbus.TypeJobQueued, eventbus.TypeJobStarted, eventbus.TypeJobSucceeded}
	msgs := srv.Wait(3 + len(want))
	if got := types(msgs[3:]); !slices.Equal(got, want) {
		t.Fatalf("published types:\n got %q\nwant %q", got, want)
	}
	if id := msgs[len(msgs)-1].Event.ID(); id != fmt.Sprintf("job-%d-%d.%d.0", job.ID, job.CreatedAt.UnixMicro(), 10) {
		t.Errorf("last event id %s", id)
	}
}

// lateLister is a store whose next ListJobs call first runs a hook: the
// store changes between a wake-up and the follower's listing of the jobs.
type lateLister struct {
	store.Store
	mu   sync.Mutex
	hook func() error
	errs chan error
}

func (l *lateLister) before(hook func() error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hook = hook
}

func (l *lateLister) ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	l.mu.Lock()
	hook := l.hook
	l.hook = nil
	l.mu.Unlock()
	if hook != nil {
		if err := hook(); err != nil {
			l.errs <- err
		}
	}
	return l.Store.ListJobs(ctx, f)
}

// A job that becomes queued and finishes before the follower lists the
// jobs after the wake-up (a finished job retried, a new job cancelled at
// once) is published all the same, without waiting for the reconcile
// pass.
func TestJobFollowerReadsJobsFinishedBeforeTheListing(t *testing.T) {
	ctx := t.Context()
	srv, b, st := jobBus(t, eventbus.Correlation{})
	_, job, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "t", Piece: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Fail(ctx, claimStart(t, st), store.FailParams{Error: "boom", NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	src := &lateLister{Store: st, errs: make(chan error, 2)}
	go b.FollowJobs(ctx, src, filepath.Join(t.TempDir(), "jobs.json"), time.Hour)
	srv.Wait(3) // queued, started, failed

	// Retried, then run to the end before the follower lists the jobs.
	src.before(func() error {
		claimed, err := st.Claim(ctx, store.ClaimParams{Worker: "w1", Limit: 1, LeaseFor: time.Minute, Start: true})
		if err != nil || len(claimed) != 1 {
			return fmt.Errorf("claim: %v %v", claimed, err)
		}
		_, err = st.Complete(ctx, claimed[0].Lease(), "done")
		return err
	})
	if _, err := st.Retry(ctx, job.ID, 1); err != nil {
		t.Fatal(err)
	}
	want := []string{eventbus.TypeJobQueued, eventbus.TypeJobStarted, eventbus.TypeJobFailed,
		eventbus.TypeJobQueued, eventbus.TypeJobStarted, eventbus.TypeJobSucceeded}
	if got := types(srv.Wait(len(want))); !slices.Equal(got, want) {
		t.Fatalf("after the retry:\n got %q\nwant %q", got, want)
	}

	// A new job cancelled before the follower lists the jobs.
	src.before(func() error {
		queued, err := st.ListJobs(ctx, store.JobFilter{States: []store.State{store.StateQueued}})
		for _, j := range queued {
			if _, cerr := st.Cancel(ctx, j.ID, "at once"); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
		return err
	})
	if _, _, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "u", Piece: "noop"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, eventbus.TypeJobQueued, eventbus.TypeJobCancelled)
	if got := types(srv.Wait(len(want))); !slices.Equal(got, want) {
		t.Fatalf("after the new job:\n got %q\nwant %q", got, want)
	}
	select {
	case err := <-src.errs:
		t.Fatal(err)
	default:
	}
}

// A job's events sent while NATS is down (and a page of the log sent
// without waiting for each acknowledgement) arrive once each and in
// order once it is back.
func TestJobFollowerNATSRestartLosesNothing(t *testing.T) {
	ctx := t.Context()
	srv := bustest.Start(t)
	srv.CreateStream()
	b := newBus(t, srv, eventbus.Correlation{}, false)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "maestro.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := runningJob(t, st)
	go b.FollowJobs(ctx, st, filepath.Join(t.TempDir(), "jobs.json"), time.Hour)
	const perPhase = 40
	call := 0
	phase := func() {
		var evs []store.NewJobEvent
		for range perPhase {
			call++
			evs = append(evs,
				store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(fmt.Sprintf(`{"type":"tool_call","call_id":"c%d","tool":"Read","args":{},"requires_approval":false}`, call))},
				store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(fmt.Sprintf(`{"type":"tool_end","call_id":"c%d","success":true}`, call))})
		}
		if _, err := st.AppendJobEvents(ctx, l, evs); err != nil {
			t.Fatal(err)
		}
	}
	phase()
	srv.Wait(2 + 2*perPhase) // queued, started, the calls
	srv.Stop()
	phase() // appended while NATS is down
	srv.Restart()
	phase()
	if _, err := st.Complete(ctx, l, "done"); err != nil {
		t.Fatal(err)
	}
	want := 2 + 2*3*perPhase + 1
	msgs := srv.Wait(want)
	if len(msgs) != want {
		t.Fatalf("%d messages, want %d", len(msgs), want)
	}
	bustest.CheckOnceInOrder(t, msgs, "c%d")
	if got := msgs[len(msgs)-1].Event.Type(); got != eventbus.TypeJobSucceeded {
		t.Errorf("last event %s", got)
	}
}

// A follower that starts from a cursor between a call's start and its
// end names the call's tool in its completed event (read back from the
// log before the cursor).
func TestJobFollowerRecallsCallsBeforeItsCursor(t *testing.T) {
	ctx := t.Context()
	srv, b, st := jobBus(t, eventbus.Correlation{})
	l := runningJob(t, st,
		`{"type":"tool_call","call_id":"c1","tool":"Bash","args":{},"requires_approval":false}`,
		`{"type":"tool_call","call_id":"c2","tool":"Read","args":{},"requires_approval":false}`,
		`{"type":"tool_end","call_id":"c2","success":true}`,
	)
	stateFile := filepath.Join(t.TempDir(), "jobs.json")
	first, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.FollowJobs(first, st, stateFile, time.Hour)
	}()
	srv.Wait(5) // queued, started, c1 attempted, c2 attempted, c2 completed
	stop()
	<-done
	if _, err := st.AppendJobEvents(ctx, l, []store.NewJobEvent{
		{Type: store.JobEventProtocol, Data: json.RawMessage(`{"type":"tool_end","call_id":"c1","success":true}`)},
		{Type: store.JobEventProtocol, Data: json.RawMessage(`{"type":"tool_call","call_id":"c3","tool":"Glob","args":{},"requires_approval":false}`)},
		{Type: store.JobEventProtocol, Data: json.RawMessage(`{"type":"tool_end","call_id":"c3","success":true}`)},
	}); err != nil {
		t.Fatal(err)
	}
	go b.FollowJobs(ctx, st, stateFile, time.Hour)
	msgs := srv.Wait(8)
	var names []string
	for _, m := range msgs[5:] {
		var data map[string]any
		if err := m.Event.DataAs(&data); err != nil {
			t.Fatal(err)
		}
		names = append(names, m.Event.Type()+" "+fmt.Sprint(data["tool_call_id"], " ", data["tool_name"]))
	}
	want := []string{eventbus.TypeToolCallCompleted + " c1 Bash", eventbus.TypeToolCallAttempted + " c3 Glob", eventbus.TypeToolCallCompleted + " c3 Glob"}
	if !slices.Equal(names, want) {
		t.Fatalf("after the restart:\n got %q\nwant %q", names, want)
	}
}

// countingReads is a store that counts the reads of job logs.
type countingReads struct {
	store.Store
	reads atomic.Int64
}

func (c *countingReads) ReadJobEvents(ctx context.Context, jobID, after int64, limit int) ([]store.JobEvent, error) {
	c.reads.Add(1)
	return c.Store.ReadJobEvents(ctx, jobID, after, limit)
}

// Publishing a job's log reads it once, not once more at every tool call
// (which made the follower's work grow with the square of the log).
func TestJobFollowerReadsTheLogOnce(t *testing.T) {
	ctx := t.Context()
	srv, b, st := jobBus(t, eventbus.Correlation{})
	l := runningJob(t, st)
	const calls = 100
	var evs []store.NewJobEvent
	for i := range calls {
		evs = append(evs,
			store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(fmt.Sprintf(`{"type":"tool_call","call_id":"c%d","tool":"Read","args":{},"requires_approval":false}`, i+1))},
			store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(fmt.Sprintf(`{"type":"tool_end","call_id":"c%d","success":true}`, i+1))})
	}
	if _, err := st.AppendJobEvents(ctx, l, evs); err != nil {
		t.Fatal(err)
	}
	src := &countingReads{Store: st}
	go b.FollowJobs(ctx, src, filepath.Join(t.TempDir(), "jobs.json"), time.Hour)
	bustest.CheckOnceInOrder(t, srv.Wait(2+2*calls), "c%d")
	if n := src.reads.Load(); n > 3 {
		t.Errorf("the job's log was read %d times for %d calls", n, calls)
	}
}

// Two stores publishing to one NATS (two teams' serve, a data directory
// started afresh) both number their first job 1: the events of the
// second store's job are not taken for re-sent events of the first's
// and dropped as JetStream duplicates, while a re-sent event keeps its
// id.
func TestJobEventIDsDifferBetweenStores(t *testing.T) {
	ctx := t.Context()
	srv, b1, st1 := jobBus(t, eventbus.Correlation{})
	st2, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "other.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	for _, st := range []*sqlite.Store{st1, st2} {
		_, job, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "t", Piece: "noop"})
		if err != nil {
			t.Fatal(err)
		}
		if job.ID != 1 {
			t.Fatalf("job id %d, want 1 in each store", job.ID)
		}
		if _, err := st.Cancel(ctx, job.ID, "not needed"); err != nil {
			t.Fatal(err)
		}
	}
	go b1.FollowJobs(ctx, st1, filepath.Join(t.TempDir(), "jobs.json"), time.Hour)
	first := srv.Wait(2)
	b2 := newBus(t, srv, eventbus.Correlation{}, true)
	go b2.FollowJobs(ctx, st2, filepath.Join(t.TempDir(), "jobs.json"), time.Hour)
	msgs := srv.Wait(4)
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4", len(msgs))
	}
	ids := map[string]bool{}
	for _, m := range msgs {
		if ids[m.Event.ID()] {
			t.Errorf("id %s published twice", m.Event.ID())
		}
		ids[m.Event.ID()] = true
	}
	// Another process on the same store goes on from the store's
	// cursor: it publishes the job created since, and nothing again (an
	// event published again keeps its id:
	// TestJobEventsBeforeTheCursorArePublishedAgain).
	b1.Close()
	if _, _, err := st1.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "u", Piece: "noop"}); err != nil {
		t.Fatal(err)
	}
	b3 := newBus(t, srv, eventbus.Correlation{}, true)
	go b3.FollowJobs(ctx, st1, filepath.Join(t.TempDir(), "jobs.json"), time.Hour)
	srv.Wait(5)
	if got := srv.Messages(); len(got) != 5 {
		t.Errorf("after the same store published again: %d messages, want 5 (%q)", len(got), types(got))
	}
	if id := first[0].Event.ID(); !strings.HasPrefix(id, "job-1-") || !strings.HasSuffix(id, ".1.0") {
		t.Errorf("first id %s, want job-1-<created>.1.0", id)
	}
}

// A job's lifecycle events name the piece its log has told at their
// point, whenever the follower reads it: a job given none has none when
// queued and started (the classifier has not picked yet), and the piece
// its run started from then on (not an in-process subtask's), also
// after a restart of the follower past that point; a job given a piece
// names it from its queued event.
func TestJobEventsNameThePieceOnceKnown(t *testing.T) {
	ctx := t.Context()
	srv, b, st := jobBus(t, eventbus.Correlation{})
	if _, _, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "auto"}); err != nil {
		t.Fatal(err)
	}
	l := claimStart(t, st)
	// The run events as the queue's runner logs them (engine.Record).
	record := func(seq int, e engine.Event) json.RawMessage {
		data, err := json.Marshal(engine.Record{RunID: "r", Seq: seq, Time: time.Now(), Event: e})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if _, err := st.AppendJobEvents(ctx, l, []store.NewJobEvent{
		{Type: store.JobEventRunEvent, Data: record(1, engine.Classified{Piece: "code", Reason: "x"})},
		{Type: store.JobEventRunEvent, Data: record(2, engine.RunStarted{Piece: "code", Task: "t"})},
		{Type: store.JobEventRunEvent, Data: record(3, engine.RunStarted{Piece: "review", Task: "t", Subtask: 1})},
		{Type: store.JobEventProtocol, Data: json.RawMessage(`{"type":"tool_call","call_id":"c1","tool":"Bash","args":{},"requires_approval":false}`)},
	}); err != nil {
		t.Fatal(err)
	}
	// The store records the pick on the job as the runner does: a
	// follower reading the job now must not take it for the given one.
	if err := st.SetPiece(ctx, l, "code"); err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(t.TempDir(), "jobs.json")
	first, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.FollowJobs(first, st, stateFile, time.Hour)
	}()
	srv.Wait(3) // queued, started, c1 attempted
	stop()
	<-done
	if _, err := st.Complete(ctx, l, "done"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateTask(ctx, store.NewTask{Owner: "bob", Title: "given", Piece: "noop"}); err != nil {
		t.Fatal(err)
	}
	go b.FollowJobs(ctx, st, stateFile, time.Hour)
	var got []string
	for _, m := range srv.Wait(6) { // and c1 ended (the attempt ended with it in flight), succeeded, queued (job 2)
		var data map[string]any
		if err := m.Event.DataAs(&data); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(m.Event.Type(), "maestro.jobs.") {
			got = append(got, fmt.Sprintf("%s job %v piece %v", m.Event.Type(), data["job_id"], data["piece"]))
		}
	}
	want := []string{
		eventbus.TypeJobQueued + " job 1 piece <nil>", eventbus.TypeJobStarted + " job 1 piece <nil>",
		eventbus.TypeJobSucceeded + " job 1 piece code", eventbus.TypeJobQueued + " job 2 piece noop",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("job events:\n got %q\nwant %q", got, want)
	}
}

// A job cancelled while its agent ran a tool call (the cancel fences the
// runner's appends: the call's tool_end never reaches the log) ends that
// call CANCELLED before job.cancelled, once: a follower that starts
// again from its cursor does not end it twice. Before, the call stayed
// attempted for ever.
func TestCancelledJobEndsItsCallsInFlight(t *testing.T) {
	ctx := t.Context()
	srv, b, st := jobBus(t, eventbus.Correlation{})
	l := runningJob(t, st,
		`{"type":"tool_call","call_id":"c1","tool":"Read","args":{},"requires_approval":false}`,
		`{"type":"tool_end","call_id":"c1","success":true}`,
		`{"type":"tool_call","call_id":"c2","tool":"Bash","args":{},"requires_approval":false}`,
	)
	stateFile := filepath.Join(t.TempDir(), "jobs.json")
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.FollowJobs(fctx, st, stateFile, 10*time.Millisecond) }()
	srv.Wait(5) // queued, started, c1 attempted and completed, c2 attempted
	stop()
	<-done
	if _, err := st.Cancel(ctx, l.JobID, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	go b.FollowJobs(ctx, st, stateFile, 10*time.Millisecond) // again, from its cursor
	want := []string{eventbus.TypeJobQueued, eventbus.TypeJobStarted, eventbus.TypeToolCallAttempted,
		eventbus.TypeToolCallCompleted, eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted, eventbus.TypeJobCancelled}
	msgs := srv.Wait(len(want))
	if got := types(msgs); !slices.Equal(got, want) {
		t.Fatalf("published types:\n got %q\nwant %q", got, want)
	}
	var d map[string]string
	json.Unmarshal(msgs[5].Event.Data(), &d)
	if d["tool_call_id"] != "c2" || d["tool_name"] != "Bash" || d["status"] != "MAESTRO_TOOL_CALL_STATUS_CANCELLED" || d["error_code"] != "cancelled" {
		t.Errorf("the call in flight ended %v, want c2 Bash CANCELLED cancelled", d)
	}
	if n := len(srv.Messages()); n != len(want) {
		t.Errorf("%d events published, want %d", n, len(want))
	}
}

// A child job (a subtask of a queued job's piece run) has no task nor
// metadata of its own: its events carry its parent's correlation (the
// task, its submitter, the payload's metadata). Before, they carried
// none, so a consumer selecting a tenant's (organizationid) or a task's
// events lost every subtask's. Its data names its parent job
// (parent_job_id; before, nothing in an event said which job spawned
// it).
func TestChildJobEventsCarryTheParentsCorrelation(t *testing.T) {
	ctx := t.Context()
	srv, b, st := jobBus(t, eventbus.Correlation{OrganizationID: "process-org"})
	_, parent, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "t", Piece: "noop",
		Payload: json.RawMessage(`{"metadata":{"organization_id":"org_j","workspace_id":"ws_j","agent_run_id":"run_j"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	claimStart(t, st)
	child, err := st.Enqueue(ctx, store.NewJob{ParentJobID: parent.ID, Piece: "noop", Payload: json.RawMessage(`{"task":"part"}`)})
	if err != nil {
		t.Fatal(err)
	}
	go b.FollowJobs(ctx, st, filepath.Join(t.TempDir(), "jobs.json"), 10*time.Millisecond)
	msgs := srv.Wait(3) // the parent queued and started, the child queued
	var got int
	for _, m := range msgs {
		var d struct {
			JobID       int64 `json:"job_id"`
			ParentJobID int64 `json:"parent_job_id"`
		}
		json.Unmarshal(m.Event.Data(), &d)
		if d.JobID != child.ID {
			if d.ParentJobID != 0 {
				t.Errorf("job %d's %s: parent_job_id %d, want none", d.JobID, m.Event.Type(), d.ParentJobID)
			}
			continue
		}
		got++
		if d.ParentJobID != parent.ID {
			t.Errorf("child job's %s: parent_job_id %d, want %d", m.Event.Type(), d.ParentJobID, parent.ID)
		}
		ext := m.Event.Extensions()
		for k, v := range map[string]string{"organizationid": "org_j", "workspaceid": "ws_j", "agentrunid": "run_j",
			"userid": "alice", "taskid": fmt.Sprint(parent.TaskID)} {
			if fmt.Sprint(ext[k]) != v {
				t.Errorf("child job's %s: extension %s = %v, want %q", m.Event.Type(), k, ext[k], v)
			}
		}
	}
	if got != 1 {
		t.Errorf("%d events of the child job, want its queued", got)
	}
}
