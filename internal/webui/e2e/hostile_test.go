//go:build browser

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// Content a real team produces, long and unbroken or hostile: what the
// other tests' tidy fixtures never show.
var (
	// longToken is a 5,000-character word (a hash, a base64 blob, a
	// minified line) in a tool's output, a comment or a description.
	longToken = "sha256-" + strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0", 140)[:4993]
	// deepPath is a workspace path of 40 directories.
	deepPath = "/srv/build/" + strings.Repeat("very-deeply-nested-directory/", 40) + "main.go"
	// mixedScript is right-to-left text, emoji and CJK.
	mixedScript = "مرحبا بالعالم — שלום עולם 🚀👩‍💻 日本語のテキスト"
	// hostileMarkdown tries to run script through every door Markdown
	// has: raw HTML, javascript: and data: links, a data: SVG image.
	hostileMarkdown = "<script>window.__pwned='script'</script>\n\n<img src=x onerror=\"window.__pwned='img'\">\n\n" +
		"[click me](javascript:window.__pwned='link') and [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) " +
		"![svg](data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIG9ubG9hZD0id2luZG93Ll9fcHduZWQ9J3N2ZyciLz4=)\n\n" +
		"<a href=\"javascript:alert(1)\">raw a</a> <iframe src=\"javascript:alert(1)\"></iframe>\n\n"
	// rtlComment is a comment in Arabic: it reads right to left, its full
	// stop at its end.
	rtlComment = "تم بناء المشروع بنجاح."
	// longName is the longest movement or piece name the validator takes
	// (64 characters).
	longName = strings.Repeat("implement-the-feature-", 3)[:64]
	// longWord is a piece or schedule name as long, with no hyphen to
	// break it at.
	longWord = strings.Repeat("implementthefeature", 4)[:64]
	// longWorker is a worker's name of one long word (a host name with
	// its domain, say).
	longWorker = "runner" + strings.Repeat("euwest1buildhostexamplecom", 4)
)

// longError is a 2 KB error message: a compiler's, quoting paths.
func longError() string {
	var b strings.Builder
	for b.Len() < 2048 {
		b.WriteString("error: " + deepPath + ":42: undefined: " + strings.Repeat("x", 80) + "; ")
	}
	return b.String()
}

