//go:build browser

package e2e

import (
	"net"
	"testing"
	"time"
)

// downHook runs before the app in every document: it wraps fetch so that
// the test can make the server seem stopped to the page. down() aborts the
// open streams and makes every API call fail as the browser's does when
// nothing answers (a TypeError); up() lets them through again.
const downHook = `(() => {
  const orig = window.fetch.bind(window);
  const open = new Set();
  let isDown = false;
  window.__server = {
    down() {
      isDown = true;
      for (const c of open) c.abort();
      open.clear();
    },
    up() { isDown = false; },
  };
  window.fetch = async (input, init) => {
    if (isDown) throw new TypeError("Failed to fetch");
    const c = new AbortController();
    const outer = input instanceof Request ? input.signal : init && init.signal;
    if (outer) outer.addEventListener("abort", () => c.abort());
    open.add(c);
    return orig(new Request(input, { ...(init || {}), signal: c.signal }));
  };
})();`

// TestTaskPageServerDown: a task waits for an answer; the user has typed
// one, and a comment, when the server stops answering. The task's page
// stays (title, question, log, what was typed) under an error saying the
// server does not answer, and the log says it is reconnecting; once the
// server answers again the error goes, the log is live again, and the
// answer typed before sends and resumes the task to success.
func TestTaskPageServerDown(t *testing.T) {
	s := startServe(t, nil, "--workers", "1")
	tb := newTab(t, s.url, downHook)
	id := newTask(tb, "Paint the fence", "", askScenario)
	tb.waitFor("the question is shown", q("question-text")+`?.textContent.includes("Which colour")`, 2*time.Minute)
	tb.fill(tid("answer-input"), "blue")
	tb.fill("#comment-input", "a note for later")

	eval[bool](tb, "stop the server", `(window.__server.down(), true)`)
	tb.wait("the page says the server does not answer", q("task-unreachable")+`?.textContent.includes("The server does not answer")`)
	for what, expr := range map[string]string{
		"the title":             q("task-title") + `?.textContent.includes("Paint the fence")`,
		"the question":          q("question-text") + `?.textContent.includes("Which colour")`,
		"the answer typed":      q("answer-input") + `?.value === "blue"`,
		"the comment typed":     `document.querySelector("#comment-input")?.value === "a note for later"`,
		"the log, reconnecting": q("event-log-state") + `?.textContent.includes("reconnecting")`,
		"no 'Task N' page":      `!` + q("task-missing"),
	} {
		if !eval[bool](tb, what, `!!(`+expr+`)`) {
			t.Errorf("with the server stopped, the task's page lost %s", what)
		}
	}
	tb.shots("server-down", "task-unreachable")

	eval[bool](tb, "start the server", `(window.__server.up(), true)`)
	tb.waitFor("the error goes", `!`+q("task-unreachable"), 2*time.Minute)
	tb.click("answer-submit")
	tb.waitFor("the task succeeds", q("task-status")+`?.getAttribute("data-status") === "succeeded"`, 2*time.Minute)
	tb.checkLog(s, id)
	if v := eval[string](tb, "the comment box", `document.querySelector("#comment-input").value`); v != "a note for later" {
		t.Errorf("the comment being written is %q after the server came back, want %q", v, "a note for later")
	}
}

// TestServeRestart: maestro serve is stopped (SIGTERM) while a task runs
// in one tab and a live session is open in another, and started again on
// the same address and store. While it is down the task's page keeps the
// task under "The server does not answer" and its log reconnects; once it
// is back the error goes and the log follows the job again. The session
// ended with its serve: its page says so with the server's reason and
// closes the prompt box (it said "○ reconnecting…" for ever, the prompt
// open, "you control this session").
func TestServeRestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	home := t.TempDir()
	args := []string{"--workers", "1", "--listen", addr}
	s := startServeIn(t, home, nil, args...)
	task := newTab(t, s.url)
	newTask(task, "Tick until cancelled", "", tickScenario)
	task.waitFor("the tool call runs", q("tool-call", `[data-tool="Bash"]`), 2*time.Minute)
	session := newTab(t, s.url)
	session.open("/sessions", "new-session-form")
	session.click("create-session")
	session.wait("the session page, controlling", q("session-state", `[data-link="live"][data-controller="true"]`))

	s.stop()
	task.wait("the task's page says the server does not answer", q("task-unreachable")+`?.textContent.includes("The server does not answer")`)
	task.wait("its log reconnects", q("event-log-state")+`?.textContent.includes("reconnecting")`)
	if !eval[bool](task, "the task shown", `!!`+q("task-title")+`?.textContent.includes("Tick until cancelled")`) {
		t.Error("with serve stopped, the task's page lost the task")
	}
	task.shots("serve-stopped", "task-unreachable")

	startServeIn(t, home, nil, args...)
	task.wait("the error goes", `!`+q("task-unreachable"))
	task.wait("the log follows the job again", `!`+q("event-log-state")+`.textContent.includes("connecting")`)
	session.wait("the session says it ended", q("session-state", `[data-link="ended"]`))
	for what, expr := range map[string]string{
		"the server's reason": q("session-error") + `?.textContent.includes("ended")`,
		"the prompt closed":   q("prompt") + `?.disabled`,
		"no lease claimed":    `!` + q("lease-state") + `.textContent.includes("you control")`,
	} {
		if !eval[bool](session, what, `!!(`+expr+`)`) {
			t.Errorf("the session's page, its serve restarted: not %s", what)
		}
	}
	session.shots("session-ended", "session-state")
}
