package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/sandbox/sandboxtest"
)

// validator checks every emitted frame against the protocol's JSON
// Schemas; building it is slow, so it is built once.
var validator = sync.OnceValues(protocol.NewValidator)

// result is what one CLI invocation produced.
type result struct {
	code           int
	stdout, stderr string
	home           string
}

// frames decodes stdout as JSON lines.
func (r result) frames(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", line, err)
		}
		v, err := validator()
		if err != nil {
			t.Fatal(err)
		}
		if err := v.ValidateServerFrame([]byte(line)); err != nil {
			t.Errorf("frame does not validate against the protocol schemas: %s: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func (r result) ofType(t *testing.T, typ string) []map[string]any {
	var out []map[string]any
	for _, f := range r.frames(t) {
		if f["type"] == typ {
			out = append(out, f)
		}
	}
	return out
}

// runCLI runs maestro in-process with an isolated MAESTRO_HOME and only
// the given environment.
func runCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	home := env["MAESTRO_HOME"]
	if home == "" {
		home = t.TempDir()
	}
	getenv := func(k string) string {
		if k == "MAESTRO_HOME" {
			return home
		}
		return env[k]
	}
	var stdout, stderr bytes.Buffer
	ios := &IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr, Getenv: getenv}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	code := Run(ctx, ios, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String(), home: home}
}

// writeThenBash is the multi-turn task of the acceptance criteria: Write a
// file, run a command on it, then answer.
func writeThenBash() []llmtest.Turn {
	return []llmtest.Turn{
		{Text: []string{"I'll write the file."}, ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "Write", Input: `{"path":"notes/hello.txt","content":"hello\nworld\n"}`}},
			InputTokens: 1200, OutputTokens: 60, CacheReadTokens: 300},
		{Text: []string{"Now ", "count its lines."}, ToolCalls: []llmtest.ToolCall{{ID: "call_b", Name: "Bash", Input: `{"command":"wc -l notes/hello.txt"}`}},
			InputTokens: 1400, OutputTokens: 40},
		{Text: []string{"The file has ", "2 lines."}, InputTokens: 1500, OutputTokens: 20},
	}
}

// checkMultiTurn asserts the task ran for real and was reported fully.
func checkMultiTurn(t *testing.T, r result, ws string, wantCost bool) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr: %s\nstdout: %s", r.code, r.stderr, r.stdout)
	}
	data, err := os.ReadFile(filepath.Join(ws, "notes/hello.txt"))
	if err != nil || string(data) != "hello\nworld\n" {
		t.Fatalf("file not written: %q %v", data, err)
	}
	var bashOut strings.Builder
	for _, f := range r.ofType(t, "tool_output") {
		if f["call_id"] == "call_b" {
			bashOut.WriteString(f["content"].(string))
		}
	}
	if !strings.Contains(bashOut.String(), "2 notes/hello.txt") {
		t.Errorf("Bash output = %q, want the line count", bashOut.String())
	}
	ends := r.ofType(t, "tool_end")
	if len(ends) != 2 || ends[0]["success"] != true || ends[1]["success"] != true {
		t.Errorf("tool_end frames = %v", ends)
	}
	resp := r.ofType(t, "response_end")
	if len(resp) != 3 {
		t.Fatalf("response_end frames = %d, want 3", len(resp))
	}
	usage := resp[0]["usage"].(map[string]any)
	if usage["input_tokens"].(float64) != 1200 || usage["output_tokens"].(float64) != 60 || usage["cache_read_tokens"].(float64) != 300 ||
		usage["total_tokens"].(float64) != 1560 {
		t.Errorf("usage = %v", usage)
	}
	if cost := usage["total_cost_usd"].(float64); (cost > 0) != wantCost {
		t.Errorf("total_cost_usd = %v, want cost>0 = %v", cost, wantCost)
	}
	summary := resp[2]["tools_summary"].(map[string]any)
	if summary["calls_succeeded"].(float64) != 2 || len(summary["tools_used"].([]any)) != 2 {
		t.Errorf("final tools_summary = %v", summary)
	}
	ready := r.ofType(t, "ready")
	if len(ready) != 1 || ready[0]["executor_type"] != "live" {
		t.Errorf("ready = %v", ready)
	}
}

