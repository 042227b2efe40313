package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/piece/piecetest"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// writeFile writes content to path, creating its parent directories.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	wstest.WriteFiles(t, filepath.Dir(path), map[string]string{filepath.Base(path): content})
}

func TestPiecesListShowValidate(t *testing.T) {
	t.Parallel()
	home, project := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(home, "pieces", "notes.yaml"), piecetest.Notes)
	writeFile(t, filepath.Join(project, ".maestro", "pieces", "chat.yaml"), strings.Replace(piecetest.Notes, "max_movements: 2", "max_movements: 0", 1))
	env := map[string]string{"MAESTRO_HOME": home}

	r := runCLI(t, env, "pieces", "list", "--workspace", project)
	if r.code != 0 {
		t.Fatalf("list: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"NAME", "code", "builtin", "plan, implement, verify", "Change a code base", "notes", filepath.Join(home, "pieces", "notes.yaml")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, r.stdout)
		}
	}
	// The invalid project override is reported, and chat stays built in.
	if !strings.Contains(r.stderr, "chat.yaml:3:16: max_movements: expected a positive integer") || !strings.Contains(r.stdout, "chat  ") {
		t.Errorf("list: stdout\n%s\nstderr\n%s", r.stdout, r.stderr)
	}

	r = runCLI(t, env, "pieces", "show", "code")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "# source: builtin:code.yaml\nname: code\n") || !strings.Contains(r.stdout, "initial_movement: plan") {
		t.Errorf("show: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "pieces", "show", "cod")
	if r.code != 1 || !strings.Contains(r.stderr, `no piece "cod"`) {
		t.Errorf("show unknown: exit %d %s", r.code, r.stderr)
	}

	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	writeFile(t, good, piecetest.Notes)
	writeFile(t, bad, strings.Replace(strings.Replace(piecetest.Notes, "max_movements: 2", "max_movements: 0", 1), "edit: true", "edit: false", 1))
	r = runCLI(t, env, "pieces", "validate", good, bad, filepath.Join(dir, "missing.yaml"))
	if r.code != 1 || !strings.Contains(r.stderr, "2 of 3 file(s) invalid") {
		t.Errorf("validate: exit %d, stderr %s", r.code, r.stderr)
	}
	for _, want := range []string{
		good + ": ok (piece notes, 1 movement(s))",
		bad + ":3:16: max_movements: expected a positive integer, found integer 0",
		bad + ":10:21: movements[0].allowed_tools[0]: Write needs edit: true, found edit: false",
		filepath.Join(dir, "missing.yaml") + ": open ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := runCLI(t, env, "pieces", "validate", good); r.code != 0 {
		t.Errorf("validate good: exit %d %s", r.code, r.stderr)
	}
}

// codeScenario plays the code piece on a repository whose greet.txt has a
// typo: plan, implement (Edit), verify, complete.
const codeScenario = `schemaVersion: evalops.maestro.scripted-scenario.v1
id: code-typo
description: The code piece fixes a typo in a git repository.
metadata:
  recordedAt: "2026-11-22T00:00:00Z"
  toolsExpected: [Grep, Bash, Edit, Read, transition, complete]
frames:
  - index: 0   # plan
    statements:
      - {kind: text, text: "Let me find the typo."}
      - {kind: tool_call, tool: Grep, input: {pattern: Helo}, expectedResult: success}
      - {kind: tool_call, tool: Bash, input: {command: git status --short}, expectedResult: success}
  - index: 1
    statements:
      - kind: tool_call
        tool: transition
        input:
          next: implement
          summary: "greet.txt:1 says Helo; change it to Hello. Prove it with grep -c Hello greet.txt and git diff."
          lessons: ["The repository has no build; check changes with grep and git diff."]
  - index: 2   # implement
    statements:
      - {kind: tool_call, tool: Edit, input: {path: greet.txt, old_string: Helo, new_string: Hello}, expectedResult: success}
  - index: 3
    statements:
      - {kind: tool_call, tool: Bash, input: {command: grep -c Hello greet.txt}, expectedResult: success}
  - index: 4
    statements:
      - {kind: tool_call, tool: transition, input: {next: verify, summary: "Changed greet.txt:1 from Helo to Hello; grep -c Hello greet.txt prints 1."}}
  - index: 5   # verify
    statements:
      - {kind: tool_call, tool: Bash, input: {command: git diff --stat}, expectedResult: success}
      - {kind: tool_call, tool: Read, input: {path: greet.txt}, expectedResult: success}
  - index: 6
    statements:
      - {kind: tool_call, tool: complete, input: {status: success, result: "Fixed the typo in greet.txt (Helo → Hello); checked with git diff and grep."}}
`

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "greet.txt"), "Helo, world!\n")
	writeFile(t, filepath.Join(dir, "README.md"), "# Greeter\n")
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "initial"}} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// runEvents reads the run events of a session's log.
func runEvents(t *testing.T, home, id string) []engine.Record {
	t.Helper()
	var out []engine.Record
	for rec, err := range session.NewStore(filepath.Join(home, "sessions")).Records(id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind != session.KindRunEvent {
			continue
		}
		var r engine.Record
		if err := json.Unmarshal(rec.Event, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func sessionID(t *testing.T, stderr string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "session "); ok {
			id, _, _ := strings.Cut(rest, " ")
			return id
		}
	}
	t.Fatalf("no session line in:\n%s", stderr)
	return ""
}

func TestRunPieceCodeOnReplayInGitRepo(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	scenario := filepath.Join(t.TempDir(), "code.yaml")
	writeFile(t, scenario, codeScenario)
	home := t.TempDir()
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "run", "--piece", "code", "--replay", scenario, "--workspace", repo, "fix the typo in greet.txt")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	const result = "Fixed the typo in greet.txt (Helo → Hello); checked with git diff and grep.\n"
	if r.stdout != result {
		t.Errorf("stdout = %q, want only the result", r.stdout)
	}
	if data, _ := os.ReadFile(filepath.Join(repo, "greet.txt")); string(data) != "Hello, world!\n" {
		t.Errorf("greet.txt = %q", data)
	}
	for _, want := range []string{"piece code (given)", "movement plan (1 of at most 20)", "plan → implement", "movement verify (3 of at most 20)",
		"run succeeded in verify", "Let me find the typo.", "1 file changed, 1 insertion(+), 1 deletion(-)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	// Nothing of the run was written into the repository.
	for _, d := range []string{"logs", "output", "subtasks"} {
		if _, err := os.Stat(filepath.Join(repo, d)); err == nil {
			t.Errorf("the run created %s/ in the repository", d)
		}
	}
	id := sessionID(t, r.stderr)
	var kinds []string
	for _, rec := range runEvents(t, home, id) {
		kinds = append(kinds, string(rec.Event.Kind()))
	}
	want := "classified run_started movement_started lessons transition movement_started transition movement_started complete"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("run events = %s\nwant %s", got, want)
	}
	// The log records each run event once: no status line repeats one
	// (the terminal showed them, above).
	described := map[string]bool{}
	for _, rec := range runEvents(t, home, id) {
		described[rec.Event.Describe()] = true
	}
	for rec, err := range session.NewStore(filepath.Join(home, "sessions")).Records(id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Type, Message string }
		if rec.EventType() == "status" && json.Unmarshal(rec.Event, &st) == nil && described[st.Message] {
			t.Errorf("the session log repeats a run event as a status line: %s", rec.Event)
		}
	}
}

