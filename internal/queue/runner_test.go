package queue_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/sandbox/sandboxtest"
	"github.com/maestro-run/maestro/internal/store"
)

// askScenario asks a question, then finishes with a file and the answer.
const askScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"ask-colour","description":"ask, then finish",
"metadata":{"recordedAt":"2026-11-23T00:00:00Z","toolsExpected":["complete","Write"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"needs_user_input","result":"Which colour should the fence be?"}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"Write","input":{"path":"output/fence.txt","content":"painted\n"}}]},
{"index":2,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"The fence is painted."}}]}
]}`

func payload(t *testing.T, scenario string) json.RawMessage {
	t.Helper()
	return payloadWith(t, map[string]any{"replay": json.RawMessage(scenario)})
}

// payloadWith is a job payload with fields.
func payloadWith(t *testing.T, fields map[string]any) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestEngineRunnerAskAnswerResume(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data})})
	ctx := t.Context()
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Paint the fence", Piece: "general", Payload: payload(t, askScenario)})
	if err != nil {
		t.Fatal(err)
	}
	waiting := waitJob(t, st, job.ID, "waiting_human", inState(store.StateWaitingHuman))
	if waiting.Attempt != 1 {
		t.Errorf("waiting job = %+v", waiting)
	}
	comments, err := st.ListComments(ctx, task.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(comments) != 1 || comments[0].AuthorKind != store.AuthorAgent || comments[0].Body != "Which colour should the fence be?" {
		t.Fatalf("comments = %+v, want the agent's question", comments)
	}
	dir := queue.StateDir(data, task.ID)
	if st, err := engine.LoadState(dir); err != nil || st.Status != engine.StatusWaitingHuman {
		t.Fatalf("run state in %s: %+v, %v", dir, st, err)
	}

	// The user answers; the comment queues the job again.
	_, resumed, err := st.AddComment(ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Body: "blue", ResumeWaiting: true})
	if err != nil || len(resumed) != 1 {
		t.Fatalf("answer: resumed %v, %v", resumed, err)
	}
	done := waitJob(t, st, job.ID, "succeeded", inState(store.StateSucceeded))
	if done.Result != "The fence is painted." || done.Attempt != 2 || done.Movement != "execute" {
		t.Errorf("job = %+v", done)
	}
	if got, err := os.ReadFile(filepath.Join(queue.WorkDir(data, task.ID), "output", "fence.txt")); err != nil || string(got) != "painted\n" {
		t.Errorf("deliverable: %q, %v", got, err)
	}
	rs, err := engine.LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Answers) != 1 || rs.Answers[0].Answer != "blue" {
		t.Errorf("the run did not get the answer: %+v", rs.Answers)
	}

	// The event log: run events and protocol events, seq without gaps.
	kinds := map[string]bool{}
	types := map[store.JobEventKind]int{}
	for i, e := range events(t, st, job.ID) {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		types[e.Type]++
		if e.Type == store.JobEventRunEvent {
			var r engine.Record
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Errorf("run_event does not decode: %v: %s", err, e.Data)
			}
			kinds[string(r.Event.Kind())] = true
		}
	}
	for _, k := range []string{"classified", "run_started", "movement_started", "waiting", "resumed", "complete"} {
		if !kinds[k] {
			t.Errorf("no %s run event; kinds %v", k, kinds)
		}
	}
	// Statuses: queued, running, waiting_human, queued (the answer),
	// running, succeeded (a claim starts the job: no dispatching).
	if types[store.JobEventProtocol] == 0 || types[store.JobEventStatus] < 6 {
		t.Errorf("event types = %v", types)
	}
}

func TestEngineRunnerNoop(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: t.TempDir()})})
	j := enqueue(t, st, store.NewJob{Piece: queue.NoopPiece})
	done := waitJob(t, st, j.ID, "succeeded", inState(store.StateSucceeded))
	var types []string
	for _, e := range events(t, st, j.ID) {
		types = append(types, string(e.Type))
	}
	if done.Result != "ok" || strings.Join(types, " ") != "status status noop status" {
		t.Errorf("noop job = %+v, events %v", done, types)
	}
}

func TestEngineRunnerRejectsBadReplay(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: t.TempDir()})})
	_, j, err := st.CreateTask(t.Context(), store.NewTask{Title: "x", MaxAttempts: 3, Payload: payload(t, `{"schemaVersion":"nope"}`)})
	if err != nil {
		t.Fatal(err)
	}
	got := waitJob(t, st, j.ID, "failed", inState(store.StateFailed))
	if got.Attempt != 1 || !strings.Contains(got.Error, `payload field "replay"`) {
		t.Errorf("job = %+v, want one attempt failing on the replay field", got)
	}
}

// TestEngineRunnerNullReplayIsNone: a payload's "replay": null (which the
// API takes) is no scenario: the job runs the bundled demo instead of
// failing on an empty YAML document.
func TestEngineRunnerNullReplayIsNone(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: t.TempDir()})})
	_, j, err := st.CreateTask(t.Context(), store.NewTask{Title: "x", Piece: "general", MaxAttempts: 1, Payload: json.RawMessage(`{"replay": null}`)})
	if err != nil {
		t.Fatal(err)
	}
	// The demo's Bash call fails here (no sandbox configured): what
	// matters is that the run started, on the demo.
	if got := waitJob(t, st, j.ID, "finished", func(j store.Job) bool { return j.State.Terminal() }); got.Movement != "execute" || strings.Contains(got.Error, "payload") {
		t.Errorf("job = %+v, want the bundled demo's run started, not a payload error", got)
	}
}

// A waiting job resumed without a new user comment keeps waiting and does
// not take an older comment (one before the question) as the answer.
func TestEngineRunnerResumeWithoutAnswerKeepsWaiting(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data})})
	ctx := t.Context()
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Paint the fence", Piece: "general", MaxAttempts: 5, Payload: payload(t, askScenario)})
	if err != nil {
		t.Fatal(err)
	}
	// A user comment before the question is not an answer.
	if _, _, err := st.AddComment(ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Body: "early note"}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, st, job.ID, "waiting_human", inState(store.StateWaitingHuman))
	if _, err := st.Resume(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	again := waitJob(t, st, job.ID, "waiting again", func(j store.Job) bool { return j.State == store.StateWaitingHuman && j.Attempt == 2 })
	comments, err := st.ListComments(ctx, task.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(comments) != 2 {
		t.Errorf("comments = %+v, want the note and one question", comments)
	}
	if _, _, err := st.AddComment(ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Body: "green", ResumeWaiting: true}); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, st, job.ID, "succeeded", inState(store.StateSucceeded))
	if done.Attempt != again.Attempt+1 {
		t.Errorf("job = %+v", done)
	}
	rs, err := engine.LoadState(queue.StateDir(data, task.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Answers) != 1 || rs.Answers[0].Answer != "green" {
		t.Errorf("answers = %+v, want only \"green\"", rs.Answers)
	}
}

// abortScenario aborts at once.
const abortScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"abort","description":"abort at once",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["complete"]},
"frames":[{"index":0,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"aborted","result":"The input file is missing."}}]}]}`