// runMultiTurn runs `maestro run --no-piece --model model` with jsonl
// output (asked for by outputFlag, -o or --output) in a fresh workspace,
// against a server scripted with writeThenBash and the environment env
// makes from the server's URL, and checks the run with checkMultiTurn.
func runMultiTurn(t *testing.T, model, outputFlag string, wantCost bool, env func(url string) map[string]string) (*llmtest.Server, result) {
	t.Helper()
	sandboxtest.Bwrap(t, sandbox.Config{Mode: sandbox.ModeAuto})
	srv := llmtest.NewServer(t, writeThenBash()...)
	ws := t.TempDir()
	r := runCLI(t, env(srv.URL()), "run", "--no-piece", "--model", model, "--workspace", ws, outputFlag, "jsonl", "write notes and count lines")
	checkMultiTurn(t, r, ws, wantCost)
	return srv, r
}

func TestRunAnthropicMultiTurn(t *testing.T) {
	t.Parallel()
	srv, _ := runMultiTurn(t, "anthropic/claude-sonnet-4-5", "--output", true, func(url string) map[string]string {
		return map[string]string{"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": url}
	})
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Header.Get("X-Api-Key") != "sk-test" {
		t.Fatalf("requests = %d, api key header %q", len(reqs), reqs[0].Header.Get("X-Api-Key"))
	}
	// The third request carries the Bash result back to the model.
	if !strings.Contains(string(reqs[2].Body), `"tool_use_id":"call_b"`) {
		t.Errorf("third request lacks the Bash tool_result: %s", reqs[2].Body)
	}
}

func TestRunOpenAICompatibleNoKey(t *testing.T) {
	t.Parallel()
	srv, r := runMultiTurn(t, "openai/llama3.2", "-o", false, func(url string) map[string]string {
		return map[string]string{"OPENAI_BASE_URL": url + "/v1"}
	})
	for i, req := range srv.Requests() {
		if req.Path != "/v1/chat/completions" {
			t.Errorf("request %d went to %s, want Chat Completions for a local server", i, req.Path)
		}
		if h := req.Header.Get("Authorization"); h != "" {
			t.Errorf("request %d sent Authorization %q without a key", i, h)
		}
	}
	// An unpriced local model: cost 0, flagged once.
	var flagged int
	for _, f := range r.ofType(t, "status") {
		if strings.Contains(f["message"].(string), "Pricing unknown for model llama3.2") {
			flagged++
		}
	}
	if flagged != 1 {
		t.Errorf("pricing-unknown status frames = %d, want 1", flagged)
	}
}

func TestRunOpenAIResponsesWithKey(t *testing.T) {
	t.Parallel()
	srv, _ := runMultiTurn(t, "openai/gpt-5", "-o", true, func(url string) map[string]string {
		return map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": url + "/v1", "MAESTRO_OPENAI_API": "responses"}
	})
	if p := srv.Requests()[0].Path; p != "/v1/responses" {
		t.Errorf("path = %s", p)
	}
}

func TestRunProviderErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		turns      []llmtest.Turn
		models     []string
		model      string
		wantCode   int
		wantStderr []string
		wantError  string // error_type of the error frame, "" for none
	}{
		{
			name:       "401 names the variable",
			turns:      []llmtest.Turn{{Status: 401, ErrorMessage: "invalid x-api-key"}},
			model:      "anthropic/claude-sonnet-4-5",
			wantCode:   1,
			wantStderr: []string{"auth", "ANTHROPIC_API_KEY"},
			wantError:  "fatal",
		},
		{
			name:     "429 is retried then succeeds",
			turns:    []llmtest.Turn{{Status: 429, ErrorMessage: "slow down", RetryAfter: "0.05"}, {Text: []string{"fine"}, InputTokens: 10, OutputTokens: 2}},
			model:    "anthropic/claude-sonnet-4-5",
			wantCode: 0,
		},
		{
			name:      "stream cut mid-way is transient",
			turns:     []llmtest.Turn{{Text: []string{"a", "b", "c", "d", "e", "f"}, CutAfter: 4}},
			model:     "anthropic/claude-sonnet-4-5",
			wantCode:  1,
			wantError: "transient",
		},
		{
			name:       "unknown model lists what is available",
			turns:      []llmtest.Turn{{Text: []string{"never"}}},
			models:     []string{"claude-sonnet-4-5", "claude-haiku-4-5"},
			model:      "anthropic/claude-nonexistent-9",
			wantCode:   1,
			wantStderr: []string{`unknown model "claude-nonexistent-9" for anthropic; available: claude-haiku-4-5, claude-sonnet-4-5`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t, tc.turns...)
			srv.Models = tc.models
			r := runCLI(t, map[string]string{"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.URL()},
				"run", "--no-piece", "--model", tc.model, "--workspace", t.TempDir(), "--sandbox", "off", "-o", "jsonl", "hi")
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstderr: %s", r.code, tc.wantCode, r.stderr)
			}
			for _, s := range tc.wantStderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			if tc.wantCode != 0 && strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("the failure reason is not one line:\n%s", r.stderr)
			}
			errs := r.ofType(t, "error")
			if tc.wantError == "" {
				if tc.wantCode == 0 && len(errs) != 0 {
					t.Errorf("unexpected error frames: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0]["error_type"] != tc.wantError || errs[0]["fatal"] != false {
				t.Errorf("error frames = %v, want one with error_type %q", errs, tc.wantError)
			}
		})
	}
}

func TestRunRetryReportsStatus(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.Turn{Status: 529, ErrorMessage: "Overloaded", RetryAfter: "0.01"}, llmtest.Turn{Text: []string{"ok"}})
	r := runCLI(t, map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": srv.URL()},
		"run", "--no-piece", "--model", "anthropic/claude-sonnet-4-5", "--workspace", t.TempDir(), "--sandbox", "off", "-o", "jsonl", "hi")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	st := r.ofType(t, "status")
	if len(st) != 1 || !strings.Contains(st[0]["message"].(string), "retrying in") || !strings.Contains(st[0]["message"].(string), "529") {
		t.Errorf("status = %v", st)
	}
}