const chatAskScenario = `schemaVersion: evalops.maestro.scripted-scenario.v1
id: chat-ask
description: chat asks a question, then answers; a follow-up run answers again.
metadata:
  recordedAt: "2026-11-22T00:00:00Z"
  toolsExpected: [complete]
frames:
  - index: 0
    statements:
      - {kind: tool_call, tool: complete, input: {status: needs_user_input, result: "Which language should I greet you in?"}}
  - index: 1
    statements:
      - {kind: tool_call, tool: complete, input: {status: success, result: "Bonjour !"}}
  - index: 2
    statements:
      - {kind: tool_call, tool: complete, input: {status: success, result: "Bonjour encore !"}}
`

func TestRunPieceAskThenResumeInANewProcess(t *testing.T) {
	t.Parallel()
	scenario := filepath.Join(t.TempDir(), "ask.yaml")
	writeFile(t, scenario, chatAskScenario)
	home, ws := t.TempDir(), t.TempDir()
	env := map[string]string{"MAESTRO_HOME": home}
	r1 := runCLI(t, env, "run", "--piece", "chat", "--replay", scenario, "--workspace", ws, "-o", "jsonl", "greet me")
	if r1.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r1.code, r1.stderr)
	}
	id := r1.ofType(t, "ready")[0]["session_id"].(string)
	if !strings.Contains(r1.stdout, `"Result (waiting_human): Which language should I greet you in?"`) {
		t.Errorf("first run does not show the question:\n%s", r1.stdout)
	}
	st, err := engine.LoadState(filepath.Join(home, "sessions", id, "runs", "1"))
	if err != nil || st.Status != engine.StatusWaitingHuman {
		t.Fatalf("persisted run: %+v, %v", st, err)
	}

	// Each invocation is a new engine and a new session handle: the run
	// continues from its persisted state.
	r2 := runCLI(t, env, "run", "--resume", id, "-o", "jsonl", "in French")
	if r2.code != 0 || !strings.Contains(r2.stdout, `"Result (succeeded): Bonjour !"`) {
		t.Fatalf("resumed run: exit %d\n%s\n%s", r2.code, r2.stdout, r2.stderr)
	}
	if !strings.Contains(r2.stdout, "run resumed at respond (answer)") {
		t.Errorf("no resumed status:\n%s", r2.stdout)
	}
	// A finished run is followed by a new run of the same piece.
	r3 := runCLI(t, env, "run", "--resume", id, "again please")
	if r3.code != 0 || r3.stdout != "Bonjour encore !\n" {
		t.Fatalf("follow-up run: exit %d\n%s\n%s", r3.code, r3.stdout, r3.stderr)
	}
	st, err = engine.LoadState(filepath.Join(home, "sessions", id, "runs", "2"))
	if err != nil || st.Piece != "chat" || !strings.Contains(st.Task, "Earlier result (succeeded):\nBonjour !") || !strings.Contains(st.Task, "New request:\nagain please") {
		t.Errorf("follow-up run state: %+v, %v", st, err)
	}
	if r := runCLI(t, env, "run", "--resume", id, "--no-piece", "x"); r.code != 2 || !strings.Contains(r.stderr, "runs pieces") {
		t.Errorf("--no-piece on a piece session: exit %d %s", r.code, r.stderr)
	}
}