// shortScenario answers in text, and has no turn for the reminder that
// follows: the model call fails, and so does the attempt.
const shortScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"short","description":"one text turn",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":[]},
"frames":[{"index":0,"statements":[{"kind":"text","text":"Working on it."}]}]}`

// A job that ends posts the progress comment on its task, as an agent
// comment: the outcome and result, the deliverables under output/ and the
// cost (issue 15 item 9). It is there by the time the job is seen to end.
func TestEngineRunnerPostsProgressComment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		task  store.NewTask
		state store.State
		want  []string
	}{
		{"the piece demo succeeds", store.NewTask{Title: "Say hello in five languages"}, store.StateSucceeded, []string{
			"The general run succeeded.\n\nThis was Maestro's scripted replay demo",
			"\nDeliverables (2): output/hello-maestro/README.md, output/hello-maestro/greet.txt.\n",
			"Cost: $0 (replay: no model was called) · 5 model call(s) · tokens in ",
		}},
		{"a run aborts", store.NewTask{Title: "Convert input/data.csv", Piece: "general", Payload: payload(t, abortScenario)}, store.StateAborted, []string{
			"The general run aborted: The input file is missing.\n",
			"\nDeliverables: none under output/.\n",
			"Cost: $0 (replay: no model was called) · 1 model call(s)",
		}},
		// The first attempt's failure is retried, without a comment.
		{"the last attempt fails", store.NewTask{Title: "Convert input/data.csv", Piece: "general", Payload: payload(t, shortScenario), MaxAttempts: 2}, store.StateFailed, []string{
			"The general run failed: ",
			"scenario has 1 frame",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := openSQLite(t, nil)
			stop := startPool(t, queue.Config{Store: st, Backoff: func(int) time.Duration { return 0 }, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{
				DataDir: t.TempDir(), Sandbox: sandboxtest.Off(t, sandbox.Config{}),
			})})
			task, job, err := st.CreateTask(t.Context(), tc.task)
			if err != nil {
				t.Fatal(err)
			}
			done := waitJob(t, st, job.ID, "its end", func(j store.Job) bool { return j.State.Terminal() })
			if done.State != tc.state || done.Attempt != max(tc.task.MaxAttempts, 1) {
				t.Fatalf("job ended %s at attempt %d (%s), want %s at its last attempt", done.State, done.Attempt, done.Error, tc.state)
			}
			if done.State == store.StateFailed {
				// Only the store knew that this failure ends the job: the
				// comment follows; the pool has posted it once it stops.
				stop()
			}
			comments, err := st.ListComments(t.Context(), task.ID, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(comments) != 1 || comments[0].AuthorKind != store.AuthorAgent {
				t.Fatalf("comments = %+v, want one agent comment", comments)
			}
			for _, want := range tc.want {
				if !strings.Contains(comments[0].Body, want) {
					t.Errorf("progress comment lacks %q:\n%s", want, comments[0].Body)
				}
			}
		})
	}
}