func TestRunDemoWithoutKeys(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	r := runCLI(t, nil, "run", "--workspace", ws, "show me")
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	for _, want := range []string{"No model configured", "▶ REPLAY", "ANTHROPIC_API_KEY"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "scripted replay") {
		t.Errorf("stdout does not say it is a replay:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(ws, "hello-maestro", "greet.txt")); err != nil {
		t.Errorf("demo did no real work: %v", err)
	}
	if !strings.Contains(r.stderr, "$0 (replay)") || !strings.Contains(r.stderr, "session ") {
		t.Errorf("usage or session line missing:\n%s", r.stderr)
	}
}

func TestRunResumeContinuesHistory(t *testing.T) {
	t.Parallel()
	scenario := filepath.Join(t.TempDir(), "two.json")
	os.WriteFile(scenario, []byte(`{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"two","description":"two answers",
"metadata":{"recordedAt":"2026-11-22T00:00:00Z","toolsExpected":[]},
"frames":[{"index":0,"statements":[{"kind":"text","text":"first answer"}]},{"index":1,"statements":[{"kind":"text","text":"second answer"}]}]}`), 0o600)
	home := t.TempDir()
	ws := t.TempDir()
	r1 := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "run", "--replay", scenario, "--workspace", ws, "-o", "jsonl", "one")
	if r1.code != 0 || !strings.Contains(r1.stdout, "first answer") {
		t.Fatalf("first run: exit %d\n%s\n%s", r1.code, r1.stdout, r1.stderr)
	}
	id := r1.ofType(t, "ready")[0]["session_id"].(string)
	r2 := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "run", "--resume", id[:13], "-o", "jsonl", "two")
	if r2.code != 0 || !strings.Contains(r2.stdout, "second answer") {
		t.Fatalf("resumed run: exit %d\n%s\n%s", r2.code, r2.stdout, r2.stderr)
	}
	if got := r2.ofType(t, "session_info")[0]["cwd"]; got != ws {
		t.Errorf("resumed workspace = %v, want %s", got, ws)
	}
	// A third turn runs past the script: a clear error, non-zero exit.
	r3 := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "run", "--resume", id, "three")
	if r3.code != 1 || !strings.Contains(r3.stderr, "scripted scenario two complete") {
		t.Errorf("past the script: exit %d\n%s", r3.code, r3.stderr)
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "requires at least 1 arg"},
		{[]string{"run", "-o", "xml", "x"}, `--output "xml": expected text or jsonl`},
		{[]string{"run", "--workspace", "/nonexistent/dir", "x"}, "/nonexistent/dir"},
		{[]string{"run", "--sandbox", "sometimes", "x"}, "--sandbox"},
		{[]string{"run", "--thinking", "lots", "x"}, "--thinking"},
		{[]string{"run", "--model", "mystery/m1", "x"}, `--model: unknown provider "mystery" in "mystery/m1"; expected one of anthropic, openai, replay`},
		{[]string{"run", "--model", "anthropic/claude-sonnet-4-5", "x"}, "ANTHROPIC_API_KEY"},
		{[]string{"run", "--replay", "/nonexistent.json", "x"}, "load replay scenario"},
		{[]string{"run", "--resume", "0123456789", "x"}, "session not found"},
		{[]string{"frobnicate"}, "unknown command"},
		// 0 ran the default 50 model calls (the demo, exit 0).
		{[]string{"run", "--max-iterations", "0", "--workspace", t.TempDir(), "x"}, "--max-iterations must be positive, got 0"},
	}
	for _, tc := range cases {
		r := runCLI(t, nil, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want containing %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "maestro ") || !strings.Contains(r.stdout, "2026-04-02") {
		t.Errorf("version: %d %q", r.code, r.stdout)
	}
}

// TestRunRefusesWorkspaceHoldingHome: `maestro run` started in the home
// directory makes ~/.maestro part of the workspace. The file tools run
// outside the sandbox, so a prompt-injected model could Read the model keys
// in config.yaml (or rewrite session logs): the run is refused before any
// tool runs, with a message saying what to do.
func TestRunRefusesWorkspaceHoldingHome(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	home := filepath.Join(ws, ".maestro")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("providers:\n  anthropic:\n    api_key: sk-TOP-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(t.TempDir(), "read.json")
	os.WriteFile(scenario, []byte(`{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"rd","description":"read the keys",
"metadata":{"recordedAt":"2026-11-22T00:00:00Z","toolsExpected":["Read"]},
"frames":[{"index":0,"statements":[{"kind":"tool_call","tool":"Read","input":{"path":".maestro/config.yaml"}}]},{"index":1,"statements":[{"kind":"end","reason":"complete"}]}]}`), 0o600)
	for _, dir := range []string{ws, home} {
		r := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "run", "--replay", scenario, "--no-piece", "--workspace", dir, "-o", "jsonl", "go")
		leaked := strings.Contains(r.stdout, "sk-TOP-SECRET")
		filepath.WalkDir(filepath.Join(home, "sessions"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), "sk-TOP-SECRET") {
					leaked = true
				}
			}
			return nil
		})
		if leaked {
			t.Errorf("workspace %s: the model read Maestro's config.yaml", dir)
		}
		if r.code == 0 || !strings.Contains(r.stderr, "MAESTRO_HOME") {
			t.Errorf("workspace %s: exit %d, stderr %q; want a refusal naming MAESTRO_HOME", dir, r.code, r.stderr)
		}
	}
}

