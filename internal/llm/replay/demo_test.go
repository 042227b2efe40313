package replay

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/proctest"
)

func TestDemoValidates(t *testing.T) {
	t.Parallel()
	s := Demo()
	if s.Name != DemoName || s.ID != "maestro-demo" || len(s.Frames) != 3 {
		t.Fatalf("Demo() = %s %s with %d frames", s.Name, s.ID, len(s.Frames))
	}
	checkBundled(t, s, DemoSource, DemoName)
}

// checkBundled checks that the bundled scenario s validates and that
// source returns a copy: the embedded file still parses after the copy is
// cleared.
func checkBundled(t *testing.T, s *Scenario, source func() []byte, name string) {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	clear(source())
	if _, err := Parse(source(), name); err != nil {
		t.Fatalf("Parse(%s source) after clearing a copy: %v", name, err)
	}
}

// checkCallInput checks that the input of the tool call st is a JSON
// object with every required field of fields and no other; ok is false
// when it is not an object.
func checkCallInput(t *testing.T, where string, st Statement, fields map[string]bool) (in map[string]any, ok bool) {
	t.Helper()
	if err := json.Unmarshal(st.Input, &in); err != nil {
		t.Errorf("%s: input is not an object: %v", where, err)
		return nil, false
	}
	for name, required := range fields {
		if _, has := in[name]; required && !has {
			t.Errorf("%s: %s input lacks %s", where, st.Tool, name)
		}
	}
	for name := range in {
		if _, known := fields[name]; !known {
			t.Errorf("%s: %s input has unknown field %s", where, st.Tool, name)
		}
	}
	return in, true
}

// checkAllowlisted checks that every command of the shell line cmd (split
// at &, | and ;) runs a program of allow.
func checkAllowlisted(t *testing.T, where, cmd string, allow []string) {
	t.Helper()
	for _, part := range strings.FieldsFunc(cmd, func(r rune) bool { return r == '&' || r == '|' || r == ';' }) {
		if w := strings.Fields(part); len(w) == 0 || !slices.Contains(allow, w[0]) {
			t.Errorf("%s: command %q runs %q, outside the default allowlist %v", where, cmd, part, allow)
		}
	}
}

// TestDemoGolden pins the demo's canonical JSON form, so any change to the
// demo (or to how scenarios marshal) shows up in review.
func TestDemoGolden(t *testing.T) {
	t.Parallel()
	got, err := Demo().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	proctest.Golden(t, filepath.Join("testdata", "demo.golden.json"), got)
}

// builtInTools maps the built-in tools to their input fields and which of
// them are required, as internal/tool declares them.
func builtInTools() map[string]map[string]bool {
	return map[string]map[string]bool{
		"Read":  {"path": true, "offset": false, "limit": false},
		"Write": {"path": true, "content": true},
		"Edit":  {"path": true, "old_string": true, "new_string": true, "replace_all": false},
		"Glob":  {"pattern": true, "path": false},
		"Grep":  {"pattern": true, "path": false, "glob": false, "ignore_case": false, "max_results": false},
		"Bash":  {"command": true, "timeout_seconds": false},
	}
}

// TestDemoUsesOnlyBuiltInToolsAndSafeCommands: every call is a built-in
// tool with a well-formed input, every shell command is in the sandbox's
// default allowlist, and toolsExpected lists exactly the tools used.
func TestDemoUsesOnlyBuiltInToolsAndSafeCommands(t *testing.T) {
	t.Parallel()
	allow := []string{"ls", "cat", "wc", "grep", "sort", "head", "echo"}
	tools := builtInTools()
	s := Demo()
	var used []string
	for k, f := range s.Frames {
		for i, st := range f.Statements {
			if st.Kind != KindToolCall {
				continue
			}
			where := DefaultToolCallID(s.ID, k, i)
			fields, ok := tools[st.Tool]
			if !ok {
				t.Errorf("%s: %s is not a built-in tool", where, st.Tool)
				continue
			}
			if !slices.Contains(used, st.Tool) {
				used = append(used, st.Tool)
			}
			in, ok := checkCallInput(t, where, st, fields)
			if !ok {
				continue
			}
			if st.Tool == "Bash" {
				cmd, _ := in["command"].(string)
				checkAllowlisted(t, where, cmd, allow)
				if strings.ContainsAny(cmd, "`$<>") {
					t.Errorf("%s: command %q uses substitution or redirection", where, cmd)
				}
			}
		}
	}
	if diff := cmp.Diff(s.Tools(), used); diff != "" {
		t.Errorf("toolsExpected vs tools used (-want +got):\n%s", diff)
	}
}

