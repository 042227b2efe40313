//go:build browser

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestLiveSessionApprovals: a live session on a replay scenario of two
// prompts (testdata/replay/two-prompts.yaml, the server's default model),
// each asking to Write one file, which needs approval in mode prompt. The
// first prompt's request, shown as a dialog, is approved: the tool runs and
// the file exists. The second prompt's request, set aside with Escape and
// opened again, is denied with a reason: the denial shows in the log and
// the file is not written. A viewer attached
// from the start sees the same stream and has no prompt box.
func TestLiveSessionApprovals(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	scenario, err := filepath.Abs(filepath.Join("testdata", "replay", "two-prompts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, []string{"MAESTRO_MODEL=replay/" + scenario}, "--workers", "0")
	tb := newTab(t, s.url)
	tb.open("/sessions", "new-session-form")
	tb.fill(tid("session-workspace"), work)
	tb.click("create-session")
	tb.wait("the session page, controlling", q("session-state", `[data-link="live"][data-controller="true"]`))
	id := eval[string](tb, "session id", `location.pathname.split("/").pop()`)

	viewer := newTab(t, s.url)
	viewer.open("/sessions/"+id+"?role=viewer", "session-state")
	viewer.wait("the viewer is live", q("session-state", `[data-link="live"][data-role="viewer"]`))
	if eval[bool](viewer, "prompt box of the viewer", q("prompt-form")+" !== null") {
		t.Errorf("the viewer has a prompt box")
	}

	writes := func(status string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('[data-testid="tool-call"][data-tool="Write"]')].filter(e => e.dataset.status === %q).length`, status)
	}
	tb.fill(tid("prompt"), "write the first file")
	tb.click("send-prompt")
	tb.wait("the first prompt's approval dialog", q("request-dialog", `[open][data-request-type="approval"]`))
	if tool := eval[string](tb, "requested tool", q("request-tool")+".textContent"); tool != "Write" {
		t.Fatalf("approval for %q, want Write", tool)
	}
	if args := eval[string](tb, "requested args", q("request-args")+".textContent"); !strings.Contains(args, "first.txt") {
		t.Fatalf("approval args %q do not name the file", args)
	}
	tb.shots("session-approval", "request-dialog")
	// An MCP tool's name is one long word (mcp__<server>__<tool>, 64
	// characters at most): at 390 px it wraps inside the dialog. It ran
	// out of it, the dialog scrolling sideways.
	tb.run("viewport 390", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	if got := eval[string](tb, "a long tool name in the dialog", `(async () => {
		const tool = `+q("request-tool")+`, was = tool.textContent;
		tool.textContent = "mcp__filesystem__" + "a".repeat(47);
		await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r())));
		const d = `+q("request-dialog")+`, out = [];
		if (d.scrollWidth > d.clientWidth + 1) out.push("the dialog scrolls sideways (" + d.scrollWidth + " px in " + d.clientWidth + ")");
		if (tool.getBoundingClientRect().right > d.getBoundingClientRect().right + 1) out.push("the name ends at x " + Math.round(tool.getBoundingClientRect().right) + ", the dialog at " + Math.round(d.getBoundingClientRect().right));
		tool.textContent = was;
		return out.join("; ");
	})()`); got != "" {
		t.Errorf("an approval of a tool of a 64-character name at 390 px: %s", got)
	}
	tb.run("viewport desktop", chromedp.EmulateViewport(1280, 800))
	tb.click("approve")
	tb.wait("the approved Write ran", writes("succeeded")+" === 1")
	tb.wait("the first prompt's answer", `document.querySelector('[data-testid="event-log"]').textContent.includes("The first file is written.")`)
	if _, err := os.Stat(filepath.Join(work, "first.txt")); err != nil {
		t.Errorf("the approved Write did not write its file: %v", err)
	}

	tb.fill(tid("prompt"), "write the second file")
	tb.click("send-prompt")
	tb.wait("the second prompt's approval dialog", fmt.Sprintf(`%s && %s.textContent.includes("second.txt")`, q("request-dialog", "[open]"), q("request-args")))
	// Escape sets the request aside, unanswered (it did nothing: the
	// modal dialog hid the log until answered); the state bar offers it
	// again.
	tb.fill(tid("request-reason"), "not this one")
	tb.run("press Escape", chromedp.KeyEvent(kb.Escape))
	tb.wait("the request set aside", q("request-dialog", "[open]")+` === null && `+q("show-request"))
	tb.shots("session-request-aside", "session-state")
	tb.click("show-request")
	tb.wait("the request shown again", q("request-dialog", "[open]")+` && `+q("request-args")+`.textContent.includes("second.txt")`)
	tb.fill(tid("request-reason"), "not this one")
	tb.click("deny")
	denied := `[...document.querySelectorAll('[data-testid="event-item"]')].some(e => e.textContent.includes("approval denied by user: not this one"))`
	tb.wait("the denial shows", denied)
	tb.wait("the denied Write failed", writes("failed")+" === 1")
	tb.wait("the second prompt's answer", `document.querySelector('[data-testid="event-log"]').textContent.includes("The second write was denied")`)
	tb.shots("session-live", "prompt-form")
	if _, err := os.Stat(filepath.Join(work, "second.txt")); !os.IsNotExist(err) {
		t.Errorf("the denied Write's file: %v, want it absent", err)
	}

	// The viewer saw the same stream: both answers, the denial.
	viewer.wait("the viewer sees the answers", `document.querySelector('[data-testid="event-log"]').textContent.includes("The first file is written.") && document.querySelector('[data-testid="event-log"]').textContent.includes("The second write was denied")`)
	viewer.wait("the viewer sees the denial", denied)
	if eval[bool](viewer, "dialog of the viewer", q("request-dialog", "[open]")+" !== null") {
		t.Errorf("the viewer was shown an approval dialog")
	}
	viewer.shots("session-viewer")

	tb.open("/sessions", "session-row")
	tb.shots("sessions")
}

// TestAgentCapabilityGates: the Agent CLIs page lists a user-defined
// adapter (testdata/agents/fake-noresume.yaml) with its source; its stored
// sessions (Claude Code's storage, the fixture of internal/agentcli) open
// as a transcript without the resume buttons, which Claude Code's own
// definition (resume: true) shows for the same session.
func TestAgentCapabilityGates(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	def, err := os.ReadFile(filepath.Join("testdata", "agents", "fake-noresume.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "agents", "fake-noresume.yaml"), def, 0o644); err != nil {
		t.Fatal(err)
	}
	// The sessions are read from a copy under a long directory name with no
	// place to break a line, whatever the checkout's path: the transcript
	// shows the session file's path, which must wrap on a phone (a path
	// one word longer than the screen once made the page scroll sideways).
	claude := filepath.Join(t.TempDir(), "astoragedirectorynamelongerthanaphonescreeniswidewithoutahyphen", ".claude")
	if err := os.CopyFS(claude, os.DirFS(filepath.Join("..", "..", "agentcli", "testdata", "sessions", "claude-code-2.1.330", "home", ".claude"))); err != nil {
		t.Fatal(err)
	}
	// A stand-in claude on PATH makes the server list claude-code as
	// installed, so that a task may name it (no worker runs it).
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\necho '2.1.330 (Claude Code)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServeIn(t, home, []string{"CLAUDE_CONFIG_DIR=" + claude, "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, "--workers", "0")
	tb := newTab(t, s.url)
	tb.open("/agents", "agent-row")
	tb.wait("the user adapter is listed as a user file", `[...document.querySelectorAll('[data-testid="agent-row"]')].some(r => r.dataset.id === "fake-noresume" && r.textContent.includes("user file"))`)
	tb.shots("agents")

	openTranscript := func(agent string) {
		t.Helper()
		tb.open("/agents?agent="+agent, "agent-gates")
		tb.fill(tid("agent-project"), "/home/dev/project")
		tb.click("list-agent-sessions")
		tb.wait(agent+": two stored sessions", `document.querySelectorAll('[data-testid="agent-session"]').length === 2`)
		tb.click("agent-session", " button")
		tb.wait(agent+": the transcript", `document.querySelectorAll('[data-testid="transcript-message"]').length > 0`)
	}
	openTranscript("fake-noresume")
	if eval[bool](tb, "resume buttons of fake-noresume", q("resume-controls")+" !== null") {
		t.Errorf("fake-noresume (resume: false) shows the resume buttons")
	}
	tb.shots("agent-transcript", "transcript")
	openTranscript("claude-code")
	tb.wait("claude-code (resume: true) shows the resume buttons", q("resume-task")+" !== null")

	// Resume as a task: a task on claude-code whose job resumes the opened
	// session (agent_session), with the request as its body.
	var sessions struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	s.api(t, "GET", "/api/v1/agents/claude-code/sessions?project=/home/dev/project", nil, &sessions)
	opened := eval[string](tb, "the opened session", q("agent-session")+`.dataset.id ?? ""`)
	tb.fill(tid("resume-request"), "carry on")
	tb.click("resume-task")
	tb.wait("the new task's page", `/^\/tasks\/\d+$/.test(location.pathname)`)
	id := eval[string](tb, "task id", `location.pathname.split("/").pop()`)
	var detail struct {
		Task struct {
			Body string `json:"body"`
		} `json:"task"`
		Jobs []struct {
			Payload struct {
				Executor     string `json:"executor"`
				Agent        string `json:"agent"`
				AgentSession string `json:"agent_session"`
			} `json:"payload"`
		} `json:"jobs"`
	}
	s.api(t, "GET", "/api/v1/tasks/"+id, nil, &detail)
	if len(detail.Jobs) != 1 || detail.Task.Body != "carry on" {
		t.Fatalf("the resumed task: %+v", detail)
	}
	pl := detail.Jobs[0].Payload
	known := false
	for _, ss := range sessions.Sessions {
		known = known || ss.ID == pl.AgentSession
	}
	if pl.Executor != "agent-cli" || pl.Agent != "claude-code" || !known || (opened != "" && pl.AgentSession != opened) {
		t.Errorf("the resumed task's job payload %+v, want agent-cli on claude-code resuming the opened session %q of %+v", pl, opened, sessions.Sessions)
	}
}
