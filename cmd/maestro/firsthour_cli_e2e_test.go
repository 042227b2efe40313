package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
)

// The smaller first-hour items of issue 15 (item 10), through the binary.

// A mistyped key in config.yaml is named with its line, a close key and
// the known keys, in the file's words, not Go's.
func TestConfigErrorNamesTheKey(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("model: openai/x\nmax_iteration: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr := runMaestro(t, home, false, "run", "--workspace", t.TempDir(), "hello")
	for _, w := range []string{filepath.Join(home, "config.yaml"), `line 2: max_iteration: unknown key; did you mean "max_iterations"?`, "known keys: ", "model, models, providers, sandbox"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, "config.Config") || strings.Contains(stderr, "not found in type") {
		t.Errorf("stderr names Go types:\n%s", stderr)
	}
}

// A usage error points at the help of the command that was run.
func TestUsageErrorNamesTheSubcommandHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "Run 'maestro run --help' for usage."},
		{[]string{"tasks", "list", "--bogus"}, "Run 'maestro tasks list --help' for usage."},
		{[]string{"sessions", "show"}, "Run 'maestro sessions show --help' for usage."},
		{[]string{"nonsense"}, "Run 'maestro --help' for usage."},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			_, stderr := runMaestro(t, t.TempDir(), false, tc.args...)
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
		})
	}
}

// `pieces list` and `pieces show` explain themselves.
func TestPiecesLongHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  string
		want []string
	}{
		{"list", []string{"builtin", "~/.maestro/pieces/", "ignored", "--workspace DIR", "Examples:"}},
		{"show", []string{"canonical YAML", "docs/pieces.md", "maestro pieces validate FILE", "Examples:"}},
	} {
		out, _ := runMaestro(t, t.TempDir(), true, "pieces", tc.cmd, "--help")
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("pieces %s --help lacks %q:\n%s", tc.cmd, w, out)
			}
		}
	}
}

// A piece run on a model with no known price says so once, not once per
// agent run (each movement, each reminder).
func TestPricingNoticeOncePerPieceRun(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t,
		// A text answer without complete: the engine reminds the model,
		// a second agent run of the same movement.
		llmtest.Turn{Text: []string{"Hello!"}, InputTokens: 10, OutputTokens: 2},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_done", Name: "complete", Input: `{"status":"success","result":"Hello!"}`}}, InputTokens: 12, OutputTokens: 4},
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--model", "openai/llama3.2", "--piece", "chat", "--workspace", t.TempDir(), "say hello")
	cmd.Env = append(proctest.NoModelEnv(t.TempDir()), "OPENAI_BASE_URL="+srv.URL()+"/v1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "Hello!" {
		t.Fatalf("piece run: %v, stdout %q\nstderr:\n%s", err, out, stderr.String())
	}
	if len(srv.Requests()) != 2 {
		t.Errorf("%d model requests, want 2 (the answer, then complete after a reminder)", len(srv.Requests()))
	}
	if n := strings.Count(stderr.String(), "Pricing unknown for model llama3.2"); n != 1 {
		t.Errorf("pricing notice %d times, want once:\n%s", n, stderr.String())
	}
}

// `tasks list` shows the piece a job without one was given (the
// classifier's, here the replay demo's), and a client whose token the
// server refuses is not told to pass a token.
func TestTasksListPieceAndRefusedToken(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	env := proctest.NoModelEnv(home)
	url, _, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home, "--token", "the-right-one")
	defer stop() // before ctx is cancelled
	out, stderr, err := tasksCLI(ctx, env, url, "--token", "the-right-one", "submit", "Say hello", "-f")
	if err != nil {
		t.Fatalf("submit -f: %v\n%s\n%s", err, out, stderr)
	}
	out, stderr, err = tasksCLI(ctx, env, url, "--token", "the-right-one", "list")
	if err != nil || !regexp.MustCompile(`(?m)^1\s+succeeded\s+general\s`).MatchString(out) {
		t.Errorf("tasks list: %v, want task 1 succeeded with piece general:\n%s\n%s", err, out, stderr)
	}
	_, stderr, err = tasksCLI(ctx, env, url, "list", "--token", "a-wrong-one")
	if err == nil || !strings.Contains(stderr, "401") || !strings.Contains(stderr, "refused the token given by --token or MAESTRO_API_TOKEN") {
		t.Errorf("tasks list with a wrong token: err %v, want a 401 saying the token was refused:\n%s", err, stderr)
	}
	_, stderr, err = tasksCLI(ctx, env, url, "list")
	if err == nil || !strings.Contains(stderr, "pass --token or set MAESTRO_API_TOKEN") {
		t.Errorf("tasks list without a token: err %v, want a 401 asking for it:\n%s", err, stderr)
	}
}

// The README and docs tell a new user what is needed and what exists.
func TestFirstHourDocs(t *testing.T) {
	t.Parallel()
	read := func(path string) string {
		data, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	readme := read("README.md")
	for _, w := range []string{"npm", "sudo", "1.5 GB", "3 GB of RAM", "docs/fakemodel.md", "maestro sessions list"} {
		if !strings.Contains(readme, w) {
			t.Errorf("README.md lacks %q", w)
		}
	}
	if mk := read("Makefile"); !strings.Contains(mk, "./cmd/maestro-fakemodel") {
		t.Errorf("make build does not build maestro-fakemodel")
	}
	if fm := read("docs/fakemodel.md"); !strings.Contains(fm, "--script") || !strings.Contains(fm, "tool_calls") {
		t.Errorf("docs/fakemodel.md does not document the flags and the script")
	}
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(docs, filepath.Join("..", "..", "README.md")) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(data)), " ")
		for _, bad := range []string{"so the web UI and", "the web UI's", "reachable over HTTP + SSE later", "built on this layer later"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s still says %q", filepath.Base(p), bad)
			}
		}
	}
}

// `make demo` then the command it prints, run as printed from the same
// shell (Maestro's home is not the demo's; bin/ on PATH, as make demo
// says at its end): the demo prints no resume hint, and the command it
// does print works (issue 15 acceptance).
func TestDemoCommandsRunAsPrinted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dry, err := exec.CommandContext(ctx, "make", "-s", "-n", "-C", root, "demo").Output()
	if err != nil {
		t.Fatalf("make -n demo: %v", err)
	}
	if want := `export PATH=\"` + filepath.Join(root, "bin") + `:\$PATH\" to run them as printed`; !strings.Contains(string(dry), want) {
		t.Errorf("make demo does not end with %q:\n%s", want, dry)
	}

	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr := runMaestro(t, filepath.Join(dir, "maestro-home"), true, "run", "--workspace", ws, "Show me what you can do in this workspace")
	if strings.Contains(stderr, "--resume") {
		t.Errorf("the demo prints a resume hint:\n%s", stderr)
	}
	printed := regexp.MustCompile(`maestro run --workspace "[^"]+" "…"`).FindString(stderr)
	if printed == "" {
		t.Fatalf("the demo prints no command to go on with:\n%s", stderr)
	}
	shell := exec.CommandContext(ctx, "bash", "-c", printed)
	shell.Env = append(proctest.NoModelEnv(t.TempDir()), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := shell.CombinedOutput(); err != nil {
		t.Errorf("%s: %v\n%s", printed, err, out)
	}
}
