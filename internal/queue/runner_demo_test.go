package queue_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/sandbox/sandboxtest"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
)

// jobRun is what a job's event log shows of its run.
type jobRun struct {
	ready     []protocol.Ready
	movements []string
	calls     []replay.CalledTool
	// messages are the protocol messages' types, runEvents the run
	// events' kinds, in order.
	messages  []string
	runEvents []engine.EventKind
	// cwd is the first session_info's.
	cwd string
	// echoes are the status lines that repeat a run event's description.
	echoes []string
}

func readJobRun(t *testing.T, st store.Store, jobID int64) jobRun {
	t.Helper()
	var out jobRun
	byID := map[string]int{}
	described := map[string]bool{}
	for _, e := range events(t, st, jobID) {
		switch e.Type {
		case store.JobEventRunEvent:
			var r engine.Record
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatalf("run_event %s: %v", e.Data, err)
			}
			out.runEvents = append(out.runEvents, r.Event.Kind())
			described[r.Event.Describe()] = true
			if ms, ok := r.Event.(engine.MovementStarted); ok {
				out.movements = append(out.movements, ms.Movement)
			}
			if ms, ok := r.Event.(*engine.MovementStarted); ok {
				out.movements = append(out.movements, ms.Movement)
			}
		case store.JobEventProtocol:
			m, err := protocol.DecodeServer(e.Data)
			if err != nil {
				t.Fatalf("protocol event %s: %v", e.Data, err)
			}
			out.messages = append(out.messages, m.MessageType())
			switch m := m.(type) {
			case protocol.Ready:
				out.ready = append(out.ready, m)
			case protocol.SessionInfo:
				if out.cwd == "" {
					out.cwd = m.Cwd
				}
			case protocol.Status:
				if described[m.Message] {
					out.echoes = append(out.echoes, m.Message)
				}
			case protocol.ToolCall:
				byID[m.CallID] = len(out.calls)
				out.calls = append(out.calls, replay.CalledTool{ID: m.CallID, Name: m.Tool, Input: m.Args, IsError: true})
			case protocol.ToolEnd:
				if i, ok := byID[m.CallID]; ok {
					out.calls[i].IsError = !m.Success
				}
			}
		}
	}
	return out
}

// waitEnd waits until job id has finished and fails the test unless it
// ended in state with want in its result (its error, unless it succeeded).
func waitEnd(t *testing.T, st store.Store, id int64, state store.State, want string) store.Job {
	t.Helper()
	done := waitJob(t, st, id, "finished", func(j store.Job) bool { return j.State.Terminal() })
	got := done.Result
	if done.State != store.StateSucceeded {
		got = done.Error
	}
	if done.State != state || !strings.Contains(got, want) {
		t.Fatalf("job ended %s with %q, want %s with %q", done.State, got, state, want)
	}
	return done
}

// TestEngineRunnerPlaysPieceDemoWithoutModel: with no model (no Provider),
// a queued task runs the general piece on the bundled piece demo to the
// end: the deliverable is written, the demo's assertions pass on the
// task's workspace and the calls the job's events show, and the job says
// first that it is a replay.
func TestEngineRunnerPlaysPieceDemoWithoutModel(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{
		DataDir: data, Sandbox: sandboxtest.Off(t, sandbox.Config{}),
	})})
	task, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "Say hello in five languages"})
	if err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, st, job.ID, "finished", func(j store.Job) bool { return j.State.Terminal() })
	if done.State != store.StateSucceeded {
		t.Fatalf("job ended %s: %s", done.State, done.Error)
	}
	for _, want := range []string{"replay demo", "ANTHROPIC_API_KEY", "MAESTRO_MODEL"} {
		if !strings.Contains(done.Result, want) {
			t.Errorf("result does not mention %q:\n%s", want, done.Result)
		}
	}
	if done.Movement != "verify" {
		t.Errorf("last movement %q, want verify", done.Movement)
	}
	run := readJobRun(t, st, job.ID)
	if len(run.ready) != 1 || run.ready[0].ExecutorType != protocol.ExecutorReplay || run.ready[0].Provider != replay.ProviderName || run.ready[0].Model != replay.Model {
		t.Errorf("ready events = %+v, want one badged replay", run.ready)
	}
	if !slices.Equal(run.movements, []string{"execute", "verify"}) {
		t.Errorf("movements = %v, want execute, verify", run.movements)
	}
	if len(run.echoes) > 0 {
		t.Errorf("the job log repeats run events as status lines: %q", run.echoes)
	}
	dir := queue.WorkDir(data, task.ID)
	rs := replay.DemoPiece().Check(os.DirFS(dir), run.calls)
	for _, r := range rs {
		if r.Status != replay.StatusPass {
			t.Errorf("demo assertion %s: %s: %s", r.ID, r.Status, r.Message)
		}
	}
	if replay.OutcomeOf(rs) != replay.OutcomePass {
		t.Errorf("demo outcome %s; calls %+v", replay.OutcomeOf(rs), run.calls)
	}
}