// Every command of the local terminal teaches in its --help: what it
// does (Long), and at least one example to copy.
func TestHelpTeaches(t *testing.T) {
	t.Parallel()
	root := NewRoot(&IOStreams{In: strings.NewReader(""), Out: new(bytes.Buffer), ErrOut: new(bytes.Buffer), Getenv: func(string) string { return "" }})
	for _, path := range [][]string{
		{"run"}, {"version"},
		{"pieces"}, {"pieces", "list"}, {"pieces", "show"}, {"pieces", "validate"},
		{"agents"}, {"agents", "list"}, {"agents", "show"}, {"agents", "parse"},
		{"sessions"}, {"sessions", "list"}, {"sessions", "show"},
	} {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.Name() != path[len(path)-1] {
			t.Errorf("maestro %s: not found: %v", strings.Join(path, " "), err)
			continue
		}
		if cmd.Long == "" || cmd.Example == "" {
			t.Errorf("maestro %s --help: Long %t, Example %t; want both", strings.Join(path, " "), cmd.Long != "", cmd.Example != "")
		}
	}
}

// run --help says what SIGTERM does and that it exits 130 as Ctrl-C does
// (one status for an interrupted run, whichever signal, as docs/api.md has
// it for tasks): it named only Ctrl-C and closing the terminal, and a
// supervisor's SIGTERM exiting 130 read as a lie.
func TestRunHelpNamesSIGTERM(t *testing.T) {
	t.Parallel()
	root := NewRoot(&IOStreams{In: strings.NewReader(""), Out: new(bytes.Buffer), ErrOut: new(bytes.Buffer), Getenv: func(string) string { return "" }})
	cmd, _, err := root.Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cmd.Long, "so do SIGTERM") || !strings.Contains(cmd.Long, "SIGTERM too exits 130") {
		t.Errorf("run --help does not say what SIGTERM does and exits:\n%s", cmd.Long)
	}
}

// TestRunStdoutClosed: a reader of maestro run's stdout that goes away
// (maestro run … | head -1) interrupts the run, whose session log records
// it, and the exit status is 1 saying broken pipe. Maestro died of
// SIGPIPE, the run left unfinished in the log (an agent CLI went on
// working unattended).
func TestRunStdoutClosed(t *testing.T) {
	t.Parallel()
	home, ws := t.TempDir(), t.TempDir()
	script := filepath.Join(ws, "slow.yaml")
	writeFile(t, script, `schemaVersion: evalops.maestro.scripted-scenario.v1
id: slow
description: Chunks a second apart.
metadata: {recordedAt: "2026-01-01T00:00:00Z", toolsExpected: []}
frames:
  - index: 0
    statements:
      - {kind: text, text: "first"}
      - {kind: delay, ms: 1000}
      - {kind: text, text: "second"}
      - {kind: delay, ms: 10000}
      - {kind: text, text: "third"}
`)
	_, cmd, stderr := maestroProcess(t, home, "run", "--workspace", ws, "--replay", script, "-o", "jsonl", "go")
	r := startStdoutPipe(t, cmd)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read up to the first chunk: %v", err)
		}
		if strings.Contains(line, `"type":"response_chunk"`) {
			break
		}
	}
	r.Close() // the next chunk's write finds no reader
	wantBrokenPipeEnd(t, cmd.Wait(), stderr, home)
}

