package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
)

// writeFile writes data to dir/name (a slash-separated path, its
// directories created) and returns the file's path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runEvents reads the run events of every session log under home, in
// order, as {"kind": …, "event": {…}} objects.
func runEvents(t *testing.T, home string) []map[string]any {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(home, "sessions", "*", "events.jsonl"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no session log under %s (%v)", home, err)
	}
	var out []map[string]any
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Kind  string         `json:"kind"`
				Event map[string]any `json:"event"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Kind == "run_event" {
				out = append(out, rec.Event)
			}
		}
		f.Close()
	}
	return out
}

// A live model that answers a question in plain text, never calling
// complete, succeeds: after the reminders its answer is the result, the
// run's log says so, and a tool call it made counts (issue 15 item 1).
func TestPlainTextAnswerSucceeds(t *testing.T) {
	t.Parallel()
	const answer = "Hello! How can I help you today?"
	text := llmtest.Turn{Text: []string{answer}, InputTokens: 50, OutputTokens: 9}
	for _, tc := range []struct {
		name      string
		env       func(url string) []string
		turns     []llmtest.Turn
		local     bool // a local server: it lists the model it serves, and answers every request with its one turn
		toolCalls string
	}{
		{
			name: "openai-compatible, text only",
			env:  func(url string) []string { return []string{"OPENAI_BASE_URL=" + url + "/v1"} },
			// The classifier gets the text too (an unusable answer:
			// the fallback piece general).
			turns: []llmtest.Turn{text}, local: true, toolCalls: "0 tool call(s)",
		},
		{
			name: "anthropic, a tool call then text",
			env: func(url string) []string {
				return []string{"ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL=" + url}
			},
			turns: []llmtest.Turn{
				{Text: []string{`{"piece": "general", "reason": "a greeting"}`}, InputTokens: 400, OutputTokens: 12},
				{ToolCalls: []llmtest.ToolCall{{ID: "call_glob", Name: "Glob", Input: `{"pattern":"*"}`}}, InputTokens: 100, OutputTokens: 10},
				text, text, text,
			},
			toolCalls: "1 tool call(s)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t, tc.turns...)
			if tc.local {
				srv.Loop, srv.Models = true, []string{"small-local-model"}
			}
			home := t.TempDir()
			env := append(proctest.NoModelEnv(home), tc.env(srv.URL())...)
			out, stderr := runMaestroEnv(t, env, true, "run", "--workspace", t.TempDir(), "say hello")
			if strings.TrimSpace(out) != answer {
				t.Errorf("stdout = %q, want the answer %q\nstderr:\n%s", out, answer, stderr)
			}
			if !strings.Contains(stderr, tc.toolCalls) {
				t.Errorf("stderr lacks %q:\n%s", tc.toolCalls, stderr)
			}
			var done []map[string]any
			for _, ev := range runEvents(t, home) {
				if ev["kind"] == "complete" {
					done = append(done, ev)
				}
			}
			if len(done) != 1 {
				t.Fatalf("complete run events = %v, want one", done)
			}
			data, _ := done[0]["data"].(map[string]any)
			if data["status"] != "succeeded" || data["result"] != answer || !strings.Contains(data["reason"].(string), "text_answer: result") {
				t.Errorf("complete event = %v, want status succeeded, the answer as result and the text_answer reason", done[0])
			}
		})
	}
}

// A piece run on replay prints a resume hint only while its scenario
// scripts more turns; after the last one it says the replay ended, and
// --resume refuses up front in the same words (issue 15 item 3).
func TestPieceReplayResumeHint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	scenario := writeFile(t, dir, "two-runs.json", `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"two-runs","description":"a piece run and a follow-up",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["complete"]},
"frames":[{"index":0,"statements":[{"kind":"tool_call","tool":"complete","id":"c1","input":{"status":"success","result":"first answer"}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","id":"c2","input":{"status":"success","result":"second answer"}}]}]}`)
	hintRE := regexp.MustCompile(`continue with: maestro run --resume (\S+) "…"`)
	const ended = "the replay ended"

	out, stderr := runMaestro(t, home, true, "run", "--replay", scenario, "--piece", "chat", "--workspace", t.TempDir(), "hello")
	m := hintRE.FindStringSubmatch(stderr)
	if strings.TrimSpace(out) != "first answer" || m == nil || strings.Contains(stderr, ended) {
		t.Fatalf("first run: stdout %q, want the first answer and a resume hint:\n%s", out, stderr)
	}
	out, stderr = runMaestro(t, home, true, "run", "--resume", m[1], "tell me more")
	if strings.TrimSpace(out) != "second answer" {
		t.Errorf("follow-up run: stdout %q, want the scripted follow-up", out)
	}
	if hintRE.MatchString(stderr) || strings.Contains(stderr, "resume with") || !strings.Contains(stderr, ended) {
		t.Errorf("after the last scripted turn: want no resume hint and %q:\n%s", ended, stderr)
	}
	_, stderr = runMaestro(t, home, false, "run", "--resume", m[1], "and more")
	if !strings.Contains(stderr, ended) || strings.Contains(stderr, "frame") || hintRE.MatchString(stderr) || strings.Contains(stderr, "movement") {
		t.Errorf("resuming the ended replay: want %q up front, no scenario internals and no hint:\n%s", ended, stderr)
	}
}

// Without a model, --piece general plays the bundled piece demo (as a
// queued job does) and ends without a resume hint that cannot work;
// another piece is refused up front with a clear message (issue 15
// item 4).
func TestPieceWithoutModel(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	t.Run("general plays the piece demo", func(t *testing.T) {
		ws := t.TempDir()
		out, stderr := runMaestro(t, home, true, "run", "--piece", "general", "--workspace", ws, "show me what you can do")
		if !strings.Contains(out, "replay demo") {
			t.Errorf("stdout = %q, want the demo's result", out)
		}
		for _, want := range []string{"movement execute", "movement verify", "run succeeded", "the replay ended"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		if strings.Contains(stderr, "--resume") {
			t.Errorf("a resume hint after the demo ended:\n%s", stderr)
		}
		if _, err := os.Stat(filepath.Join(ws, "output", "hello-maestro", "greet.txt")); err != nil {
			t.Errorf("the piece demo did no real work: %v", err)
		}
	})
	t.Run("another piece is refused up front", func(t *testing.T) {
		ws := t.TempDir()
		out, stderr := runMaestro(t, home, false, "run", "--piece", "code", "--workspace", ws, "fix the tests")
		if out != "" || strings.Contains(stderr, "movement") {
			t.Errorf("the refused run started:\nstdout:\n%s\nstderr:\n%s", out, stderr)
		}
		for _, want := range []string{"no model is configured", "scripts only piece general", "--piece general", "configure a real model"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
	})
}

// pieces list and show mark the tools a piece names that this build
// lacks, and the research piece says it needs the web tools (issue 15
// item 7).
func TestPiecesMarkUnavailableTools(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	out, _ := runMaestro(t, home, true, "pieces", "list")
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(line, " "); ok {
			rows[name] = line
		}
	}
	if !strings.Contains(rows["NAME"], "MISSING TOOLS") {
		t.Errorf("no MISSING TOOLS column:\n%s", out)
	}
	for name, want := range map[string]string{
		"research": "ReadPdf",
		"code":     "verify  -  ",
	} {
		if !strings.Contains(rows[name], want) {
			t.Errorf("row %s lacks %q:\n%s", name, want, out)
		}
	}
	if strings.Contains(rows["general"], "WebSearch") {
		t.Errorf("general marks the web tools, which this build has:\n%s", out)
	}
	out, _ = runMaestro(t, home, true, "pieces", "show", "research")
	for _, want := range []string{
		"# Tools this build of Maestro lacks (left out when the piece runs):\n#   movement dig: ReadPdf\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pieces show research lacks %q:\n%s", want, out)
		}
	}
}

// greetPiece is a one-movement project piece whose movements run on the
// model it names.
const greetPiece = `name: greet
description: |
  Greet the user.
  Choose when: the user says hello. Do not choose when: anything else. Preconditions: none.
max_movements: 2
initial_movement: hello
model: openai/greeter
movements:
  - name: hello
    edit: false
    persona: You greet.
    instruction: Greet the user, then call complete.
    allowed_tools: []
    rules: []
`

// A piece's model runs its movements and config classifier_model picks
// the piece, each on its own provider; a piece naming a provider that is
// not configured fails with an error naming the piece, the model and the
// provider (issue 15 item 8).
func TestPieceModelAndClassifierModel(t *testing.T) {
	t.Parallel()
	newHome := func(t *testing.T, config string) (home, ws string) {
		home, ws = t.TempDir(), t.TempDir()
		writeFile(t, home, "config.yaml", config)
		writeFile(t, ws, ".maestro/pieces/greet.yaml", greetPiece)
		return home, ws
	}
	t.Run("each on its model", func(t *testing.T) {
		t.Parallel()
		runModel := llmtest.NewServer(t) // the run's model: never called
		other := llmtest.NewServer(t,
			llmtest.Turn{Text: []string{`{"piece": "greet", "reason": "a greeting"}`}, InputTokens: 300, OutputTokens: 10},
			llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "complete", Input: `{"status":"success","result":"Hi there!"}`}}, InputTokens: 200, OutputTokens: 10},
		)
		home, ws := newHome(t, "classifier_model: openai/classifier\n")
		env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+runModel.URL(), "OPENAI_BASE_URL="+other.URL()+"/v1")
		out, stderr := runMaestroEnv(t, env, true, "run", "--workspace", ws, "hello")
		if strings.TrimSpace(out) != "Hi there!" || !strings.Contains(stderr, "piece greet") {
			t.Errorf("stdout %q, want the greeting from piece greet:\n%s", out, stderr)
		}
		var models []any
		for _, r := range other.Requests() {
			models = append(models, r.JSON()["model"])
		}
		if len(runModel.Requests()) != 0 || len(models) != 2 || models[0] != "classifier" || models[1] != "greeter" {
			t.Errorf("the run's model got %d request(s), want 0; the other provider got models %v, want [classifier greeter]", len(runModel.Requests()), models)
		}
	})
	t.Run("a provider that is not configured", func(t *testing.T) {
		t.Parallel()
		runModel := llmtest.NewServer(t)
		home, ws := newHome(t, "")
		env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+runModel.URL())
		_, stderr := runMaestroEnv(t, env, false, "run", "--piece", "greet", "--workspace", ws, "hello")
		const want = `piece greet names model "openai/greeter": provider openai is not configured: set OPENAI_API_KEY or OPENAI_BASE_URL`
		if !strings.Contains(stderr, want) || len(runModel.Requests()) != 0 {
			t.Errorf("stderr lacks %q (or the run's model was called %d times):\n%s", want, len(runModel.Requests()), stderr)
		}
	})
}