// agentPiece runs its first movement on the fake agent CLI fake-move and
// its second on the model.
const agentPiece = `name: agent-then-model
description: A review on an agent CLI, then Maestro's own loop.
max_movements: 4
initial_movement: review
movements:
  - name: review
    agent: fake-move
    edit: false
    persona: You are a careful reviewer.
    instruction: Review the task.
    allowed_tools: [Read]
    rules:
      - condition: the review is done
        next: finish
    default_next: ABORT
  - name: finish
    edit: false
    persona: You report.
    instruction: Report the review's outcome.
    allowed_tools: [Read]
    rules: []
`

const finishScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"finish","description":"complete at once",
"metadata":{"recordedAt":"2026-11-25T00:00:00Z","toolsExpected":["complete"]},
"frames":[{"index":0,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"Reviewed."}}]}]}`

// TestEngineRunnerAgentMovement: EngineRunnerConfig.Agents reaches the
// engine, so a queued piece with an `agent:` movement runs it on the CLI
// (the fake CLI of the engine's tests, speaking Claude Code's stream-json)
// and goes on to the next movement; without Agents the job fails, saying
// so, and is not retried.
func TestEngineRunnerAgentMovement(t *testing.T) {
	t.Parallel()
	agents, err := filepath.Abs(filepath.Join("..", "engine", "testdata", "agentmove", "agents"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := agentcli.Load(agents)
	if err != nil {
		t.Fatalf("load the fake adapter: %v", err)
	}
	pieces := t.TempDir()
	if err := os.WriteFile(filepath.Join(pieces, "agent-then-model.yaml"), []byte(agentPiece), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := func(ctx context.Context) (*engine.Library, error) {
		return engine.NewLibrary(ctx, []string{pieces}, "")
	}
	path := agents + string(os.PathListSeparator) + os.Getenv("PATH")
	env := append(os.Environ(), "PATH="+path)

	tests := []struct {
		name   string
		agents engine.AgentRunner
		state  store.State
		want   string
	}{
		{"with agents", engine.RegistryAgents(reg, path, env, ""), store.StateSucceeded, "Reviewed."},
		{"without agents", nil, store.StateFailed, "no agent runner is configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openSQLite(t, nil)
			startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{
				DataDir: t.TempDir(), Pieces: lib, Agents: tt.agents,
			})})
			_, job, err := st.CreateTask(t.Context(), store.NewTask{
				Title: "Review", Body: "<reply>The notes are fine. [NEXT:finish]</reply>",
				Piece: "agent-then-model", Payload: payload(t, finishScenario),
			})
			if err != nil {
				t.Fatal(err)
			}
			done := waitEnd(t, st, job.ID, tt.state, tt.want)
			if tt.state == store.StateFailed && done.Attempt != 1 {
				t.Errorf("a missing agent runner was retried: attempt %d", done.Attempt)
			}
			if tt.state == store.StateSucceeded {
				if run := readJobRun(t, st, job.ID); !slices.Equal(run.movements, []string{"review", "finish"}) {
					t.Errorf("movements = %v, want review (agent CLI), finish", run.movements)
				}
			}
		})
	}
}

// readInputScenario reads the uploaded file first thing and fails the
// frame if it is not there.
const readInputScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"read-input","description":"read the upload",
"metadata":{"recordedAt":"2026-11-25T00:00:00Z","toolsExpected":["Read","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Read","input":{"path":"input/docs/report.txt"},"expectedResult":"success"}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"Read it."}}]}
]}`