// On an agent CLI too, a workspace holding Maestro's home is refused:
// `run --agent` opened it unchecked, and the CLI could read the keys in
// config.yaml and rewrite the session logs.
func TestRunAgentRefusesWorkspaceHoldingHome(t *testing.T) {
	t.Parallel()
	ws, bin := t.TempDir(), t.TempDir()
	home := filepath.Join(ws, ".maestro")
	src := filepath.Join("..", "agentcli", "testdata", "user-adapter")
	def, err := os.ReadFile(filepath.Join(src, "fake-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(src, "fake-agent"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "agents", "fake-agent.yaml"), string(def))
	if err := os.WriteFile(filepath.Join(bin, "fake-agent"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home, "PATH": bin + ":/usr/bin:/bin"}, "run", "--agent", "fake-agent", "--workspace", ws, "hello")
	if r.code == 0 || !strings.Contains(r.stderr, "MAESTRO_HOME") {
		t.Errorf("exit %d, stderr %q; want a refusal naming MAESTRO_HOME", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "sessions")); len(entries) > 0 {
		t.Errorf("a session log was written inside the workspace: %d session(s)", len(entries))
	}
}

// An agent CLI's session sends session_info twice (at start, and once
// the CLI names its session): the workspace line is drawn once.
func TestRenderWorkspaceOnce(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRenderer(&IOStreams{Out: &out, ErrOut: &out, Getenv: func(string) string { return "" }}, false)
	r.Event(protocol.SessionInfo{Cwd: "/w"})
	r.Event(protocol.SessionInfo{Cwd: "/w"})
	if n := strings.Count(out.String(), "workspace /w"); n != 1 {
		t.Errorf("workspace drawn %d times:\n%s", n, out.String())
	}
}

// MAESTRO_HOME=.mh in the workspace is refused like an absolute one
// (the relative path slipped past the check, and the session log was
// written into the workspace).
func TestRunRefusesRelativeHomeInWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, filepath.Join(ws, ".mh"))
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, map[string]string{"MAESTRO_HOME": rel}, "run", "--no-piece", "--workspace", ws, "x")
	if r.code == 0 || !strings.Contains(r.stderr, "MAESTRO_HOME") {
		t.Errorf("exit %d, stderr %q; want a refusal naming MAESTRO_HOME", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, ".mh", "sessions")); err == nil {
		t.Error("the session log was written inside the workspace")
	}
}