// docsPiece names an MCP tool and requires its server.
const docsPiece = `name: docs
description: |
  Answer from the documentation server.
  Choose when: the user asks about the docs. Do not choose when: anything else. Preconditions: none.
max_movements: 2
initial_movement: look
required_mcp: [docs]
movements:
  - name: look
    edit: false
    persona: You read documentation.
    instruction: Search the docs, then call complete.
    allowed_tools: [Read, mcp__docs__search]
    rules: []
`

// pieces list and show mark an MCP tool whose server config.yaml does not
// configure, and a required server that is missing; once the server is
// configured, neither is marked (issue 15 item 7).
func TestPiecesMarkUnconfiguredMCP(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFile(t, ws, ".maestro/pieces/docs.yaml", docsPiece)
	for _, tc := range []struct {
		name, config string
		row          string // the MISSING TOOLS cell of docs
		show         []string
	}{
		{"not configured", "", "mcp__docs__search, required_mcp docs", []string{
			"# MCP tools no server in config.yaml's mcp_servers serves (left out when the piece runs):\n#   movement look: mcp__docs__search\n",
			"# required_mcp servers config.yaml does not configure (a run fails before it starts): docs\n",
		}},
		{"configured", "mcp_servers:\n  docs:\n    command: docs-server\n", "-", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			if tc.config != "" {
				writeFile(t, home, "config.yaml", tc.config)
			}
			runMaestro(t, home, true, "pieces", "trust", "--workspace", ws, "docs") // it grants MCP tools
			out, _ := runMaestro(t, home, true, "pieces", "list", "--workspace", ws)
			var row string
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "docs ") {
					row = line
				}
			}
			if !regexp.MustCompile(`\slook\s+` + regexp.QuoteMeta(tc.row) + `\s+Answer from`).MatchString(row) {
				t.Errorf("row docs: want MISSING TOOLS %q:\n%s", tc.row, out)
			}
			out, _ = runMaestro(t, home, true, "pieces", "show", "docs", "--workspace", ws)
			for _, want := range tc.show {
				if !strings.Contains(out, want) {
					t.Errorf("pieces show docs lacks %q:\n%s", want, out)
				}
			}
			if tc.show == nil && strings.Contains(out, "\n# ") {
				t.Errorf("pieces show docs marks something with its server configured:\n%s", out)
			}
		})
	}
}
