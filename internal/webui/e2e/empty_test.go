//go:build browser

package e2e

import (
	"strings"
	"testing"
)

// TestFirstVisit: a new server (no task, no schedule) opened at each page
// a first visit reaches, and at addresses that lead nowhere. Each says
// what it is and the way on, at 1280 and 390 px: the task list said only
// "No tasks.", the schedules "No schedules.", a task the server does not
// have "get task 99: not found" (a bad id "Bad task id.") and an unknown
// address "No such page.", none with a heading or a link.
func TestFirstVisit(t *testing.T) {
	s := startServe(t, nil, "--workers", "0")
	tb := newTab(t, s.url)
	for _, c := range []struct {
		path, testid, says, link, name string
	}{
		{"/", "task-list-empty", "No tasks yet.", "/tasks/new", "first-tasks"},
		{"/schedules", "schedule-list-empty", "No schedules yet.", "", "first-schedules"},
		{"/tasks/99", "task-missing", "This server has no task 99", "/", "first-task-99"},
		{"/tasks/abc", "task-missing", "abc is not a task id", "/", ""},
		{"/nope/x", "no-such-page", "This console has no page /nope/x", "/", "first-unknown"},
	} {
		tb.open(c.path, c.testid)
		tb.wait(c.path+" has loaded", q(c.testid)+`.innerText.includes(`+jsString(c.says)+`)`)
		if c.link != "" {
			if got := eval[string](tb, "the way on of "+c.path, `(document.querySelector("main a[href='`+c.link+`']")?.innerText ?? "")`); strings.TrimSpace(got) == "" {
				t.Errorf("%s: no link to %s in the page", c.path, c.link)
			}
		}
		if c.name != "" {
			tb.shots(c.name)
		}
	}
}