// A malformed --model is a usage error (exit 2, as README says of usage
// errors; it was 1), and a malformed MAESTRO_MODEL is named as the
// variable (the error read as if --model had been given).
func TestRunModelErrorsNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		{nil, []string{"--model", "qwen3"}, 2, `--model: expected provider/model with provider one of anthropic, openai, replay`},
		{nil, []string{"--model", "openai/"}, 2, `--model: the model after "openai/" is empty`},
		{nil, []string{"--model", "openai/x", "--replay", "s.json"}, 2, "--replay and --model cannot be used together"},
		{map[string]string{"MAESTRO_MODEL": "qwen3"}, nil, 1, `MAESTRO_MODEL: expected provider/model`},
	} {
		args := append(append([]string{"run", "--workspace", t.TempDir()}, tc.args...), "x")
		r := runCLI(t, tc.env, args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want %d and %q", tc.env, tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

// Resuming a session whose workspace was deleted says so, and how to go
// on; it said `--workspace "DIR": stat …` of a flag never given, with a
// pointer to --help.
func TestRunResumeWorkspaceGone(t *testing.T) {
	t.Parallel()
	home, ws := t.TempDir(), filepath.Join(t.TempDir(), "project")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(t.TempDir(), "two.json")
	os.WriteFile(scenario, []byte(`{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"two","description":"two turns",
"metadata":{"recordedAt":"2026-11-22T00:00:00Z","toolsExpected":[]},
"frames":[{"index":0,"statements":[{"kind":"text","text":"one"},{"kind":"wait_for_user"}]},{"index":1,"statements":[{"kind":"text","text":"two"}]}]}`), 0o600)
	env := map[string]string{"MAESTRO_HOME": home}
	r := runCLI(t, env, "run", "--replay", scenario, "--workspace", ws, "first")
	if r.code != 0 {
		t.Fatalf("first run: exit %d: %s", r.code, r.stderr)
	}
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(home, "sessions"))
	if len(entries) != 1 {
		t.Fatalf("%d sessions", len(entries))
	}
	r = runCLI(t, env, "run", "--resume", entries[0].Name(), "again")
	if r.code != 1 || !strings.Contains(r.stderr, "worked in "+ws+", which is no longer a directory: to continue it elsewhere, add --workspace DIR") || strings.Contains(r.stderr, "--help") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	// Elsewhere, it goes on.
	r = runCLI(t, env, "run", "--resume", entries[0].Name(), "--workspace", t.TempDir(), "again")
	if r.code != 0 || !strings.Contains(r.stdout, "two") {
		t.Errorf("resume elsewhere: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestRunSandboxFailureLeavesNoSession: a sandbox the mode requires that
// cannot be set up (here Landlock: this test binary is no sandbox helper)
// fails the run before its session exists. It left an empty session, which
// 'maestro sessions list' showed for every attempt.
func TestRunSandboxFailureLeavesNoSession(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": home, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
	r := runCLI(t, env, "run", "--no-piece", "--model", "openai/x", "--workspace", t.TempDir(), "--sandbox", "landlock", "hi")
	if r.code != ExitError || !strings.Contains(r.stderr, "Landlock is required by sandbox mode landlock") {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	r = runCLI(t, env, "sessions", "list", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("sessions list: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunCompactsThenResumes: a run that reaches the compaction threshold
// on the fake model server says so in words (it drew the protocol's
// compaction message as raw JSON: 'protocol compaction {"type":…}'), and
// --resume continues from the summary, not the full conversation.
func TestRunCompactsThenResumes(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_b", Name: "Bash", Input: `{"command":"echo hi"}`}}, InputTokens: 3500, OutputTokens: 10},
		llmtest.Turn{Text: []string{"SUMMARY: the first thing was asked; echo hi ran"}, InputTokens: 300, OutputTokens: 20},
		llmtest.Turn{Text: []string{"first answer"}, InputTokens: 900, OutputTokens: 10},
		llmtest.Turn{Text: []string{"second answer"}, InputTokens: 950, OutputTokens: 10},
	)
	srv.ContextWindows = map[string]int64{"fake": 4000}
	env := map[string]string{"MAESTRO_HOME": t.TempDir(), "OPENAI_BASE_URL": srv.URL() + "/v1"}
	ws := t.TempDir()
	r := runCLI(t, env, "run", "--no-piece", "--model", "openai/fake", "--workspace", ws, "--sandbox", "off", "do the first thing")
	if r.code != 0 || r.stdout != "first answer\n" {
		t.Fatalf("exit %d\nstdout %q\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"Compacting history and continuing automatically...",
		"Summary of the earlier conversation: SUMMARY: the first thing was asked; echo hi ran", "Compacted the conversation: about",
		// The summarising call is a model call: its tokens were counted,
		// the call was not (the server got 3 requests, the summary said 2).
		"3 model call(s) · 1 tool call(s) · tokens in 4700 out 40"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, `{"type":"compaction"`) {
		t.Errorf("stderr shows the compaction message as JSON:\n%s", r.stderr)
	}
	sessions := runCLI(t, env, "sessions", "list", "--json")
	var listed []struct{ ID string }
	if err := json.Unmarshal([]byte(sessions.stdout), &listed); err != nil || len(listed) != 1 {
		t.Fatalf("sessions list: %v\n%s", err, sessions.stdout)
	}
	r = runCLI(t, env, "run", "--resume", listed[0].ID, "--sandbox", "off", "do the second thing")
	if r.code != 0 || r.stdout != "second answer\n" {
		t.Fatalf("resume: exit %d\nstdout %q\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	reqs := srv.Requests()
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "SUMMARY: the first thing was asked") || strings.Contains(last, "do the first thing") || !strings.Contains(last, "do the second thing") {
		t.Errorf("the resumed request is not the compacted conversation:\n%s", last)
	}
}
