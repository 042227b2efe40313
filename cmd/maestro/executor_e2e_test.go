package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/store"
)

// The executor chosen at submit (issue 17, New task): POST /api/v1/tasks'
// executor reaches the queue runner of `maestro serve`, which runs the
// task on it, and the task list shows what ran it.

// postTask creates a task through the API and returns it.
func postTask(ctx context.Context, t *testing.T, url string, req api.CreateTaskRequest) api.CreateTaskResponse {
	t.Helper()
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, "POST", url+api.TasksPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 30 * time.Second}
	res, err := client.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out api.CreateTaskResponse
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: status %d, %v", api.TasksPath, res.StatusCode, err)
	}
	return out
}

// followJob follows the job's log with `maestro tasks logs -f --json`
// until it ends (the command exits 1 for a job that did not succeed) and
// returns its events.
func followJob(ctx context.Context, t *testing.T, env []string, url string, jobID int64) []store.JobEvent {
	t.Helper()
	out, errOut, err := tasksCLI(ctx, env, url, "--json", "logs", strconv.FormatInt(jobID, 10), "-f")
	if err != nil && !strings.Contains(errOut, "ended") {
		t.Fatalf("tasks logs -f: %v\n%s%s", err, out, errOut)
	}
	var evs []store.JobEvent
	for line := range strings.Lines(out) {
		var ev store.JobEvent
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type != "" {
			evs = append(evs, ev)
		}
	}
	return evs
}

// jobFacts is what a job's log says about what ran it.
type jobFacts struct {
	executor string   // the ready's executor_type
	agents   []string // the agent of each movement_started
	state    store.State
	err      string
}

func factsOf(evs []store.JobEvent) jobFacts {
	var f jobFacts
	for _, ev := range evs {
		var d struct {
			Type         string `json:"type"`
			ExecutorType string `json:"executor_type"`
			Kind         string `json:"kind"`
			State        string `json:"state"`
			Error        string `json:"error"`
			Data         struct {
				Agent string `json:"agent"`
			} `json:"data"`
		}
		json.Unmarshal(ev.Data, &d)
		switch {
		case ev.Type == store.JobEventProtocol && d.Type == "ready":
			f.executor = d.ExecutorType
		case ev.Type == store.JobEventRunEvent && d.Kind == "movement_started":
			f.agents = append(f.agents, d.Data.Agent)
		case ev.Type == store.JobEventStatus:
			f.state, f.err = store.State(d.State), d.Error
		}
	}
	return f
}

// listTask returns task id as `maestro tasks list --json` shows it.
func listTask(ctx context.Context, t *testing.T, env []string, url string, id int64) store.Task {
	t.Helper()
	out, errOut, err := tasksCLI(ctx, env, url, "--json", "list")
	if err != nil {
		t.Fatalf("tasks list: %v\n%s%s", err, out, errOut)
	}
	var list api.TaskList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("tasks list --json: %v\n%s", err, out)
	}
	for _, task := range list.Tasks {
		if task.ID == id {
			return task
		}
	}
	t.Fatalf("task %d not listed:\n%s", id, out)
	return store.Task{}
}

// On a server with a live model (a fake model server): executor replay
// plays the demo without a single model call, and the list says replay.
func TestExecutorReplayOverModelE2E(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	srv := llmtest.NewServer(t)
	srv.Models = []string{"local-x"}
	home := t.TempDir()
	env := append(proctest.NoModelEnv(home), "OPENAI_BASE_URL="+srv.URL()+"/v1", "OPENAI_API_KEY=sk-fake", "MAESTRO_MODEL=openai/local-x")
	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home)
	defer stop()

	var info api.ServerInfo
	getJSON(ctx, t, url+api.ServerPath, &info)
	if info.ExecutorDefault != "native" {
		t.Fatalf("executor_default %q, want native (a model is configured)\n%s", info.ExecutorDefault, stderr.String())
	}
	created := postTask(ctx, t, url, api.CreateTaskRequest{Title: "Write a greeting", Executor: api.ExecutorReplay})
	f := factsOf(followJob(ctx, t, env, url, created.Job.ID))
	if f.executor != "replay" || f.state != store.StateSucceeded {
		t.Errorf("job: executor %q state %s (%s), want replay succeeded\n%s", f.executor, f.state, f.err, stderr.String())
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the model server got %d requests, want 0 (replay)", n)
	}
	task := listTask(ctx, t, env, url, created.Task.ID)
	if task.JobExecutor != "replay" || !strings.HasPrefix(task.JobModel, "replay") || task.JobAttemptedAt.IsZero() || task.JobFinishedAt.IsZero() {
		t.Errorf("listed task: executor %q model %q attempted %v finished %v; want replay, replay/…, both times",
			task.JobExecutor, task.JobModel, task.JobAttemptedAt, task.JobFinishedAt)
	}
}