// TestDemoSaysWhatItIs: the demo must say it is a scripted replay up front,
// end by explaining how to configure a real model, and report usage.
func TestDemoSaysWhatItIs(t *testing.T) {
	t.Parallel()
	s := Demo()
	first := s.Frames[0].Statements[0]
	if first.Kind != KindText || !strings.Contains(first.Text, "scripted replay") {
		t.Errorf("first statement %+v does not announce the scripted replay", first)
	}
	last := s.Frames[len(s.Frames)-1]
	var text string
	for _, st := range last.Statements {
		text += st.Text
	}
	for _, want := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "--model provider/model"} {
		if !strings.Contains(text, want) {
			t.Errorf("final answer does not mention %s", want)
		}
	}
	if end := last.Statements[len(last.Statements)-1]; end.Kind != KindEnd || end.Reason != EndComplete {
		t.Errorf("last statement = %+v, want end complete", end)
	}
	for k, f := range s.Frames {
		var u llm.Usage
		for _, st := range f.Statements {
			u.Add(st.Usage)
		}
		if u.InputTokens == 0 || u.OutputTokens == 0 {
			t.Errorf("frame %d reports usage %+v, want input and output tokens", k, u)
		}
	}
}

// runDemoTool executes a demo tool call against dir the way the built-in
// tools would (Write creates parent directories).
func runDemoTool(ctx context.Context, root *os.Root, dir string, c llm.ToolCall) llm.ToolResult {
	var in struct {
		Path, Content, Command string
	}
	res := llm.ToolResult{CallID: c.ID, Name: c.Name}
	if err := json.Unmarshal(c.Input, &in); err != nil {
		res.Content, res.IsError = err.Error(), true
		return res
	}
	var err error
	switch c.Name {
	case "Write":
		if err = root.MkdirAll(filepath.Dir(in.Path), 0o755); err == nil {
			err = root.WriteFile(in.Path, []byte(in.Content), 0o644)
		}
		res.Content = "wrote " + in.Path
	case "Read":
		var b []byte
		b, err = root.ReadFile(in.Path)
		res.Content = string(b)
	case "Bash":
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", in.Command)
		cmd.Dir = dir
		var out []byte
		out, err = cmd.CombinedOutput()
		res.Content = string(out)
	default:
		err = errors.New("unknown tool " + c.Name)
	}
	if err != nil {
		res.Content, res.IsError = err.Error(), true
	}
	return res
}

// demoWorkspace is an empty temporary workspace to play a demo in, and
// its root.
func demoWorkspace(t *testing.T) (string, *os.Root) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return dir, root
}

// wantAllPass requires every assertion of s to pass on the workspace dir
// and the tool calls of msgs.
func wantAllPass(t *testing.T, s *Scenario, dir string, msgs []llm.Message) {
	t.Helper()
	results := s.Check(os.DirFS(dir), CalledTools(msgs))
	for _, r := range results {
		if r.Status != StatusPass {
			t.Errorf("assertion %s: %s: %s", r.ID, r.Status, r.Message)
		}
	}
	if len(results) != len(s.Assertions) || OutcomeOf(results) != OutcomePass {
		t.Errorf("outcome %s over %d results", OutcomeOf(results), len(results))
	}
}

// TestDemoPlaysThrough drives the demo like the agent loop does: each
// model call's tool calls run for real in a temporary workspace and their
// results go back in the next request, until the scenario ends. Then its
// assertions pass on that workspace.
func TestDemoPlaysThrough(t *testing.T) {
	t.Parallel()
	dir, root := demoWorkspace(t)
	p := New(Demo())
	msgs := []llm.Message{llm.UserText("fix the failing test")}
	var (
		texts []string
		usage llm.Usage
		stops []llm.StopReason
		bash  string
	)
	for turn := 0; turn < 10; turn++ {
		got := collect(p.Stream(t.Context(), &llm.Request{Messages: msgs}))
		if got.err != nil {
			t.Fatalf("turn %d: %v", turn, got.err)
		}
		msgs = append(msgs, got.resp.Message)
		texts = append(texts, got.resp.Message.TextContent())
		usage.Add(got.resp.Usage)
		stops = append(stops, got.resp.StopReason)
		if got.resp.StopReason != llm.StopToolUse {
			break
		}
		user := llm.Message{Role: llm.RoleUser}
		for _, c := range got.resp.Message.ToolCalls() {
			r := runDemoTool(t.Context(), root, dir, c)
			if c.Name == "Bash" {
				bash = r.Content
			}
			user.Parts = append(user.Parts, llm.Part{Type: llm.PartToolResult, ToolResult: &r})
		}
		msgs = append(msgs, user)
	}
	if diff := cmp.Diff([]llm.StopReason{llm.StopToolUse, llm.StopToolUse, llm.StopEndTurn}, stops); diff != "" {
		t.Errorf("stop reasons (-want +got):\n%s", diff)
	}
	if !strings.Contains(texts[0], "scripted replay") || !strings.Contains(texts[2], "ANTHROPIC_API_KEY") {
		t.Errorf("texts = %q", texts)
	}
	if !strings.Contains(bash, "README.md") || !strings.Contains(bash, "5 hello-maestro/greet.txt") {
		t.Errorf("Bash output = %q, want the listing and a line count of 5", bash)
	}
	if want := (llm.Usage{InputTokens: 2328, OutputTokens: 594, CacheReadTokens: 4112, CacheWriteTokens: 2056}); usage != want {
		t.Errorf("total usage = %+v, want %+v", usage, want)
	}
	wantAllPass(t, Demo(), dir, msgs)

	// One call too many says the demo has ended and how to go on.
	got := collect(p.Stream(t.Context(), &llm.Request{Messages: append(msgs, llm.UserText("and now?"))}))
	if llm.KindOf(got.err) != llm.KindScript || !strings.Contains(got.err.Error(), "the replay demo has ended: its 3 scripted model turns were played") ||
		!strings.Contains(got.err.Error(), "Start a new session") {
		t.Errorf("call past the end: %v", got.err)
	}
}

