//go:build browser

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// stepsScenario runs n short Bash calls, then completes: a log that grows
// by a row every tenth of a second or so.
func stepsScenario(n int) string {
	var b strings.Builder
	b.WriteString(`{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"steps","description":"many steps",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Bash","complete"]},"frames":[`)
	for i := range n {
		fmt.Fprintf(&b, `{"index":%d,"statements":[{"kind":"tool_call","tool":"Bash","input":{"command":"sleep 0.1; echo step %d"}}]},`, i, i)
	}
	fmt.Fprintf(&b, `{"index":%d,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"done"}}]}]}`, n)
	return b.String()
}

// TestLogRowKeepsFocus: a keyboard user tabs from the log of a running
// task to its first tool call's summary while rows keep coming. The log
// stops following (the user is reading), so the row stays drawn and keeps
// the focus: the log went on to its end, the row, out of view, left the
// DOM (only rows in view are drawn) and the focus fell on <body>.
func TestLogRowKeepsFocus(t *testing.T) {
	s := startServe(t, nil, "--workers", "1")
	tb := newTab(t, s.url)
	id := newTask(tb, "Many steps", "", stepsScenario(50))
	tb.waitFor("the first rows", `document.querySelectorAll('`+tid("tool-call")+`').length >= 4`, 2*time.Minute)
	eval[bool](tb, "focus the log", `(`+q("event-log")+`.focus(), true)`)
	tb.run("Tab to the first row", chromedp.KeyEvent(kb.Tab))
	focused := `document.activeElement.matches('` + tid("tool-call") + `') && document.activeElement.textContent.includes("echo step 0")`
	if !eval[bool](tb, "the first row has the focus", focused) {
		t.Fatalf("Tab from the log went to %s, not the first tool call", eval[string](tb, "focus", `document.activeElement.outerHTML.slice(0, 120)`))
	}
	tb.waitStatus("succeeded", 2*time.Minute)
	tb.checkLog(s, id)
	if !eval[bool](tb, "the first row still has the focus", focused) {
		t.Errorf("once the rows came, the focus was on %s, not on the row the user tabbed to", eval[string](tb, "focus", `document.activeElement.tagName`))
	}
	if eval[bool](tb, "Follow", `!!`+q("log-follow")+`?.checked`) {
		t.Error("the log still follows its end while a row of it has the focus")
	}
}