// TestEngineRunnerMovesStagedInput: files staged with the task's creation
// (payload input_staging) are in input/ before the run's first step, and
// the staging directory is gone; a malformed key fails the job at once.
func TestEngineRunnerMovesStagedInput(t *testing.T) {
	t.Parallel()
	const key = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name  string
		key   string
		state store.State
		want  string
	}{
		{"staged files land in input/", key, store.StateSucceeded, "Read it."},
		{"already moved (an earlier attempt)", "fedcba9876543210fedcba9876543210", store.StateFailed, "expected to end with success"},
		{"malformed key", "../../etc", store.StateFailed, `"input_staging": expected 32 lowercase hex digits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openSQLite(t, nil)
			data := t.TempDir()
			staged := staging.Dir(data, key)
			if err := os.MkdirAll(filepath.Join(staged, "docs"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(staged, "docs", "report.txt"), []byte("figures\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			raw := payloadWith(t, map[string]any{"replay": json.RawMessage(readInputScenario), staging.PayloadField: tt.key})
			startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data})})
			task, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "Read the report", Piece: "general", Payload: raw, MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			waitEnd(t, st, job.ID, tt.state, tt.want)
			if tt.key != key {
				return
			}
			in := filepath.Join(queue.WorkDir(data, task.ID), "input", "docs", "report.txt")
			if b, err := os.ReadFile(in); err != nil || string(b) != "figures\n" {
				t.Errorf("input/docs/report.txt = %q, %v", b, err)
			}
			if _, err := os.Stat(staged); !os.IsNotExist(err) {
				t.Errorf("staging directory still there: %v", err)
			}
		})
	}
}

// TestEngineRunnerPlainLoop: a job with payload no_piece runs its task in
// the plain agent loop, as `maestro run --no-piece` does: the bundled demo
// plays to the end, its assertions pass on the job's work/, the job's log
// holds ready (badged replay), session_info for work/ and then the loop's
// protocol messages and no run event; the result is the model's last
// text. A job that names a piece and no_piece fails without a retry.
func TestEngineRunnerPlainLoop(t *testing.T) {
	t.Parallel()
	// The bundled replay demo (the one `maestro run` plays with no model)
	// as scenario text, in the plain agent loop.
	plainPayload := payloadWith(t, map[string]any{"replay": string(replay.DemoSource()), "no_piece": true})
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{
		DataDir: data, Sandbox: sandboxtest.Off(t, sandbox.Config{}),
	})})
	task, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "Show me what you can do", Payload: plainPayload})
	if err != nil {
		t.Fatal(err)
	}
	waitEnd(t, st, job.ID, store.StateSucceeded, "replay")
	run := readJobRun(t, st, job.ID)
	types := run.messages
	if len(types) < 3 || types[0] != protocol.TypeReady || types[1] != protocol.TypeSessionInfo || types[2] != protocol.TypeResponseStart ||
		types[len(types)-1] != protocol.TypeResponseEnd || len(run.runEvents) != 0 {
		t.Errorf("protocol messages = %v, run events %v; want ready, session_info, response_start … response_end and no run event", types, run.runEvents)
	}
	if run.cwd != queue.WorkDir(data, task.ID) {
		t.Errorf("session_info cwd %q, want the job's work/ %q", run.cwd, queue.WorkDir(data, task.ID))
	}
	if len(run.ready) != 1 || run.ready[0].ExecutorType != protocol.ExecutorReplay {
		t.Errorf("ready events = %+v, want one badged replay", run.ready)
	}
	rs := replay.Demo().Check(os.DirFS(queue.WorkDir(data, task.ID)), run.calls)
	if replay.OutcomeOf(rs) != replay.OutcomePass {
		t.Errorf("demo outcome %s: %+v; calls %+v", replay.OutcomeOf(rs), rs, run.calls)
	}

	_, both, err := st.CreateTask(t.Context(), store.NewTask{Title: "Show me", Piece: "general", Payload: plainPayload})
	if err != nil {
		t.Fatal(err)
	}
	if failed := waitEnd(t, st, both.ID, store.StateFailed, `"no_piece"`); failed.Attempt != 1 {
		t.Errorf("a job with a piece and no_piece was retried: attempt %d", failed.Attempt)
	}
}

// A no_piece job without a scenario of its own plays the plain demo (the
// one `maestro run` plays with no model): with no model configured (a nil
// Provider) and with executor replay. Before, it played the piece demo,
// written for the general piece, which failed in the plain loop once its
// frames were played ("the model was called for frame 5 but the scenario
// has 5 frames").
func TestEngineRunnerPlainLoopPlaysThePlainDemo(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{
		DataDir: data, Sandbox: sandboxtest.Off(t, sandbox.Config{}),
	})})
	for _, pl := range []map[string]any{{"no_piece": true}, {"no_piece": true, "executor": "replay"}} {
		task, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "Show me what you can do", Payload: payloadWith(t, pl)})
		if err != nil {
			t.Fatal(err)
		}
		waitEnd(t, st, job.ID, store.StateSucceeded, "replay")
		run := readJobRun(t, st, job.ID)
		if rs := replay.Demo().Check(os.DirFS(queue.WorkDir(data, task.ID)), run.calls); replay.OutcomeOf(rs) != replay.OutcomePass {
			t.Errorf("payload %v: demo outcome %s: %+v; calls %+v", pl, replay.OutcomeOf(rs), rs, run.calls)
		}
	}
}