func TestRunClassifiesWithALiveModel(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t,
		llmtest.Turn{Text: []string{`{"piece": "chat", "reason": "a greeting"}`}, InputTokens: 800, OutputTokens: 12},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_c", Name: "complete", Input: `{"status":"success","result":"Hello to you too!"}`}}, InputTokens: 1500, OutputTokens: 20},
	)
	r := runCLI(t, map[string]string{"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.URL()},
		"run", "--model", "anthropic/claude-sonnet-4-5", "--workspace", t.TempDir(), "--sandbox", "off", "hello there")
	if r.code != 0 || r.stdout != "Hello to you too!\n" {
		t.Fatalf("exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "piece chat chosen by the classifier: a greeting") {
		t.Errorf("stderr lacks the classification:\n%s", r.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	classify, movement := reqs[0].JSON(), reqs[1].JSON()
	if _, hasTools := classify["tools"]; hasTools || !strings.Contains(string(reqs[0].Body), "hello there") {
		t.Errorf("classifier request: %s", reqs[0].Body)
	}
	if !strings.Contains(string(reqs[1].Body), `movement \"respond\" of the piece \"chat\"`) || movement["tools"] == nil {
		t.Errorf("movement request: %s", reqs[1].Body)
	}
}

func TestRunPieceUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--piece", "cod", "x"}, 2, `unknown piece "cod"; available: chat, code, general, piece-builder, research, review`},
		{[]string{"run", "--piece", "code", "--no-piece", "x"}, 2, "--piece and --no-piece cannot be used together"},
		{[]string{"run", "--piece", "code", "--system", "s", "x"}, 2, "--system"},
		// --agent ran the task on the CLI and ignored --piece silently.
		{[]string{"run", "--piece", "code", "--agent", "claude-code", "x"}, 2, "--piece runs on Maestro's piece engine, not on --agent claude-code"},
		// No model: the bundled demo scripts only general.
		{[]string{"run", "--piece", "code", "x"}, 2, "the bundled replay demo scripts only piece general, not code"},
	}
	for _, tc := range cases {
		r := runCLI(t, nil, append(tc.args[:1:1], append([]string{"--workspace", t.TempDir()}, tc.args[1:]...)...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
		// A usage error runs nothing: no banner, and no empty session
		// left in `maestro sessions list` (a typo in --piece made one).
		if strings.Contains(r.stderr, "REPLAY") || strings.Contains(r.stderr, "session ") {
			t.Errorf("%v: a run started before the usage error:\n%s", tc.args, r.stderr)
		}
		if entries, _ := os.ReadDir(filepath.Join(r.home, "sessions")); len(entries) > 0 {
			t.Errorf("%v: a usage error left %d session(s) behind", tc.args, len(entries))
		}
	}
}

// An invalid project piece file is named when --piece asks for the piece
// it would have defined, before any session exists.
func TestRunPieceInvalidFileNamed(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	dir := filepath.Join(ws, ".maestro", "pieces")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte("name: mine\ndescription: d\ncolour: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "run", "--workspace", ws, "--piece", "mine", "x")
	for _, want := range []string{"mine.yaml:3:1: colour: unknown field", `unknown piece "mine"`} {
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", r.code, want, r.stderr)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(r.home, "sessions")); len(entries) > 0 {
		t.Errorf("a usage error left %d session(s) behind", len(entries))
	}
}

// validate says of a file in a pieces/ directory what the catalog would
// say: `pieces validate .maestro/pieces/deploy.yaml` said "ok" for a
// piece named otherwise, which `pieces list` then ignored.
func TestPiecesValidateAsTheCatalogReads(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	dir := filepath.Join(project, ".maestro", "pieces")
	writeFile(t, filepath.Join(dir, "deploy.yaml"), piecetest.Notes) // name: notes
	writeFile(t, filepath.Join(dir, "notes.yml"), piecetest.Notes)
	writeFile(t, filepath.Join(dir, "notes.txt"), piecetest.Notes)
	writeFile(t, filepath.Join(project, "draft.yaml"), piecetest.Notes) // not in the catalog: only checked
	r := runCLI(t, nil, "pieces", "validate", filepath.Join(dir, "deploy.yaml"), filepath.Join(dir, "notes.yml"), filepath.Join(dir, "notes.txt"), filepath.Join(project, "draft.yaml"))
	for _, want := range []string{
		filepath.Join(dir, "deploy.yaml") + `:1:7: name: expected "deploy" to match the file name deploy.yaml, found "notes"`,
		filepath.Join(dir, "notes.yml") + ": ok",
		filepath.Join(dir, "notes.txt") + ": the catalog reads only NAME.yaml or NAME.yml files",
		filepath.Join(project, "draft.yaml") + ": ok",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.code != 1 || !strings.Contains(r.stderr, "2 of 4 file(s) invalid") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// `maestro pieces show code > .maestro/pieces/code.yaml`, as its --help
// shows: the shell creates the file empty before the catalog reads it,
// and show warned that this empty file was ignored. The copy is the
// built-in, and it validates.
func TestPiecesShowIntoTheOverrideFile(t *testing.T) {
	t.Parallel()
	home, project := t.TempDir(), t.TempDir()
	target := filepath.Join(project, ".maestro", "pieces", "code.yaml")
	writeFile(t, target, "")
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	ios := &IOStreams{In: strings.NewReader(""), Out: out, ErrOut: &stderr, Getenv: func(k string) string {
		if k == "MAESTRO_HOME" {
			return home
		}
		return ""
	}}
	code := Run(t.Context(), ios, []string{"pieces", "show", "code", "--workspace", project})
	out.Close()
	if code != 0 || stderr.Len() > 0 {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
	data, _ := os.ReadFile(target)
	if !strings.HasPrefix(string(data), "# source: builtin:code.yaml\nname: code\n") {
		t.Errorf("the copy is not the built-in:\n%s", data)
	}
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "pieces", "validate", target)
	if r.code != 0 {
		t.Errorf("the copy does not validate: %s%s", r.stdout, r.stderr)
	}
}

// A classifier_model whose provider is not configured fails the run
// before its session exists (it left an empty session in the list), and
// the run's model is never called.
func TestRunClassifierModelUnconfigured(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "config.yaml"), "classifier_model: openai/tiny\n")
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.URL()},
		"run", "--model", "anthropic/claude-sonnet-4-5", "--workspace", t.TempDir(), "hello there")
	if r.code != 1 || !strings.Contains(r.stderr, `config classifier_model "openai/tiny": provider openai is not configured`) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "sessions")); len(entries) > 0 || len(srv.Requests()) > 0 {
		t.Errorf("%d session(s) left behind, %d model request(s)", len(entries), len(srv.Requests()))
	}
}

