package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// hostile is text a task's author, a commenter or a model can put in
// front of whoever reads the task: clear the screen, set the window
// title, write the clipboard (OSC 52), a colour (escaped but where
// the output is styled), a bare carriage return to write
// over the line, a C1 CSI.
const hostile = "\x1b[31mred \x1b[2J\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07safe\rEVIL\u009b1A end\r\n"

// TestTasksShowControlCharacters: `tasks show` and `tasks list` print a
// server's text with its control characters shown (^[, ^G, ^M, \u009b),
// never obeyed; they went to the terminal as sent.
func TestTasksShowControlCharacters(t *testing.T) {
	t.Parallel()
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task := `{"id":1,"title":` + q("title "+hostile) + `,"body":` + q(hostile) + `,"created_at":"2026-11-27T10:00:00Z","updated_at":"2026-11-27T10:00:00Z"}`
		switch r.URL.Path {
		case "/api/v1/tasks":
			fmt.Fprintf(w, `{"tasks":[%s]}`, task)
		case "/api/v1/tasks/1":
			fmt.Fprintf(w, `{"task":%s,"jobs":[{"id":1,"task_id":1,"state":"failed","attempt":1,"max_attempts":1,"error":%s,"result":%s}],
				"comments":[{"id":1,"task_id":1,"author_kind":"agent","author":"a","body":%s,"created_at":"2026-11-27T10:00:00Z"}]}`, task, q(hostile), q(hostile), q(hostile))
		case "/api/v1/tasks/1/deliverables":
			fmt.Fprintf(w, `{"files":[{"path":%s,"size":1,"modified":"2026-11-27T10:00:00Z"}]}`, q("out\x1b[2J.txt"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	env := map[string]string{"MAESTRO_SERVER": ts.URL}
	for _, args := range [][]string{{"tasks", "show", "1"}, {"tasks", "list"}} {
		code, out, errOut := runTasksCLI(t, env, args...)
		if code != 0 || strings.ContainsAny(out+errOut, "\x1b\x07\r\u009b") || !strings.Contains(out, "^[[2J^[]0;pwned^G") {
			t.Errorf("%s: exit %d, control characters not shown as text:\n%q\n%q", strings.Join(args, " "), code, out, errOut)
		}
	}
	code, out, _ := runTasksCLI(t, env, "tasks", "show", "1")
	if code != 0 || !strings.Contains(out, `safe^MEVIL\u009b1A end`+"\n") || !strings.Contains(out, "out^[[2J.txt") {
		t.Errorf("tasks show:\n%s", out)
	}
}

// TestJobLogControlCharacters: `tasks logs` shows the control characters
// of a job's events (an error, a comment, an agent's text) as text;
// renderLog writes through termSafe as the command does, and the golden
// files (TestJobLogGolden) check that the renderer's own styles pass.
func TestJobLogControlCharacters(t *testing.T) {
	t.Parallel()
	data, _ := json.Marshal(hostile)
	events := `{"job_id":1,"seq":1,"attempt":1,"type":"status","data":{"state":"failed","attempt":1,"error":` + string(data) + `},"created_at":"2026-11-27T10:00:00Z"}
{"job_id":1,"seq":2,"attempt":1,"type":"comment","data":{"comment_id":1,"author_kind":"user","author":"u","body":` + string(data) + `},"created_at":"2026-11-27T10:00:00Z"}
`
	for _, tty := range []bool{false, true} {
		got := renderLog(t, []byte(events), &IOStreams{OutTTY: tty, Getenv: func(string) string { return "" }}, false)
		if strings.ContainsAny(got, "\x07\r\u009b") || strings.Count(got, "^[[2J^[]0;pwned^G") != 2 || strings.Contains(strings.ReplaceAll(got, "\x1b[", ""), "\x1b") {
			t.Errorf("terminal %v: control characters not shown as text:\n%q", tty, got)
		}
	}
}

// TestTasksDownloadNamedFromEmptyOutput: a path asked of a task with no
// deliverable says output/ is empty; it said "(output/ holds: -)".
func TestTasksDownloadNamedFromEmptyOutput(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"files":[]}`)
	}))
	t.Cleanup(ts.Close)
	code, _, errOut := runTasksCLI(t, map[string]string{"MAESTRO_SERVER": ts.URL}, "tasks", "download", "4", "report.md", "-o", t.TempDir())
	if code != 1 || errOut != "maestro: task 4: no deliverable \"report.md\": output/ is empty\n" {
		t.Errorf("exit %d:\n%s", code, errOut)
	}
}

// TestRunRendererControlCharacters: `maestro run` shows the control
// characters of what the model says (text and thinking) and of what a tool
// prints as text; they reached the terminal as sent, so a model, or a file
// a tool read, could clear the screen or write the clipboard of the user
// watching the run. On a colour terminal the renderer's own styles pass.
func TestRunRendererControlCharacters(t *testing.T) {
	t.Parallel()
	for _, tty := range []bool{false, true} {
		var out, errOut bytes.Buffer
		r := newRenderer(&IOStreams{Out: &out, ErrOut: &errOut, ErrTTY: tty, Getenv: func(string) string { return "" }}, false)
		r.spin = nil // the spinner animates on a goroutine of its own
		r.Event(protocol.ResponseChunk{Content: "thought " + hostile, IsThinking: true})
		r.Event(protocol.ResponseChunk{Content: "said " + hostile + "split\r"})
		r.Event(protocol.ResponseChunk{Content: "\nnext\rover"})
		r.Event(protocol.ToolCall{CallID: "c1", Tool: "Bash\x1b[2J", Args: json.RawMessage(`{"command":"cat x\u001b]0;t\u0007"}`)})
		r.Event(protocol.ToolOutput{CallID: "c1", Content: "out " + hostile})
		r.Event(protocol.ToolEnd{CallID: "c1", Success: false})
		r.Event(protocol.Status{Message: "status " + hostile})
		r.Event(protocol.ResponseEnd{})
		got := out.String() + errOut.String()
		if strings.ContainsAny(got, "\x07\r\u009b") || strings.Contains(strings.ReplaceAll(got, "\x1b[", ""), "\x1b") {
			t.Errorf("terminal %v: control characters obeyed:\n%q", tty, got)
		}
		if n := strings.Count(got, "^[[2J^[]0;pwned^G"); n < 4 {
			t.Errorf("terminal %v: the hostile text shown %d times, want 4 (thinking, text, tool output, status):\n%q", tty, n, got)
		}
		if !strings.Contains(out.String(), "split\nnext^Mover") {
			t.Errorf("terminal %v: a CRLF parted between chunks, or a bare CR, not as expected:\n%q", tty, out.String())
		}
		for _, seq := range []string{"\x1b[2J", "\x1b]"} {
			if strings.Contains(got, seq) {
				t.Errorf("terminal %v: %q reached the terminal", tty, seq)
			}
		}
		if styled := strings.Contains(errOut.String(), "\x1b[36m●\x1b[0m"); styled != tty {
			t.Errorf("terminal %v: the renderer's own styles passed: %v\n%q", tty, styled, errOut.String())
		}
	}
}

// TestSessionsControlCharacters: `sessions list` and `sessions show` print
// a session's prompt, the model's answers and tool output with their
// control characters shown; they went to the terminal as stored.
func TestSessionsControlCharacters(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	sess, err := session.NewStore(filepath.Join(home, "sessions")).Create(session.Meta{Workspace: t.TempDir(), Provider: "openai", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	sess.Message(llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "prompt " + hostile}}})
	sess.Message(llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: "answer " + hostile}}})
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"sessions", "list"}, {"sessions", "show", sess.ID()}} {
		r := runCLI(t, map[string]string{"MAESTRO_HOME": home}, args...)
		if r.code != 0 || strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07\r\u009b") || (args[1] == "show" && strings.Count(r.stdout, "^[[2J^[]0;pwned^G") != 2) {
			t.Errorf("%s: exit %d, control characters not shown as text:\n%q\n%q", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}
