package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// agentMoveCLIs are the real CLIs the integration test runs, each pointed
// at the fake model server (as in internal/agentcli's integration tier).
var agentMoveCLIs = []struct {
	id, bin string
	env     func(t *testing.T, home, url string) []string
}{
	{id: "claude-code", bin: "claude", env: func(_ *testing.T, _, url string) []string {
		return []string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=sk-fake"}
	}},
	{id: "codex", bin: "codex", env: func(t *testing.T, home, url string) []string {
		codexHome := filepath.Join(home, ".codex")
		if err := os.MkdirAll(codexHome, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n" +
			"[model_providers.fake]\nname = \"fake\"\nbase_url = \"" + url + "/v1\"\nenv_key = \"FAKE_API_KEY\"\nwire_api = \"responses\"\n" +
			"[analytics]\nenabled = false\n[features]\nplugins = false\napps = false\nremote_plugin = false\n"
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"CODEX_HOME=" + codexHome, "FAKE_API_KEY=sk-fake"}
	}},
}

// TestIntegrationAgentMovement runs a two-movement piece on real agent
// CLIs against the fake model server (127.0.0.1, isolated HOME): the first
// movement's result picks the second by its tag, the second ends the run.
func TestIntegrationAgentMovement(t *testing.T) {
	t.Parallel()
	for _, c := range agentMoveCLIs {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			testAgentMovementOn(t, c.id, proctest.AgentCLI(t, c.bin), c.env)
		})
	}
}

func testAgentMovementOn(t *testing.T, id, bin string, cliEnv func(t *testing.T, home, url string) []string) {
	main := llmtest.New(
		llmtest.Turn{Text: []string{"The notes are fine: apples, pears, plums.\n[NEXT:report]"}, InputTokens: 30, OutputTokens: 12},
		llmtest.Turn{Text: []string{"Report: three fruits, all spelt right.\n[STATUS:success]"}, InputTokens: 40, OutputTokens: 9},
	)
	// Calls that offer no tools (titles, summaries) get an auxiliary
	// answer so the main script stays in step.
	aux := llmtest.New(llmtest.Turn{Text: []string{"Aux answer"}, InputTokens: 1, OutputTokens: 1})
	aux.Loop = true
	mainH, auxH := main.Handler(), aux.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req map[string]any
		_ = json.Unmarshal(body, &req)
		if tools, _ := req["tools"].([]any); r.Method == http.MethodPost && len(tools) == 0 && !strings.Contains(r.URL.Path, "count_tokens") {
			auxH.ServeHTTP(w, r)
			return
		}
		mainH.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	root := fruitWorkspace(t)
	reg, err := agentcli.Load("")
	if err != nil {
		t.Fatal(err)
	}
	def, ok := reg.Get(id)
	if !ok {
		t.Fatalf("no %s adapter", id)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TMPDIR=" + filepath.Join(home, "tmp"), "NO_COLOR=1"},
		cliEnv(t, home, srv.URL)...)
	scen, err := replay.Load(filepath.Join("testdata", "agentmove", "complete.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := piece.Parse("cli-review.yaml", []byte(`name: cli-review
description: Review and report, both on one agent CLI.
max_movements: 4
initial_movement: review
movements:
  - name: review
    agent: `+id+`
    edit: false
    persona: You are a careful reviewer.
    instruction: Review notes.txt.
    allowed_tools: [Read]
    rules:
      - {condition: the notes are fine, next: report}
  - name: report
    agent: `+id+`
    edit: false
    persona: You write reports.
    instruction: Report the review's findings.
    allowed_tools: [Read]
    rules: []
`))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	e, err := New(Config{Provider: replay.New(scen), Workspace: root, RunDir: t.TempDir(), Sink: rec, Events: rec,
		Agents: AgentRunnerFunc(func(_ context.Context, agentID string) (*AgentCLI, error) {
			if agentID != id {
				return nil, fmt.Errorf("unexpected agent %q", agentID)
			}
			return &AgentCLI{Executor: &agentcli.Executor{Def: def, Path: bin, Env: env, MaxAttempts: 1}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Second)
	defer cancel()
	task := "Check the spelling in notes.txt."
	out, err := e.Start(ctx, p, task, StartOptions{RunID: "run_" + id})
	if err != nil {
		t.Fatalf("Start: %v (outcome %+v)", err, out)
	}
	if out.Status != StatusSucceeded || out.Result != "Report: three fruits, all spelt right." || out.Movements != 2 {
		t.Errorf("outcome %s %q after %d movements", out.Status, out.Result, out.Movements)
	}
	if out.Usage.InputTokens == 0 || out.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v: the CLI's usage was not accounted", out.Usage)
	}
	trs := all[Transition](rec)
	if len(trs) != 1 || trs[0].To != "report" || trs[0].Summary != "The notes are fine: apples, pears, plums." {
		t.Errorf("transitions %+v", trs)
	}
	reqs := main.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d main model calls, want 2", len(reqs))
	}
	// Movement 1's prompt: instruction, task, tags; movement 2 is briefed
	// with movement 1's output.
	for _, want := range []string{"Review notes.txt.", task, "[NEXT:report]"} {
		if !bytes.Contains(reqs[0].Body, []byte(want)) {
			t.Errorf("the first model call lacks %q", want)
		}
	}
	if !bytes.Contains(reqs[1].Body, []byte("Handoff from review")) || !bytes.Contains(reqs[1].Body, []byte("The notes are fine: apples, pears, plums.")) {
		t.Errorf("the second movement's model call lacks the handoff")
	}
	var chunks string
	rec.mu.Lock()
	for _, m := range rec.events {
		if c, ok := m.(protocol.ResponseChunk); ok && !c.IsThinking {
			chunks += c.Content
		}
	}
	rec.mu.Unlock()
	if !strings.Contains(chunks, "[NEXT:report]") || !strings.Contains(chunks, "[STATUS:success]") {
		t.Errorf("the CLI's text did not stream into the sink: %q", chunks)
	}
}
