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
}

func readJobRun(t *testing.T, st store.Store, jobID int64) jobRun {
	t.Helper()
	var out jobRun
	byID := map[string]int{}
	for _, e := range events(t, st, jobID) {
		switch e.Type {
		case store.JobEventRunEvent:
			var r engine.Record
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatalf("run_event %s: %v", e.Data, err)
			}
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
			switch m := m.(type) {
			case protocol.Ready:
				out.ready = append(out.ready, m)
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
			done := waitJob(t, st, job.ID, "finished", func(j store.Job) bool { return j.State.Terminal() })
			got := done.Result
			if done.State != store.StateSucceeded {
				got = done.Error
			}
			if done.State != tt.state || !strings.Contains(got, tt.want) {
				t.Fatalf("job ended %s with %q, want %s with %q", done.State, got, tt.state, tt.want)
			}
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
			var pl map[string]any
			json.Unmarshal(payload(t, readInputScenario), &pl)
			pl[staging.PayloadField] = tt.key
			raw, _ := json.Marshal(pl)
			startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data})})
			task, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "Read the report", Piece: "general", Payload: raw, MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			done := waitJob(t, st, job.ID, "finished", func(j store.Job) bool { return j.State.Terminal() })
			got := done.Result
			if done.State != store.StateSucceeded {
				got = done.Error
			}
			if done.State != tt.state || !strings.Contains(got, tt.want) {
				t.Fatalf("job ended %s with %q, want %s with %q", done.State, got, tt.state, tt.want)
			}
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

// plainPayload is a job payload that plays the bundled replay demo (the
// one `maestro run` plays with no model) in the plain agent loop.
func plainPayload(t *testing.T) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(map[string]any{"replay": string(replay.DemoSource()), "no_piece": true})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestEngineRunnerPlainLoop: a job with payload no_piece runs its task in
// the plain agent loop, as `maestro run --no-piece` does: the bundled demo
// plays to the end, its assertions pass on the job's work/, the job's log
// holds ready (badged replay), session_info for work/ and then the loop's
// protocol messages and no run event; the result is the model's last
// text. A job that names a piece and no_piece fails without a retry.
func TestEngineRunnerPlainLoop(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{
		DataDir: data, Sandbox: sandboxtest.Off(t, sandbox.Config{}),
	})})
	task, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "Show me what you can do", Payload: plainPayload(t)})
	if err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, st, job.ID, "finished", func(j store.Job) bool { return j.State.Terminal() })
	if done.State != store.StateSucceeded || !strings.Contains(done.Result, "replay") {
		t.Fatalf("job ended %s: %q %s", done.State, done.Result, done.Error)
	}
	var types []string
	for _, e := range events(t, st, job.ID) {
		switch e.Type {
		case store.JobEventRunEvent:
			t.Errorf("a plain run logged a run event: %s", e.Data)
		case store.JobEventProtocol:
			m, err := protocol.DecodeServer(e.Data)
			if err != nil {
				t.Fatalf("protocol event %s: %v", e.Data, err)
			}
			types = append(types, m.MessageType())
			if si, ok := m.(protocol.SessionInfo); ok && si.Cwd != queue.WorkDir(data, task.ID) {
				t.Errorf("session_info cwd %q, want the job's work/ %q", si.Cwd, queue.WorkDir(data, task.ID))
			}
		}
	}
	if len(types) < 3 || types[0] != protocol.TypeReady || types[1] != protocol.TypeSessionInfo || types[2] != protocol.TypeResponseStart ||
		types[len(types)-1] != protocol.TypeResponseEnd {
		t.Errorf("protocol messages = %v, want ready, session_info, response_start … response_end", types)
	}
	run := readJobRun(t, st, job.ID)
	if len(run.ready) != 1 || run.ready[0].ExecutorType != protocol.ExecutorReplay {
		t.Errorf("ready events = %+v, want one badged replay", run.ready)
	}
	rs := replay.Demo().Check(os.DirFS(queue.WorkDir(data, task.ID)), run.calls)
	if replay.OutcomeOf(rs) != replay.OutcomePass {
		t.Errorf("demo outcome %s: %+v; calls %+v", replay.OutcomeOf(rs), rs, run.calls)
	}

	_, both, err := st.CreateTask(t.Context(), store.NewTask{Title: "Show me", Piece: "general", Payload: plainPayload(t)})
	if err != nil {
		t.Fatal(err)
	}
	failed := waitJob(t, st, both.ID, "failed", func(j store.Job) bool { return j.State.Terminal() })
	if failed.State != store.StateFailed || failed.Attempt != 1 || !strings.Contains(failed.Error, `"no_piece"`) {
		t.Errorf("piece and no_piece: %s after %d attempt(s): %s", failed.State, failed.Attempt, failed.Error)
	}
}