// TestRunPieceReadsSkills: a movement listing ReadSkill sees the project's
// ./.maestro/skills and the user's ~/.maestro/skills, the project's first
// (docs/skills.md). maestro run gave the engine no skills at all: ReadSkill
// was left out ("no skills are configured") whatever was installed.
func TestRunPieceReadsSkills(t *testing.T) {
	t.Parallel()
	home, ws := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(ws, ".maestro", "pieces", "skilled.yaml"), strings.NewReplacer(
		"name: notes", "name: skilled", "allowed_tools: [Write]", "allowed_tools: [ReadSkill]").Replace(piecetest.Notes))
	writeFile(t, filepath.Join(ws, ".maestro", "skills", "pdf", "SKILL.md"), "---\nname: pdf\ndescription: Fill PDF forms (project)\n---\n# Project PDF\n")
	writeFile(t, filepath.Join(home, "skills", "pdf", "SKILL.md"), "---\nname: pdf\ndescription: Fill PDF forms (user)\n---\n# User PDF\n")
	writeFile(t, filepath.Join(home, "skills", "notes", "SKILL.md"), "---\nname: notes\ndescription: Take notes\n---\n# Notes\n")
	srv := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_s", Name: "ReadSkill", Input: `{"name":"pdf"}`}}},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_c", Name: "complete", Input: `{"status":"success","result":"read it"}`}}},
	)
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL() + "/v1"},
		"run", "--piece", "skilled", "--model", "openai/gpt-5", "--workspace", ws, "--sandbox", "off", "fill the form")
	if r.code != 0 || r.stdout != "read it\n" {
		t.Fatalf("exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	first := string(reqs[0].Body)
	if !strings.Contains(first, `- notes: Take notes`) || !strings.Contains(first, `- pdf: Fill PDF forms (project)`) {
		t.Errorf("the first request does not offer ReadSkill with both skills, the project's pdf:\n%s\nstderr:\n%s", first, r.stderr)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "skills", "pdf", "SKILL.md")); err != nil || !strings.Contains(string(got), "# Project PDF") {
		t.Errorf("skills/pdf/SKILL.md in the workspace: %q, %v", got, err)
	}
}