// On a replay-only server: executor native is refused by the runner
// (failed, not retried, naming the field), and executor agent-cli runs
// every movement of the piece on the named CLI (the fake adapter of
// internal/engine/testdata/agentmove), which GET /api/v1/server lists;
// with agent_session, the first movement resumes that CLI session.
func TestExecutorNativeAndAgentCLIE2E(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	home := t.TempDir()
	fakes, err := filepath.Abs(filepath.Join("..", "..", "internal", "engine", "testdata", "agentmove", "agents"))
	if err != nil {
		t.Fatal(err)
	}
	def, err := os.ReadFile(filepath.Join(fakes, "fake-move.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "agents", "fake-move.yaml"), def, 0o644); err != nil {
		t.Fatal(err)
	}
	env := proctest.NoModelEnv(home)
	for i, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + fakes + string(os.PathListSeparator) + p
		}
	}
	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home)
	defer stop()

	var info api.ServerInfo
	getJSON(ctx, t, url+api.ServerPath, &info)
	if info.ExecutorDefault != "replay" || !strings.Contains(","+strings.Join(info.Agents, ",")+",", ",fake-move,") {
		t.Fatalf("server: executor_default %q agents %v; want replay and fake-move listed", info.ExecutorDefault, info.Agents)
	}

	native := postTask(ctx, t, url, api.CreateTaskRequest{Title: "Needs a model", Executor: api.ExecutorNative})
	f := factsOf(followJob(ctx, t, env, url, native.Job.ID))
	if f.state != store.StateFailed || !strings.Contains(f.err, `"executor"`) || !strings.Contains(f.err, "native") {
		t.Errorf("native on a replay server: state %s error %q; want failed naming the executor", f.state, f.err)
	}

	agent := postTask(ctx, t, url, api.CreateTaskRequest{
		Title: "Greet", Body: "<reply>Hello from the CLI [STATUS: success]</reply>", Piece: "general",
		Executor: api.ExecutorAgentCLI, Agent: "fake-move",
	})
	f = factsOf(followJob(ctx, t, env, url, agent.Job.ID))
	if f.state != store.StateSucceeded || len(f.agents) == 0 {
		t.Fatalf("agent-cli job: state %s (%s), movements on %v; want succeeded\n%s", f.state, f.err, f.agents, stderr.String())
	}
	for _, a := range f.agents {
		if a != "fake-move" {
			t.Errorf("a movement ran on %q, want every one on fake-move (%v)", a, f.agents)
		}
	}
	task := listTask(ctx, t, env, url, agent.Task.ID)
	if task.JobAgent != "fake-move" || task.JobCostUSD <= 0 {
		t.Errorf("listed task: agent %q cost %v; want fake-move and the CLI's reported cost", task.JobAgent, task.JobCostUSD)
	}

	// Resume as a task (agent_session): the first movement resumes that
	// CLI session (the fake answers "(resumed) …" when given --resume).
	const stored = "33333333-4444-4555-8666-777777777777"
	resumed := postTask(ctx, t, url, api.CreateTaskRequest{
		Title: "Continue", Body: "<reply>Hello again [STATUS: success]</reply>", Piece: "general",
		Executor: api.ExecutorAgentCLI, Agent: "fake-move", AgentSession: stored,
	})
	evs := followJob(ctx, t, env, url, resumed.Job.ID)
	if f := factsOf(evs); f.state != store.StateSucceeded {
		t.Fatalf("resumed agent-cli job: state %s (%s); want succeeded\n%s", f.state, f.err, stderr.String())
	}
	// The fake answers "(resumed) …" only when given --resume; that it
	// resumed the session named is TestConfigResumeAgentSession's (engine).
	answered := false
	for _, ev := range evs {
		answered = answered || strings.Contains(string(ev.Data), "(resumed) Hello again")
	}
	if !answered {
		t.Errorf("the job did not resume CLI session %s: no \"(resumed)\" answer in its log", stored)
	}
}

// getJSON decodes the JSON answer of GET url into out.
func getJSON(ctx context.Context, t *testing.T, url string, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(out); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, %v", url, res.StatusCode, err)
	}
}
