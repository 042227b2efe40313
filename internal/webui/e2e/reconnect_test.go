//go:build browser

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// liveStreamHook runs before the app in every document: it wraps fetch so
// that the test can cut the page's live event streams
// (GET /api/headless/sessions/{id}/events) and hold their reconnects.
// hold() aborts the open streams and keeps every new one waiting until
// release(); opened counts the streams the page started. serverState(id)
// polls the session's state (GET /api/headless/sessions/{id}) with the
// unwrapped fetch until pred(state) is true.
const liveStreamHook = `(() => {
  const orig = window.fetch.bind(window);
  const open = new Set();
  let held, release;
  const h = window.__live = {
    opened: 0,
    hold() {
      if (!held) held = new Promise((r) => (release = r));
      for (const c of open) c.abort();
      open.clear();
    },
    release() {
      if (release) release();
      held = undefined;
      release = undefined;
    },
    async serverState(id, pred) {
      for (;;) {
        const s = await (await orig("/api/headless/sessions/" + id, { cache: "no-store" })).json();
        if (pred(s)) return s.cursor;
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
  window.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input.url;
    if (!/\/api\/headless\/sessions\/[^/]+\/events/.test(url)) return orig(input, init);
    while (held) await held;
    const c = new AbortController();
    const outer = input instanceof Request ? input.signal : init && init.signal;
    if (outer) outer.addEventListener("abort", () => c.abort());
    open.add(c);
    h.opened++;
    return orig(new Request(input, { ...(init || {}), signal: c.signal }));
  };
})();`

