package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/proctest"
)

// callJSON calls a tool of cs and decodes its structured result into out.
func callJSON(t *testing.T, ctx context.Context, cs *sdk.ClientSession, params *sdk.CallToolParams, out any) {
	t.Helper()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("%s: %v", params.Name, err)
	}
	if res.IsError {
		t.Fatalf("%s: error result %s", params.Name, mustJSON(t, res.Content))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: structured content %s: %v", params.Name, data, err)
	}
}

// checkMaestroTools checks that cs offers maestro mcp's tools.
func checkMaestroTools(t *testing.T, ctx context.Context, cs *sdk.ClientSession) {
	t.Helper()
	var tools []string
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tl.Name)
	}
	slices.Sort(tools)
	if want := []string{"answer_question", "list_pieces", "run_task", "task_result", "task_status"}; !slices.Equal(tools, want) {
		t.Errorf("tools = %v, want %v", tools, want)
	}
}

// `maestro mcp` driven by the official MCP client (go-sdk) through the
// built binary: it lists the pieces, runs the bundled replay piece demo
// with progress notifications, and reports its result (issue 20).
func TestMaestroMCPServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	home, ws := t.TempDir(), t.TempDir()
	cmd := exec.Command(binary, "mcp")
	cmd.Env, cmd.Dir = proctest.NoModelEnv(home), ws
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	var mu sync.Mutex
	var progress []string
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to maestro mcp: %v\n%s", err, stderr.String())
	}
	defer cs.Close()

	checkMaestroTools(t, ctx, cs)

	var pieces struct{ Pieces []mcp.PieceInfo }
	callJSON(t, ctx, cs, &sdk.CallToolParams{Name: "list_pieces", Arguments: map[string]any{}}, &pieces)
	if !slices.ContainsFunc(pieces.Pieces, func(p mcp.PieceInfo) bool { return p.Name == "general" && p.Description != "" }) {
		t.Errorf("list_pieces = %v, want the general piece", pieces.Pieces)
	}

	run := &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "say hello", "piece": "general", "workspace": ws}}
	run.SetProgressToken("run-1")
	var info mcp.TaskInfo
	callJSON(t, ctx, cs, run, &info)
	if info.Status != mcp.TaskSucceeded || !strings.Contains(info.Result, "replay demo") || info.SessionID == "" {
		t.Errorf("run_task = %+v, want the demo's result, succeeded, with its session\nstderr:\n%s", info, stderr.String())
	}
	mu.Lock()
	got := strings.Join(progress, "\n")
	mu.Unlock()
	if !strings.Contains(got, "movement execute") || !strings.Contains(got, "tool Write") {
		t.Errorf("progress notifications = %q, want the movements and tool calls", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "output", "hello-maestro", "greet.txt")); err != nil {
		t.Errorf("the demo's file is not in the workspace: %v", err)
	}

	var result mcp.TaskInfo
	callJSON(t, ctx, cs, &sdk.CallToolParams{Name: "task_result", Arguments: map[string]any{"task_id": info.TaskID}}, &result)
	if result.Status != mcp.TaskSucceeded || result.Result != info.Result {
		t.Errorf("task_result = %+v, want %+v", result, info)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "answer_question", Arguments: map[string]any{"task_id": info.TaskID, "answer": "x"}})
	if err != nil || !res.IsError {
		t.Errorf("answer_question on a finished task = %v, %v; want an error result", res, err)
	}
}

// A task that asks the user waits (waiting_human, its question as the
// result) until answer_question resumes it with the answer.
func TestMaestroMCPAnswerQuestion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	model := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "complete", Input: `{"status":"needs_user_input","result":"Whom shall I greet?"}`}}, InputTokens: 100, OutputTokens: 10},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "complete", Input: `{"status":"success","result":"Hello, Ada!"}`}}, InputTokens: 100, OutputTokens: 10},
	)
	home, ws := t.TempDir(), t.TempDir()
	writeFile(t, ws, ".maestro/pieces/greet.yaml", strings.Replace(greetPiece, "model: openai/greeter\n", "", 1))
	cmd := exec.Command(binary, "mcp")
	cmd.Env = append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+model.URL())
	cmd.Dir = ws
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to maestro mcp: %v\n%s", err, stderr.String())
	}
	defer cs.Close()

	var asked mcp.TaskInfo
	callJSON(t, ctx, cs, &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "greet someone", "piece": "greet"}}, &asked)
	if asked.Status != mcp.TaskWaitingHuman || asked.Result != "Whom shall I greet?" {
		t.Fatalf("run_task = %+v, want waiting_human with the question\nstderr:\n%s", asked, stderr.String())
	}
	var done mcp.TaskInfo
	callJSON(t, ctx, cs, &sdk.CallToolParams{Name: "answer_question", Arguments: map[string]any{"task_id": asked.TaskID, "answer": "Ada"}}, &done)
	if done.Status != mcp.TaskSucceeded || done.Result != "Hello, Ada!" || done.SessionID != asked.SessionID {
		t.Errorf("answer_question = %+v, want the run succeeded in the same session", done)
	}
	if reqs := model.Requests(); len(reqs) != 2 || !strings.Contains(toolResults(reqs[1]), "Ada") {
		t.Errorf("the resumed movement did not get the answer (%d model requests)", len(reqs))
	}
}
