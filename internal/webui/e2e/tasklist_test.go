//go:build browser

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestTaskListFilterAndSearch: three tasks; the task list's state filter
// and text search (sent to the server, docs/api.md) show exactly the
// matching rows, and clearing them shows all three again.
func TestTaskListFilterAndSearch(t *testing.T) {
	s := startServe(t, nil, "--workers", "0")
	create := func(title, body string) (task, job int64) {
		t.Helper()
		var out struct {
			Task struct{ ID int64 } `json:"task"`
			Job  struct{ ID int64 } `json:"job"`
		}
		s.api(t, "POST", "/api/v1/tasks", map[string]string{"title": title, "body": body}, &out)
		return out.Task.ID, out.Job.ID
	}
	fix, fixJob := create("Fix login bug", "")
	docs, _ := create("Write docs", "The LOGIN page needs screenshots")
	deploy, _ := create("Deploy", "")
	s.api(t, "POST", fmt.Sprintf("/api/v1/jobs/%d/cancel", fixJob), nil, nil)

	tb := newTab(t, s.url)
	tb.open("/", "task-row")
	rowsAre := func(what string, want ...int64) {
		t.Helper()
		ids := make([]string, len(want))
		for i, id := range want {
			ids[i] = strconv.FormatInt(id, 10)
		}
		expr := fmt.Sprintf(`[...document.querySelectorAll(%q)].map(r => r.getAttribute("data-task-id")).join(",") === %q`, tid("task-row"), strings.Join(ids, ","))
		tb.wait(what+": rows "+strings.Join(ids, ","), expr)
	}
	rowsAre("unfiltered", deploy, docs, fix)

	// The first Tab shows "Skip to content" over the header, readable (it
	// was transparent over "Maestro", its focus ring cut by the window's
	// edge); Enter on it puts the focus in the page's content.
	tb.run("Tab", chromedp.KeyEvent(kb.Tab))
	if got := eval[string](tb, "the skip link", `(() => {
		const a = document.activeElement;
		if (a?.getAttribute("href") !== "#main") return "the first Tab focused " + (a?.outerHTML ?? "nothing").slice(0, 80);
		const r = a.getBoundingClientRect(), out = [];
		if (getComputedStyle(a).backgroundColor === "rgba(0, 0, 0, 0)") out.push("its background is transparent");
		if (document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)?.closest('a[href="#main"]') !== a) out.push("something is drawn over it");
		if (r.left < 4 || r.top < 4) out.push("its focus ring is cut by the window's edge (at " + Math.round(r.left) + "," + Math.round(r.top) + ")");
		return out.join("; ");
	})()`); got != "" {
		t.Errorf("Skip to content: %s", got)
	}
	tb.run("Enter", chromedp.KeyEvent(kb.Enter))
	tb.wait("the focus in the page's content", `document.activeElement === document.querySelector("main")`)

	// asked waits until the app has asked the server for tasks with every
	// part of a query (the filter is the server's, not the page's).
	asked := func(parts ...string) {
		t.Helper()
		tb.wait("GET /api/v1/tasks with "+strings.Join(parts, " and "), fmt.Sprintf(
			`performance.getEntriesByType("resource").some(e => e.name.includes("/api/v1/tasks?") && %s.every(p => e.name.includes(p)))`,
			jsonList(parts)))
	}
	tb.selectValue(tid("task-filter-state"), "cancelled")
	asked("state=cancelled")
	rowsAre("state cancelled", fix)
	if st := tb.attr("task-row", "data-status"); st != "cancelled" {
		t.Errorf("cancelled row has status %q", st)
	}
	// Back from a task, and a reload, show the list as it was filtered:
	// the filter was the page's state, and Back showed every task.
	tb.run("open the task", chromedp.Click(chromedp.CSS(tid("task-row")+" a"), chromedp.NodeVisible))
	tb.wait("the task's page", q("task-title"))
	tb.run("go back", chromedp.NavigateBack())
	rowsAre("back from the task: state cancelled", fix)
	tb.run("reload", chromedp.Reload())
	rowsAre("reloaded: state cancelled", fix)
	if v := eval[string](tb, "the state filter", q("task-filter-state")+".value"); v != "cancelled" {
		t.Errorf("after Back and reload the state filter shows %q, want cancelled", v)
	}
	tb.selectValue(tid("task-filter-state"), "queued")
	rowsAre("state queued", deploy, docs)

	tb.fill(tid("task-search"), "login")
	asked("state=queued", "q=login")
	rowsAre("state queued, search login", docs)
	tb.selectValue(tid("task-filter-state"), "")
	rowsAre("search login", docs, fix)

	tb.fill(tid("task-search"), strconv.FormatInt(deploy, 10))
	rowsAre("search by id", deploy)
	tb.fill(tid("task-search"), "no such words")
	tb.wait("no rows", `document.querySelectorAll(`+strconv.Quote(tid("task-row"))+`).length === 0 && document.body.innerText.includes("No tasks.")`)

	tb.fill(tid("task-search"), "")
	rowsAre("cleared", deploy, docs, fix)

	// A long title without a break wraps on a phone: the task's page was
	// as wide as the title (1,000 px at 390).
	long, _ := create("Rename "+strings.Repeat("the_very_long_identifier_", 8)+"everywhere", "")
	tb.open(fmt.Sprintf("/tasks/%d", long), "task-title")
	tb.shots("task-long-title")
}

// jsonList is a JavaScript array literal of strings.
func jsonList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}