// seedHostileTask stores, before serve starts, a task whose title,
// description, log, comment, error and deliverables hold long and hostile
// content, its job failed; it returns the task's id and the deliverable
// paths.
func seedHostileTask(t *testing.T, home string) (int64, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(home, "maestro.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	title := ("Investigate " + strings.Repeat("why the nightly build fails ", 10))[:260] + " " + mixedScript
	body := "Fix the build at `" + deepPath + "`.\n\n" + hostileMarkdown + mixedScript + "\n\n" + longToken + "\n"
	task, _, err := st.CreateTask(ctx, store.NewTask{Title: title, Body: body, Piece: "general"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := st.Claim(ctx, store.ClaimParams{Worker: "runner-" + strings.Repeat("eu-west-1-build-host-", 3), Limit: 1, LeaseFor: time.Hour})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v", err)
	}
	j, err := st.Start(ctx, jobs[0].Lease())
	if err != nil {
		t.Fatal(err)
	}
	var evs []store.NewJobEvent
	add := func(k store.JobEventKind, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, store.NewJobEvent{Type: k, Data: data})
	}
	run := func(kind string, data map[string]any) {
		add(store.JobEventRunEvent, map[string]any{"kind": kind, "data": data})
	}
	proto := func(v map[string]any) { add(store.JobEventProtocol, v) }
	run("run_started", map[string]any{"piece": "general", "initial_movement": longName, "max_movements": 10})
	run("movement_started", map[string]any{"movement": longName, "number": 1})
	proto(map[string]any{"type": "response_chunk", "response_id": "r1", "content": hostileMarkdown + mixedScript + "\n\n" + longToken})
	proto(map[string]any{"type": "tool_call", "call_id": "c1", "tool": "Bash", "args": map[string]any{"command": "cat " + deepPath}})
	proto(map[string]any{"type": "tool_start", "call_id": "c1"})
	proto(map[string]any{"type": "tool_output", "call_id": "c1", "content": longToken + "\n<script>window.__pwned='output'</script>\n"})
	proto(map[string]any{"type": "tool_end", "call_id": "c1", "success": false, "error": longError()})
	// An MCP tool's name: server and tool, of one long word each.
	proto(map[string]any{"type": "tool_call", "call_id": "c2", "tool": "mcp__" + longWord + "__" + longWord, "args": map[string]any{"query": longToken[:200]}})
	proto(map[string]any{"type": "tool_end", "call_id": "c2", "success": true})
	proto(map[string]any{"type": "error", "error_type": "provider_error", "message": longError()})
	run("complete", map[string]any{"status": "failure", "result": hostileMarkdown + longToken})
	if _, err := st.AppendJobEvents(ctx, j.Lease(), evs); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AddComment(ctx, store.NewComment{TaskID: task.ID, AuthorKind: "agent", Body: hostileMarkdown + longToken + "\n\n" + mixedScript}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AddComment(ctx, store.NewComment{TaskID: task.ID, AuthorKind: "user", Body: rtlComment}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Fail(ctx, j.Lease(), store.FailParams{Error: longError(), NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	// A second task whose job waits for the answer to a question that
	// quotes the long word.
	asking, _, err := st.CreateTask(ctx, store.NewTask{Title: "Ask", Piece: "general"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err = st.Claim(ctx, store.ClaimParams{Worker: "w", Limit: 1, LeaseFor: time.Hour})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if j, err = st.Start(ctx, jobs[0].Lease()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AddComment(ctx, store.NewComment{TaskID: asking.ID, AuthorKind: "agent", Body: "Which key should I rotate, " + longToken + "?"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Wait(ctx, j.Lease(), store.WaitParams{State: store.StateWaitingHuman, Reason: "a question"}); err != nil {
		t.Fatal(err)
	}
	// A third task, of the piece longWord, runs on the worker longWorker.
	if _, _, err := st.CreateTask(ctx, store.NewTask{Title: "Run the long piece", Piece: longWord}); err != nil {
		t.Fatal(err)
	}
	jobs, err = st.Claim(ctx, store.ClaimParams{Worker: longWorker, Limit: 1, LeaseFor: time.Hour})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if _, err := st.Start(ctx, jobs[0].Lease()); err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("nested-directory-name/", 8)
	files := map[string]string{
		`"quoted" & <img src=x onerror=alert(1)> 'name'.txt`: "quoted\n",
		deep + "first-result.md":                             "# one\n",
		deep + "second-result.md":                            "# two\n",
		"evil.svg":                                           `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="window.__pwned='svg'"><script>window.__pwned='svg'</script></svg>`,
		"evil.html":                                          "<script>window.__pwned='html'</script>",
	}
	var paths []string
	out := filepath.Join(home, "tasks", fmt.Sprint(task.ID), "work", "output")
	for p, content := range files {
		f := filepath.Join(out, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return task.ID, paths
}

// hostilePiece is a valid piece whose names are the longest the validator
// takes and whose persona is one long word.
func hostilePiece() string {
	return "name: " + longName + "\ndescription: " + jsonString(mixedScript+" "+longToken[:600]) + `
max_movements: 5
initial_movement: ` + longName + `
movements:
  - name: ` + longName + `
    edit: false
    persona: ` + jsonString(longToken[:400]) + `
    instruction: ` + jsonString(hostileMarkdown) + `
    allowed_tools: [Read]
    rules:
      - condition: the feature is implemented
        next: ` + longName[:63] + `b
  - name: ` + longName[:63] + `b
    edit: false
    persona: You check.
    instruction: Check it.
    allowed_tools: [Read]
    rules: []
`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestLongHostileContent: a task (its log, deliverables, comment and
// error, one in Arabic), a question, a stored agent CLI session's transcript, a live session's file
// search and a piece hold long, unbroken, right-to-left and hostile
// content (script in Markdown, HTML in file names). At 390 px and at
// desktop nothing runs, nothing makes a page scroll sideways, and nothing
// is cut with no way to read it. Before: the task's page was 694 px wide
// at 390 and log rows ran past the log's edge; deep paths (deliverables,
// found files) were cut before their file name; a prompt of one long word
// made the transcript 44,000 px wide; a movement's persona made the studio
// 3,600 px wide and its name ran out of its node.
func TestLongHostileContent(t *testing.T) {
	home := t.TempDir()
	id, paths := seedHostileTask(t, home)
	// A stored Claude Code session (the fixture of internal/agentcli)
	// whose first prompt holds the long word and the hostile Markdown.
	claude := filepath.Join(t.TempDir(), ".claude")
	if err := os.CopyFS(claude, os.DirFS(filepath.Join("..", "..", "agentcli", "testdata", "sessions", "claude-code-2.1.330", "home", ".claude"))); err != nil {
		t.Fatal(err)
	}
	session := filepath.Join(claude, "projects", "-home-dev-project", "5c111b77-2f28-4464-876b-07424286e449.jsonl")
	data, err := os.ReadFile(session)
	if err != nil {
		t.Fatal(err)
	}
	prompt := `"role":"user","content":"run echo maestro-tool-ok"`
	if !strings.Contains(string(data), prompt) {
		t.Fatalf("the fixture %s has no %s", session, prompt)
	}
	data = []byte(strings.Replace(string(data), prompt, `"role":"user","content":`+jsonString("run echo maestro-tool-ok "+longToken+"\n\n"+hostileMarkdown+mixedScript), 1))
	if err := os.WriteFile(session, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServeIn(t, home, []string{"CLAUDE_CONFIG_DIR=" + claude}, "--workers", "0")
	s.api(t, "POST", "/api/v1/pieces", map[string]string{"yaml": hostilePiece()}, nil)
	tb := newTab(t, s.url)

	// notWide fails the test when the page scrolls sideways at desktop
	// size (the harness checks 390 px).
	notWide := func(what string) {
		t.Helper()
		if w := eval[int](tb, "page width", `document.documentElement.scrollWidth`); w > 1280 {
			t.Errorf("%s at 1280 px: the page is %d px wide", what, w)
		}
	}
	// atPhone checks the page at 390 px as shots does, without its
	// screenshots and axe scans (CPU: the whole browser stage shares two
	// cores with the Go tests).
	atPhone := func(what string) {
		t.Helper()
		tb.run("viewport 390", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
		eval[chromedp.Void](tb, "let the page lay out", `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r())))`)
		tb.noSideways(what)
		tb.run("viewport desktop", chromedp.EmulateViewport(1280, 800))
	}
	noScript := func(what string) {
		t.Helper()
		if got := eval[string](tb, "what ran", `(() => {
			const bad = [...document.querySelectorAll("main script, main iframe, main img[onerror], main [onload], main a[href^='javascript:' i], main a[href^='data:' i], main a[href='']")].map(e => e.outerHTML.slice(0, 80));
			return [String(window.__pwned ?? ""), ...bad].filter(Boolean).join("; ");
		})()`); got != "" {
			t.Errorf("%s: hostile content got through: %s", what, got)
		}
	}

	tb.open(fmt.Sprintf("/tasks/%d", id), "event-log")
	tb.wait("the log is read", q("event-log")+`.getAttribute("data-connected") === "false" && `+q("event-log")+`.getAttribute("data-count") !== "0"`)
	for _, p := range paths {
		tb.wait("deliverable "+p, fmt.Sprintf(`[...document.querySelectorAll(%q)].some(r => r.dataset.path === %q)`, tid("deliverable-row"), p))
	}
	// An HTML or SVG deliverable never runs on the app's origin: it is
	// sent as an attachment, in a sandbox, its type not sniffed.
	for _, p := range []string{"evil.svg", "evil.html"} {
		h := eval[string](tb, "the headers of "+p, fmt.Sprintf(`fetch(%q).then(r => ["content-disposition", "content-security-policy", "x-content-type-options"].map(k => r.headers.get(k)).join(" | "))`, fmt.Sprintf("/api/v1/tasks/%d/deliverables/%s", id, p)))
		if want := "attachment; filename=" + p + " | sandbox | nosniff"; h != want {
			t.Errorf("deliverable %s is sent with %q, want %q", p, h, want)
		}
	}

	// A comment in Arabic is laid out right to left (aligned right, its
	// full stop on the left), in a page that is left to right.
	if got := eval[string](tb, "the Arabic comment", `(() => {
		const p = [...document.querySelectorAll('[data-testid="comment-item"] p')].find(p => p.textContent === `+jsonString(rtlComment)+`);
		if (!p) return "not shown";
		const r = document.createRange();
		r.selectNodeContents(p);
		const text = r.getBoundingClientRect(), box = p.getBoundingClientRect();
		r.setStart(p.firstChild, p.firstChild.length - 1);
		const stop = r.getBoundingClientRect();
		if (Math.abs(text.right - box.right) > 2) return "aligned left (text " + Math.round(text.left) + "-" + Math.round(text.right) + " in " + Math.round(box.left) + "-" + Math.round(box.right) + ")";
		if (stop.left > text.left + 2) return "its full stop on the right";
		return "";
	})()`); got != "" {
		t.Errorf("a comment in Arabic: %s", got)
	}

	// The log from its start, every tool call open: no row is wider than
	// the log (it would scroll sideways, a row's end out of sight).
	eval[chromedp.Void](tb, "scroll the log to its start", `(() => {
		document.querySelector('[data-testid="event-log"]').parentElement.querySelector('input[type="checkbox"]').click();
		document.querySelector('[data-testid="event-log"]').scrollTop = 0;
	})()`)
	tb.wait("the log shows its first events", q("event-item", `[data-id="1"]`))
	eval[chromedp.Void](tb, "open the tool calls", `document.querySelectorAll('[data-testid="event-log"] details').forEach(d => d.open = true)`)
	tb.shots("hostile-task", "event-log")
	notWide("the task's page")
	noScript("the task's page")
	for _, size := range []struct {
		w, h int64
		opts []chromedp.EmulateViewportOption
	}{{1280, 800, nil}, {390, 844, []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulatePortrait}}} {
		tb.run("viewport", chromedp.EmulateViewport(size.w, size.h, size.opts...))
		if got := eval[string](tb, "what is cut or too wide", `(() => {
			const out = [];
			const log = document.querySelector('[data-testid="event-log"]');
			if (log.scrollWidth > log.clientWidth + 1) out.push("the log scrolls sideways (" + log.scrollWidth + " px in " + log.clientWidth + ")");
			for (const r of document.querySelectorAll('[data-testid="deliverable-row"] > span:first-child')) {
				if (r.scrollWidth > r.clientWidth + 1 || r.innerText !== r.parentElement.dataset.path) out.push("deliverable " + JSON.stringify(r.parentElement.dataset.path) + " shows " + JSON.stringify(r.innerText));
			}
			for (const m of document.querySelectorAll('[data-testid="movement"]')) if (m.scrollWidth > m.clientWidth + 1) out.push("the movement card is " + m.scrollWidth + " px in " + m.clientWidth);
			return out.join("; ");
		})()`); got != "" {
			t.Errorf("the task's page at %d px: %s", size.w, got)
		}
	}
	tb.run("viewport desktop", chromedp.EmulateViewport(1280, 800))

	// A question quoting the long word, on a phone.
	tb.run("viewport 390", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	tb.open(fmt.Sprintf("/tasks/%d", id+1), "question-text")
	if w := eval[int](tb, "page width", `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("a task waiting for an answer, at 390 px: the page is %d px wide", w)
	}
	tb.run("viewport desktop", chromedp.EmulateViewport(1280, 800))

	// The stored session's transcript.
	tb.open("/agents?agent=claude-code", "agent-gates")
	tb.fill(tid("agent-project"), "/home/dev/project")
	tb.click("list-agent-sessions")
	tb.wait("the stored sessions", `document.querySelectorAll('[data-testid="agent-session"]').length === 2`)
	eval[chromedp.Void](tb, "open the session", `[...document.querySelectorAll('[data-testid="agent-session"] button')].find(b => b.textContent.includes("maestro-tool-ok")).click()`)
	tb.wait("the transcript", `[...document.querySelectorAll('[data-testid="transcript-message"]')].some(m => m.textContent.includes("sha256-"))`)
	atPhone("the transcript")
	notWide("the transcript")
	noScript("the transcript")

	// A live session's file panel finds the files of a deep directory:
	// each shows its whole path.
	ws := t.TempDir()
	for _, name := range []string{"first-result.md", "second-result.md"} {
		f := filepath.Join(ws, filepath.FromSlash(strings.Repeat("nested-directory-name/", 8)), name)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Files of long names alike but for their end, to attach or upload:
	// each shows its whole name.
	updir := t.TempDir()
	var upfiles []string
	for _, name := range []string{strings.Repeat("quarterly-revenue-report-", 6) + "draft.csv", strings.Repeat("quarterly-revenue-report-", 6) + "final.csv", strings.Repeat("x", 200) + ".csv"} {
		f := filepath.Join(updir, name)
		if err := os.WriteFile(f, []byte("a,b\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		upfiles = append(upfiles, f)
	}
	tb.open("/sessions", "new-session-form")
	tb.fill(tid("session-workspace"), ws)
	tb.click("create-session")
	tb.wait("the session page, controlling", q("session-state", `[data-link="live"][data-controller="true"]`))
	tb.fill(tid("file-query"), "result")
	eval[chromedp.Void](tb, "search", q("file-query")+`.form.requestSubmit()`)
	tb.wait("two files found", q("file-results")+`.querySelectorAll("button").length === 2`)
	tb.run("attach files", chromedp.SetUploadFiles(chromedp.CSS(tid("attach-files")), upfiles))
	tb.wait("the files attached", `document.querySelectorAll('[data-testid="attached-file"]').length === 3`)
	atPhone("the live session")
	if got := eval[string](tb, "attached file names shown", `[...document.querySelectorAll('[data-testid="attached-file"] > span')].filter(s => s.scrollWidth > s.clientWidth + 1 || s.getBoundingClientRect().right > s.closest("main").getBoundingClientRect().right + 1).map(s => JSON.stringify(s.innerText)).join(", ")`); got != "" {
		t.Errorf("the live session cuts the names of attached files: %s", got)
	}
	if got := eval[string](tb, "file paths shown", q("file-results")+`.querySelectorAll("button").values().filter(b => b.scrollWidth > b.clientWidth + 1 || !b.innerText.endsWith("-result.md")).map(b => JSON.stringify(b.innerText)).toArray().join(", ")`); got != "" {
		t.Errorf("the file panel cuts paths short: %s", got)
	}

	// A piece of the longest names: the catalog and the studio.
	tb.open("/pieces", "piece-row")
	tb.wait("the catalog lists it", q("piece-row", `[data-name="`+longName+`"]`))
	atPhone("the pieces catalog")
	notWide("the pieces catalog")
	tb.open("/pieces/"+longName, "piece-graph")
	tb.click("piece-node", `[data-name="`+longName+`"]`)
	tb.wait("the movement panel", q("movement-name")+`?.innerText === "`+longName+`"`)
	tb.shots("hostile-studio", "movement-panel")
	notWide("the studio")
	noScript("the studio")
	if got := eval[string](tb, "node labels", `[...document.querySelectorAll('[data-testid="piece-node"]')].filter(n =>
		n.querySelector("text").getComputedTextLength() > n.querySelector("rect").width.baseVal.value).map(n => n.dataset.name).join(", ")`); got != "" {
		t.Errorf("movement names wider than their node: %s", got)
	}

	// Names of one long word, with no hyphen to break them at: a piece
	// and a schedule, a task of that piece running on a worker of such a
	// name. Each page that shows them, at 390 px.
	s.api(t, "POST", "/api/v1/pieces", map[string]string{"yaml": "name: " + longWord + `
description: One long word.
max_movements: 2
initial_movement: ` + longWord + `
movements:
  - name: ` + longWord + `
    edit: false
    persona: You work.
    instruction: Work.
    allowed_tools: [Read]
    rules: []
`}, nil)
	s.api(t, "POST", "/api/v1/schedules", map[string]any{"name": longWord, "cron_expr": "0 9 * * 1", "title": "Report " + longToken[:300], "piece": longWord, "enabled": true}, nil)
	tb.open("/", "task-row")
	tb.wait("the task of the long piece", q("task-row")+`.parentElement.textContent.includes("`+longWord+`")`)
	atPhone("the task list")
	tb.open("/pieces", "piece-row")
	tb.wait("the catalog lists the long piece", q("piece-row", `[data-name="`+longWord+`"]`))
	atPhone("the pieces catalog, a name of one word")
	tb.open("/pieces/"+longWord, "piece-graph")
	tb.click("piece-node", `[data-name="`+longWord+`"]`)
	tb.wait("the movement panel", q("movement-name")+`?.innerText === "`+longWord+`"`)
	atPhone("the studio, a name of one word")
	if got := eval[string](tb, "node labels", `[...document.querySelectorAll('[data-testid="piece-node"]')].filter(n =>
		n.querySelector("text").getComputedTextLength() > n.querySelector("rect").width.baseVal.value).map(n => n.dataset.name + ": " + JSON.stringify(n.querySelector("text").textContent)).join(", ")`); got != "" {
		t.Errorf("movement names of one word wider than their node: %s", got)
	}
	tb.open("/schedules", "schedule-row")
	atPhone("the schedules")
	// Its title, cut to a line in the row, can be read whole.
	if got := eval[string](tb, "the schedule's title", q("schedule-row")+`.querySelector(".truncate")?.title ?? ""`); !strings.Contains(got, longToken[:300]) {
		t.Errorf("the schedule's title is cut with no way to read it whole (its tooltip is %q)", got)
	}
	tb.click("new-schedule-button")
	tb.wait("the schedule form", q("schedule-piece")+`.querySelector('option[value="`+longWord+`"]')`)
	atPhone("the schedule form")
	tb.open("/tasks/new?piece="+longWord, "new-task-piece")
	tb.wait("the piece chosen", q("new-task-piece")+`.value === "`+longWord+`"`)
	// Files to upload of long names alike but for their end: each shows
	// its whole name.
	tb.run("choose files", chromedp.SetUploadFiles(chromedp.CSS(tid("new-task-files")), upfiles))
	tb.wait("the files to upload", `document.querySelectorAll('[data-testid="upload-progress"]').length === 3`)
	atPhone("the new task form")
	if got := eval[string](tb, "file names shown", `[...document.querySelectorAll('[data-testid="upload-progress"]')].map(p => p.parentElement.firstElementChild).filter(s => s.scrollWidth > s.clientWidth + 1 || s.innerText !== s.parentElement.querySelector("progress").dataset.name).map(s => JSON.stringify(s.innerText)).join(", ")`); got != "" {
		t.Errorf("the new task form cuts the names of files to upload: %s", got)
	}
	tb.open(fmt.Sprintf("/tasks/%d", id+2), "event-log")
	tb.wait("its log shows the worker", q("event-log")+`.textContent.includes("`+longWorker+`")`)
	atPhone("the task of the long piece")
	tb.run("viewport 390", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	if got := eval[string](tb, "the log's width", `(() => { const l = document.querySelector('[data-testid="event-log"]'); return l.scrollWidth > l.clientWidth + 1 ? l.scrollWidth + " px in " + l.clientWidth : ""; })()`); got != "" {
		t.Errorf("the log of a task on a worker of a long name scrolls sideways at 390 px: %s", got)
	}
	tb.run("viewport desktop", chromedp.EmulateViewport(1280, 800))
	tb.open("/server", "worker-row")
	tb.wait("the long worker", `[...document.querySelectorAll('[data-testid="worker-row"]')].some(r => r.textContent.includes("`+longWorker+`"))`)
	// A store that does not answer: its error may name a long URL.
	eval[chromedp.Void](tb, "a long ready error", `[...document.querySelectorAll("dt")].find(d => d.textContent === "Ready").nextElementSibling.textContent = "unavailable: postgres://maestro@`+longWorker+`/maestro"`)
	atPhone("the server page")
	tb.open("/usage", "usage-from")
	atPhone("the usage page")
	tb.open("/sessions", "new-session-form")
	atPhone("the sessions page")
}