// TestDemoCannotGoOn: a prompt after an interrupted demo turn (its tool
// calls have no result), or after a tool call the script expects to
// succeed failed (a denied approval), is a short error saying the demo
// cannot go on and what to do, not the frame and call ids of the script.
func TestDemoCannotGoOn(t *testing.T) {
	t.Parallel()
	p := New(Demo())
	first := collect(p.Stream(t.Context(), &llm.Request{Messages: []llm.Message{llm.UserText("go")}}))
	if first.err != nil {
		t.Fatal(first.err)
	}
	denied := llm.Message{Role: llm.RoleUser}
	for _, c := range first.resp.Message.ToolCalls() {
		r := llm.ToolResult{CallID: c.ID, Content: "Error: the user denied this call", IsError: true}
		denied.Parts = append(denied.Parts, llm.Part{Type: llm.PartToolResult, ToolResult: &r})
	}
	tests := []struct {
		name, after string
		next        []llm.Message
	}{
		{"interrupted", "its Write call did not finish (the turn was interrupted)", []llm.Message{llm.UserText("go again")}},
		{"denied", "its Write call ended with error, not success: Error: the user denied this call", []llm.Message{denied}},
	}
	for _, tt := range tests {
		msgs := append([]llm.Message{llm.UserText("go"), first.resp.Message}, tt.next...)
		got := collect(p.Stream(t.Context(), &llm.Request{Messages: msgs}))
		want := "replay: script: the replay demo cannot go on: it is a fixed script, and " + tt.after + ". " + demoGoOn + "."
		if llm.KindOf(got.err) != llm.KindScript || got.err.Error() != want {
			t.Errorf("%s: %v\nwant %s", tt.name, got.err, want)
		}
	}
}

// TestDemoCheckOnHandPopulatedWorkspace evaluates the demo's assertions on
// a workspace and call list written by hand, then on broken variants.
func TestDemoCheckOnHandPopulatedWorkspace(t *testing.T) {
	t.Parallel()
	good := func() fstest.MapFS {
		return fstest.MapFS{
			"hello-maestro/README.md": {Data: []byte("# hello-maestro\n\nMade by Maestro's replay demo.\n")},
			"hello-maestro/greet.txt": {Data: []byte("hello, world\nbonjour, le monde\nhola, mundo\nhallo, Welt\nciao, mondo\n")},
		}
	}
	calls := func() []CalledTool {
		return []CalledTool{
			{ID: "replay_maestro-demo_000_003", Name: "Write"},
			{ID: "replay_maestro-demo_000_004", Name: "Write"},
			{ID: "replay_maestro-demo_001_001", Name: "Bash"},
			{ID: "replay_maestro-demo_001_002", Name: "Read"},
		}
	}
	failed := func(rs []AssertionResult) []string {
		var ids []string
		for _, r := range rs {
			if r.Status != StatusPass {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	s := Demo()
	if got := failed(s.Check(good(), calls())); len(got) != 0 {
		t.Errorf("failed on a good workspace: %v", got)
	}

	tests := []struct {
		name    string
		fsys    fstest.MapFS
		calls   []CalledTool
		failed  []string
		outcome Outcome
	}{
		{"greetings changed", func() fstest.MapFS {
			w := good()
			w["hello-maestro/greet.txt"] = &fstest.MapFile{Data: []byte("hello, world\n")}
			return w
		}(), calls(), []string{"greetings-written"}, OutcomeFail},
		{"readme missing", func() fstest.MapFS {
			w := good()
			delete(w, "hello-maestro/README.md")
			return w
		}(), calls(), []string{"readme-written", "readme-mentions-replay"}, OutcomeFail},
		{"no shell", good(), slices.DeleteFunc(calls(), func(c CalledTool) bool { return c.Name == "Bash" }), []string{"shell-listing"}, OutcomeFail},
		{"an edit is only a warning", good(), append(calls(), CalledTool{ID: "e", Name: "Edit"}), []string{"nothing-edited"}, OutcomePass},
	}
	for _, tt := range tests {
		rs := s.Check(tt.fsys, tt.calls)
		if diff := cmp.Diff(tt.failed, failed(rs)); diff != "" {
			t.Errorf("%s: failed assertions (-want +got):\n%s", tt.name, diff)
		}
		if got := OutcomeOf(rs); got != tt.outcome {
			t.Errorf("%s: outcome %s, want %s", tt.name, got, tt.outcome)
		}
	}
}