// TestLiveSessionReconnect: the live session view resumes after its event
// stream is cut. The page's stream is cut and held (liveStreamHook) while
// the first answer streams (about 60 frames, within what an SSE stream may
// leave unread): on release the page reconnects from its cursor and shows
// the answer once and whole, no reset. Then the stream is held while the
// second answer streams 575 frames, more than that backlog: the reconnect
// gets a real reset{lagged}, which the page shows (banner and a marker in
// the log, the missed answer absent, not half-shown), and the third answer
// arrives after it, with a file attached through the prompt box's picker
// (uploaded into the workspace, loaded by the prompt). The cost widget
// shows the tokens the usage events carry.
func TestLiveSessionReconnect(t *testing.T) {
	t.Parallel()
	scenario, err := filepath.Abs(filepath.Join("testdata", "replay", "stream-drop.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, []string{"MAESTRO_MODEL=replay/" + scenario}, "--workers", "0")
	tb := newTab(t, s.url, liveStreamHook)
	tb.open("/sessions", "new-session-form")
	work := t.TempDir()
	tb.fill(tid("session-workspace"), work)
	tb.click("create-session")
	tb.wait("the session page, controlling", q("session-state", `[data-link="live"][data-controller="true"]`))
	id := eval[string](tb, "session id", `location.pathname.split("/").pop()`)
	const logText = `document.querySelector('[data-testid="event-log"]').textContent`
	texts := func() []string {
		return eval[[]string](tb, "the answers", `[...document.querySelectorAll('[data-testid="event-item"][data-kind="text"]')].map(e => e.textContent)`)
	}
	// prompt sends a prompt while the page's stream is held and waits
	// until the server has played the answer (the session's cursor moved
	// by at least frames and it no longer responds).
	prompt := func(text string, frames int) {
		t.Helper()
		before := eval[int](tb, "the server's cursor", fmt.Sprintf(`window.__live.serverState(%q, () => true)`, id))
		eval[bool](tb, "hold the page's event stream", `(window.__live.hold(), true)`)
		tb.wait("the page sees the drop", q("session-state", `[data-link="reconnecting"]`))
		tb.fill(tid("prompt"), text)
		tb.click("send-prompt")
		evalFor[int](tb, "the answer played on the server", fmt.Sprintf(`window.__live.serverState(%q, (s) => s.cursor >= %d && !s.state.is_responding)`, id, before+frames), 2*stepTimeout)
		eval[bool](tb, "release the page's event stream", `(window.__live.release(), true)`)
	}

	// 1: cut while the answer streams, resumed from the cursor.
	const first = "Part one streams while the page is cut off, and arrives whole."
	opened := eval[int](tb, "streams opened", `window.__live.opened`)
	prompt("stream the first answer", len(first))
	tb.wait("the first answer, whole", logText+`.includes(`+jsString(first)+`)`)
	tb.wait("live again", q("session-state", `[data-link="live"]`))
	if n := eval[int](tb, "streams opened", `window.__live.opened`); n <= opened {
		t.Errorf("the page opened %d event streams, want a reconnect after the cut (more than %d)", n, opened)
	}
	if got := texts(); len(got) != 1 || got[0] != first {
		t.Errorf("the answers after the reconnect: %q, want the first answer once and whole", got)
	}
	if gaps, dupes := tb.attr("event-log", "data-gaps"), tb.attr("event-log", "data-dupes"); gaps != "0" {
		t.Errorf("resets after a reconnect within the backlog: %s (duplicates dropped: %s), want 0", gaps, dupes)
	}
	if eval[bool](tb, "the reset banner", q("session-resets")+" !== null") {
		t.Errorf("a reset is shown after a reconnect within the backlog")
	}
	tb.wait("the cost widget counts the first answer's tokens", q("session-usage", `[data-input-tokens="1200"][data-output-tokens="300"]`))

	// 2: held past the backlog: a real reset{lagged}, shown as such.
	prompt("stream the long answer", 575)
	tb.wait("the reset is shown", q("session-resets")+` !== null && `+q("session-resets")+`.textContent.includes("lagged")`)
	tb.wait("live again after the reset", q("session-state", `[data-link="live"]`))
	if !eval[bool](tb, "the reset marker in the log", `[...document.querySelectorAll('[data-testid="event-item"]')].some(e => e.textContent.includes("reset (lagged)"))`) {
		t.Errorf("the log has no reset marker")
	}
	if got := texts(); len(got) != 1 || got[0] != first {
		t.Errorf("the answers after the reset: %q, want only the first (the long one was replaced by the snapshot, not half-shown)", got)
	}
	tb.shots("session-reset", "session-resets")

	// 3: the stream goes on after the reset; this prompt carries a file
	// chosen in the prompt box's picker, uploaded into the workspace.
	note := filepath.Join(t.TempDir(), "brief.md")
	if err := os.WriteFile(note, []byte("Ship on Friday.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb.run("choose a file to attach", chromedp.SetUploadFiles(chromedp.CSS(tid("attach-files")), []string{note}))
	tb.wait("the file is uploaded", q("attached-file", `[data-path=".maestro-attachments/brief.md"]`))
	if got, err := os.ReadFile(filepath.Join(work, ".maestro-attachments", "brief.md")); err != nil || string(got) != "Ship on Friday.\n" {
		t.Errorf("the uploaded file in the workspace: %q (%v)", got, err)
	}
	tb.shots("session-attachment", "prompt-form")
	tb.fill(tid("prompt"), "and then?")
	tb.click("send-prompt")
	tb.wait("the attachment reached the prompt", logText+`.includes("Loaded 1 attachment(s)")`)
	tb.wait("the answer after the reset", logText+`.includes("After the reset, the stream goes on.")`)
	// The widget sums the usage of the answers it saw (the first and the
	// third: 1200+300 in, 300+40 out) and says the reset skipped some.
	tb.wait("the cost widget after the reset", q("session-usage", `[data-input-tokens="1500"][data-output-tokens="340"][data-partial="true"]`))
	if u := eval[string](tb, "the cost widget", q("session-usage")+".textContent"); !strings.Contains(u, "1,500 tokens in / 340 out") || !strings.Contains(u, "cost ≥ $0.00") {
		t.Errorf("the cost widget says %q, want the tokens 1,500 in / 340 out and a cost marked as partial", u)
	}
	if eval[bool](tb, "attached files after sending", q("attached-file")+" !== null") {
		t.Errorf("the prompt box still lists the sent attachment")
	}
	if got := texts(); len(got) != 2 || got[1] != "After the reset, the stream goes on." {
		t.Errorf("the answers after the reset: %q", got)
	}
	if g := tb.attr("event-log", "data-gaps"); g != "1" {
		t.Errorf("resets counted: %s, want 1", g)
	}
	tb.axe("the live session after a reset")
	if strings.Contains(s.stderr.String(), "panic") {
		t.Errorf("serve panicked:\n%s", s.stderr)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string { return fmt.Sprintf("%q", s) }