// TestRunPieceMissingMCPLeavesNoSession: a piece whose required_mcp names
// a server config.yaml does not declare is refused before the session
// exists. The engine refused it after: the banner was drawn and an empty
// session stayed in 'maestro sessions list'.
func TestRunPieceMissingMCPLeavesNoSession(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, ".maestro", "pieces", "needs.yaml"),
		strings.Replace(piecetest.Notes, "name: notes", "name: needs\nrequired_mcp: [github]", 1))
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "MAESTRO_HOME": t.TempDir()}
	if r := runCLI(t, env, "pieces", "trust", "--workspace", ws, "needs"); r.code != 0 {
		t.Fatalf("pieces trust: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLI(t, env, "run", "--piece", "needs", "--model", "openai/x", "--workspace", ws, "--sandbox", "off", "hi")
	if r.code != ExitUsage || !strings.Contains(r.stderr, `piece "needs" requires the MCP server "github", which is not configured`) {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "session ") {
		t.Errorf("the run started before the error:\n%s", r.stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(r.home, "sessions")); len(entries) > 0 {
		t.Errorf("the refused run left %d session(s) behind", len(entries))
	}
}

// TestRunPieceBadSSHConfigLeavesNoSession: an ssh_connections entry whose
// key file cannot be read fails a new piece run before its session exists
// (it left an empty session in 'maestro sessions list').
func TestRunPieceBadSSHConfigLeavesNoSession(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "config.yaml"), "ssh_connections:\n  box:\n    host: 127.0.0.1\n    user: me\n    key_file: "+
		filepath.Join(home, "missing-key")+"\n    host_key: \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\"\n")
	env := map[string]string{"MAESTRO_HOME": home, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
	r := runCLI(t, env, "run", "--piece", "chat", "--model", "openai/x", "--workspace", t.TempDir(), "--sandbox", "off", "hi")
	if r.code != ExitError || !strings.Contains(r.stderr, "configuration ssh_connections.box.key_file") {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "sessions")); len(entries) > 0 {
		t.Errorf("the failed run left %d session(s) behind:\n%s", len(entries), r.stderr)
	}
}
