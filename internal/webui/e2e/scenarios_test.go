//go:build browser

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// hooks runs before the app in every document: long tasks (> 50 ms, the
// browser's threshold) and the moment the task list first shows.
const hooks = `(() => {
  const m = window.__maestro = {longTasks: [], taskList: 0};
  try {
    new PerformanceObserver(l => { for (const e of l.getEntries()) m.longTasks.push(e.duration); })
      .observe({type: "longtask", buffered: true});
  } catch (e) {}
  const mark = () => {
    if (!m.taskList && document.querySelector('[data-testid="task-list"]')) m.taskList = performance.now();
  };
  new MutationObserver(mark).observe(document, {subtree: true, childList: true});
})();`

// Budgets of issue 17 (docs/web-ui.md).
const (
	budgetFirstLoadBytes = 250 << 10
	budgetInteractive    = time.Second
	budgetLongTask       = 100 // ms
)

// Replay scenarios the tasks play (scripted model turns, real tools).
const (
	// summariseScenario reads the uploaded brief and writes a markdown
	// deliverable.
	summariseScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"summarise","description":"read the brief, write a summary",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Read","Write","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Read","input":{"path":"input/brief.txt"},"expectedResult":"success"}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"Write","input":{"path":"output/summary.md","content":"# Summary\n\nThe brief asks for **two paragraphs**.\n"}}]},
{"index":2,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"Wrote output/summary.md"}}]}
]}`
	// askScenario asks which colour, then writes the answer's file.
	askScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"ask-colour","description":"ask, then finish",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["complete","Write"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"needs_user_input","result":"Which colour should the fence be?"}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"Write","input":{"path":"output/fence.txt","content":"painted\n"}}]},
{"index":2,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"The fence is painted."}}]}
]}`
	// tickScenario runs until cancelled, printing a line every 100 ms; the
	// Bash call may run 600 s (its longest), so that bench/webui/heap.sh's
	// five minutes of streaming end in the cancel, not in the default 120 s
	// timeout that would finish the task.
	tickScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"tick","description":"run until cancelled",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Bash","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Bash","input":{"command":"i=0; while [ ! -f input/go ]; do i=$((i+1)); echo tick $i; sleep 0.1; done","timeout_seconds":600}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"released"}}]}
]}`
)

// newTask fills the new-task form on replay with a scenario and submits
// it; it returns the task's id from the detail page it lands on.
func newTask(tb *tab, title, body, scenario string, files ...string) int64 {
	tb.t.Helper()
	tb.open("/tasks/new", "new-task-title")
	tb.fill(tid("new-task-title"), title)
	tb.fill(tid("new-task-body"), body)
	tb.wait("the pieces are listed", q("new-task-piece")+`?.querySelector('option[value="general"]')`)
	if first := eval[string](tb, "first piece option", q("new-task-piece")+`.options[0].textContent`); !strings.Contains(strings.ToLower(first), "auto") {
		tb.t.Errorf("the first piece option is %q, want auto (DOM contract)", first)
	}
	tb.selectValue(tid("new-task-piece"), "general")
	tb.selectValue(tid("new-task-executor"), "replay")
	tb.wait("the scenario field shows", `document.querySelector("#new-task-scenario")`)
	tb.setValue("#new-task-scenario", scenario)
	if len(files) > 0 {
		tb.run("choose files", chromedp.SetUploadFiles(chromedp.CSS(tid("new-task-files")), files))
	}
	tb.click("new-task-submit")
	tb.wait("the task's page", `/^\/tasks\/\d+$/.test(location.pathname) && `+q("task-title"))
	path := eval[string](tb, "location", `location.pathname`)
	id, err := strconv.ParseInt(strings.TrimPrefix(path, "/tasks/"), 10, 64)
	if err != nil {
		tb.t.Fatalf("task page %q: %v", path, err)
	}
	return id
}

// waitStatus waits until the task page shows a job state.
func (tb *tab) waitStatus(state string, d time.Duration) {
	tb.t.Helper()
	tb.waitFor("the task is "+state, q("task-status")+`?.getAttribute("data-status") === "`+state+`"`, d)
}

// lastJob is the task's latest job.
func lastJob(t *testing.T, s *server, taskID int64) store.Job {
	t.Helper()
	var d api.TaskDetail
	s.api(t, "GET", fmt.Sprintf("/api/v1/tasks/%d", taskID), nil, &d)
	if len(d.Jobs) == 0 {
		t.Fatalf("task %d has no job", taskID)
	}
	last := d.Jobs[0]
	for _, j := range d.Jobs {
		if j.ID > last.ID {
			last = j
		}
	}
	return last
}

// checkLog waits until the live log holds every event of the job (by
// the API's count) and checks it saw no gap and no duplicate.
func (tb *tab) checkLog(s *server, taskID int64) {
	tb.t.Helper()
	j := lastJob(tb.t, s, taskID)
	tb.wait(fmt.Sprintf("the live log holds the job's %d events", j.LastSeq), q("event-log")+fmt.Sprintf(`?.getAttribute("data-count") === "%d"`, j.LastSeq))
	for attr, want := range map[string]string{"data-gaps": "0", "data-dupes": "0", "data-last-id": strconv.FormatInt(j.LastSeq, 10)} {
		if got := tb.attr("event-log", attr); got != want {
			tb.t.Errorf("event-log %s = %q, want %q", attr, got, want)
		}
	}
}

// TestSubmitTaskWithFile: a task submitted in the UI with a file, on
// replay, is followed live to success; its deliverable is previewed
// (markdown rendered) and downloaded. Measures the first load of / (JS and
// CSS bytes on the wire) and how soon the task list shows.
func TestSubmitTaskWithFile(t *testing.T) {
	s := startServe(t, nil, "--workers", "2")
	tb := newTab(t, s.url, hooks)

	// First load of /: compressed JS and CSS transferred.
	var mu sync.Mutex
	kinds := map[network.RequestID]network.ResourceType{}
	var jsCSS float64
	var files []string
	lctx, stopListen := context.WithCancel(tb.ctx)
	if err := chromedp.Listen(lctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventResponseReceived:
			kinds[e.RequestID] = e.Type
			if e.Type == network.ResourceTypeScript || e.Type == network.ResourceTypeStylesheet {
				files = append(files, e.Response.URL)
			}
		case *network.EventLoadingFinished:
			if k := kinds[e.RequestID]; k == network.ResourceTypeScript || k == network.ResourceTypeStylesheet {
				jsCSS += e.EncodedDataLength
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	tb.open("/", "task-list")
	tb.wait("the page is loaded", `document.readyState === "complete"`)
	stopListen()
	interactive := eval[float64](tb, "task list time", `window.__maestro.taskList`)
	mu.Lock()
	t.Logf("budget: first load of / transferred %.1f KB of compressed JS+CSS in %d files (budget %d KB)", jsCSS/1024, len(files), budgetFirstLoadBytes>>10)
	if jsCSS > budgetFirstLoadBytes {
		t.Errorf("first load of / transferred %.0f bytes of JS+CSS, budget %d: %v", jsCSS, budgetFirstLoadBytes, files)
	}
	if jsCSS == 0 {
		t.Errorf("no JS or CSS measured on the first load: %v", files)
	}
	mu.Unlock()
	// Interactive: measured on a later navigation (the hashed assets
	// cached, as on every load but the very first). Wall time on a
	// machine the rest of the suite loads: the budget holds for the
	// fastest of up to three such loads (a load that waited for a core
	// says nothing of the page), and every time is logged.
	var warm []float64
	for range 3 {
		tb.open("/schedules", "new-schedule-button")
		tb.open("/", "task-list")
		warm = append(warm, eval[float64](tb, "task list time", `window.__maestro.taskList`))
		if w := warm[len(warm)-1]; w > 0 && w <= float64(budgetInteractive.Milliseconds()) {
			break
		}
	}
	best := slices.Min(warm)
	t.Logf("budget: task list shown %.0f ms after navigation start on the first load, %.0f ms on a later one (of %.0f; budget %v)", interactive, best, warm, budgetInteractive)
	if best <= 0 || best > float64(budgetInteractive.Milliseconds()) {
		t.Errorf("task list shown %.0f ms after navigation at best (%.0f), budget %v", best, warm, budgetInteractive)
	}
	tb.shots("tasks-empty")

	brief := filepath.Join(t.TempDir(), "brief.txt")
	if err := os.WriteFile(brief, []byte("two paragraphs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb.open("/tasks/new", "new-task-title")
	tb.shots("new-task")
	id := newTask(tb, "Summarise the brief", "Read **input/brief.txt** and summarise it.", summariseScenario, brief)
	tb.waitFor("the task succeeds", q("task-status")+`?.getAttribute("data-status") === "succeeded"`, 3*time.Minute)
	if b := eval[string](tb, "executor badge", q("executor-badge")+`?.textContent ?? ""`); !strings.Contains(b, "REPLAY") {
		t.Errorf("executor badge %q lacks REPLAY", b)
	}
	tb.checkLog(s, id)
	tb.wait("the Read tool call is shown", q("tool-call", `[data-tool="Read"]`))

	// The deliverable: previewed as rendered markdown, then downloaded.
	tb.wait("the deliverable is listed", q("deliverable-row", `[data-path="summary.md"]`))
	if size := tb.attr("deliverable-row", "data-size"); size != strconv.Itoa(len("# Summary\n\nThe brief asks for **two paragraphs**.\n")) {
		t.Errorf("deliverable size %q", size)
	}
	tb.click("deliverable-preview-button")
	tb.wait("the preview renders the markdown", q("deliverable-preview")+`?.querySelector("h1, strong")`)
	tb.shots("task-detail-succeeded")
	tb.shots("deliverable-preview", "deliverable-preview")

	dl := t.TempDir()
	tb.run("allow downloads", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dl, EventsEnabled: &[]bool{true}[0]})
		return err
	}))
	dctx, stopDownloads := context.WithTimeout(tb.ctx, stepTimeout)
	defer stopDownloads()
	downloads := chromedp.BrowserEvents(dctx, browser.DownloadProgress)
	tb.click("deliverable-download")
	for ev, err := range downloads {
		if err != nil {
			t.Fatalf("the download did not complete: %v", err)
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatal("the download was cancelled")
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			break
		}
	}
	if data, err := os.ReadFile(filepath.Join(dl, "summary.md")); err != nil || !strings.Contains(string(data), "two paragraphs") {
		entries, _ := os.ReadDir(dl)
		t.Errorf("downloaded summary.md = %q, %v (directory: %v)", data, err, entries)
	}

	// The task list shows it, badged REPLAY; the server page.
	tb.open("/", "task-row")
	if st := tb.attr("task-row", "data-status"); st != "succeeded" {
		t.Errorf("task row status %q", st)
	}
	tb.shots("tasks")
	tb.open("/server", "server-version")
	tb.wait("the server page shows the store", q("server-store")+`?.textContent.toLowerCase().includes("sqlite")`)
	tb.shots("server")
}

// TestQuestionAnsweredInUI: a task whose agent asks a question shows it
// prominently; the answer typed in the UI resumes it to success.
func TestQuestionAnsweredInUI(t *testing.T) {
	s := startServe(t, nil, "--workers", "1")
	tb := newTab(t, s.url)
	id := newTask(tb, "Paint the fence", "", askScenario)
	tb.waitFor("the question is shown", q("question-text")+`?.textContent.includes("Which colour")`, 2*time.Minute)
	tb.waitStatus("waiting_human", stepTimeout)
	tb.shots("question")
	tb.fill(tid("answer-input"), "blue")
	tb.click("answer-submit")
	tb.waitFor("the task succeeds", q("task-status")+`?.getAttribute("data-status") === "succeeded"`, 2*time.Minute)
	tb.wait("the answer is in the comments", `[...document.querySelectorAll('`+tid("comment-item")+`')].some(c => c.textContent.includes("blue"))`)
	tb.checkLog(s, id)
	tb.shots("question-answered")
}

// TestCancelRunningTask: a running task is cancelled from the UI after a
// confirmation. While it streams, the tab's JS heap is sampled
// (MAESTRO_WEBUI_STREAM_SECONDS, default 10; bench/webui/ runs 300).
func TestCancelRunningTask(t *testing.T) {
	s := startServe(t, nil, "--workers", "1")
	tb := newTab(t, s.url)
	id := newTask(tb, "Tick until cancelled", "", tickScenario)
	tb.waitFor("the task runs", q("task-status")+`?.getAttribute("data-status") === "running"`, 2*time.Minute)
	tb.wait("the tool call runs", q("tool-call", `[data-tool="Bash"]`))

	secs := 10
	if v, err := strconv.Atoi(os.Getenv("MAESTRO_WEBUI_STREAM_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	heap := func() float64 {
		ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
		defer cancel()
		_, err := chromedp.Run(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, heapprofiler.CollectGarbage, cdp.Empty{})
			return err
		}))
		if err != nil {
			t.Fatalf("collect garbage: %v", err)
		}
		u, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (*runtime.GetHeapUsageResult, error) {
			r, err := cdp.Call(ctx, tg, runtime.GetHeapUsage, cdp.Empty{})
			return &r, err
		})
		if err != nil {
			t.Fatalf("heap usage: %v", err)
		}
		return u.UsedSize
	}
	startCount := tb.attr("event-log", "data-count")
	first := heap()
	var samples []string
	tick := time.NewTicker(time.Second)
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(end) {
		<-tick.C
		samples = append(samples, fmt.Sprintf("%.1f", heap()/(1<<20)))
	}
	tick.Stop()
	last := heap()
	t.Logf("budget: JS heap while the task streamed %ds (events %s → %s): %.1f MB → %.1f MB after GC; samples (MB): %s",
		secs, startCount, tb.attr("event-log", "data-count"), first/(1<<20), last/(1<<20), strings.Join(samples, " "))
	if last > 2*first+8<<20 {
		t.Errorf("the JS heap grew from %.1f MB to %.1f MB in %ds of streaming", first/(1<<20), last/(1<<20), secs)
	}

	tb.shots("running")
	tb.click("cancel-task")
	tb.wait("the confirmation", q("confirm-dialog"))
	tb.shots("cancel-confirm")
	tb.click("confirm-ok")
	tb.waitFor("the task is cancelled", q("task-status")+`?.getAttribute("data-status") === "cancelled"`, 2*time.Minute)
	if j := lastJob(t, s, id); j.State != store.StateCancelled {
		t.Errorf("job state %s after cancel in the UI", j.State)
	}
	tb.checkLog(s, id)
	tb.shots("cancelled")
}

// TestScheduleFires: a schedule created in the UI (every minute) shows
// its cron expression in words and the next runs, and fires a task. The
// server's test hook makes a new schedule due at once
// (MAESTRO_TEST_SCHEDULE_DUE_NOW, internal/cli/serve.go), so the test
// does not wait for the next real minute.
func TestScheduleFires(t *testing.T) {
	s := startServe(t, []string{"MAESTRO_TEST_SCHEDULE_DUE_NOW=1"}, "--workers", "1")
	tb := newTab(t, s.url)
	tb.open("/schedules", "new-schedule-button")
	tb.click("new-schedule-button")
	tb.wait("the schedule form", q("schedule-name"))
	tb.fill(tid("schedule-name"), "nightly-report")
	tb.fill(tid("schedule-cron"), "* * * * *")
	tb.fill(tid("schedule-title"), "Scheduled report")
	tb.wait("the expression in words", q("cron-explained")+`?.textContent.trim().length > 0`)
	tb.wait("five next runs", q("cron-next-runs")+`?.querySelectorAll("li").length === 5`)
	tb.shots("schedule-form")
	tb.click("schedule-save")
	tb.wait("the schedule is listed", q("schedule-row"))
	tb.shots("schedules")
	var sl api.ScheduleList
	s.api(t, "GET", "/api/v1/schedules", nil, &sl)
	if len(sl.Schedules) != 1 || sl.Schedules[0].CronExpr != "* * * * *" || !sl.Schedules[0].Enabled {
		t.Fatalf("schedules after saving in the UI: %+v", sl.Schedules)
	}
	// It fires (at once, by the hook): the task shows in the list.
	tb.open("/", "task-list")
	tb.waitFor("the scheduled task is listed", `[...document.querySelectorAll('`+tid("task-row")+`')].some(r => r.textContent.includes("Scheduled report"))`, stepTimeout)
	tb.shots("schedule-fired")
}

// TestSignInWithToken: a server with a token sends the app to the
// sign-in page; a wrong token is refused there, the right one opens the
// task list.
func TestSignInWithToken(t *testing.T) {
	s := startServe(t, []string{"MAESTRO_API_TOKEN=correct-horse-battery"}, "--workers", "0")
	tb := newTab(t, s.url)
	tb.run("open /", chromedp.Navigate(s.url+"/"))
	tb.wait("the sign-in page", q("signin-token"))
	if p := eval[string](tb, "location", `location.pathname`); p != "/signin" {
		t.Errorf("sign-in at %q, want /signin", p)
	}
	tb.shots("signin")
	tb.fill(tid("signin-token"), "wrong")
	tb.click("signin-submit")
	tb.wait("the error", q("signin-error"))
	tb.shots("signin-error")
	tb.fill(tid("signin-token"), "correct-horse-battery")
	tb.click("signin-submit")
	tb.wait("the task list", q("task-list"))
	if stored := eval[string](tb, "session storage", `JSON.stringify(Object.values(sessionStorage))`); !strings.Contains(stored, "correct-horse-battery") {
		t.Errorf("the token is not in session storage (remember off): %s", stored)
	}
	if stored := eval[string](tb, "local storage", `JSON.stringify(Object.values(localStorage))`); strings.Contains(stored, "correct-horse-battery") {
		t.Errorf("the token is in local storage though remember was off")
	}
	tb.open("/server", "server-version")
	tb.shots("server-signed-in")
}

// TestLiveLogSurvivesDrop: the server cuts every event stream after 5
// events (MAESTRO_TEST_DROP_STREAMS_AFTER: it aborts the connection, or
// ends the response cleanly when the tab is back at the cursor of an
// aborted stream, whose events a busy browser drops with the abort); the
// live log reconnects with Last-Event-ID each time and ends with every
// event of the job once: no gap, no duplicate.
func TestLiveLogSurvivesDrop(t *testing.T) {
	s := startServe(t, []string{"MAESTRO_TEST_DROP_STREAMS_AFTER=5"}, "--workers", "1")
	tb := newTab(t, s.url)
	id := newTask(tb, "Summarise the brief", "", summariseScenario)
	tb.waitFor("the task ends", q("task-status")+`?.getAttribute("data-status") === "failed" || `+q("task-status")+`?.getAttribute("data-status") === "succeeded"`, 3*time.Minute)
	j := lastJob(t, s, id)
	if j.LastSeq <= 10 {
		t.Fatalf("the job has only %d events: too few to be cut twice", j.LastSeq)
	}
	tb.checkLog(s, id)
	t.Logf("the live log holds the job's %d events after %d server-side cuts", j.LastSeq, (j.LastSeq-1)/5)
	if !regexp.MustCompile(`stream|event`).MatchString(s.stderr.String()) {
		t.Logf("serve's log:\n%s", s.stderr)
	}
	tb.shots("resumed-log")
}

// seedLongLog stores, before serve starts, a finished task whose job has
// n events (alternately a streamed text of its own response and a tool
// call: n rendered items) and returns the task's id.
func seedLongLog(t *testing.T, home string, n int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(home, "maestro.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	task, _, err := st.CreateTask(ctx, store.NewTask{Title: "A long log", Piece: "general"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := st.Claim(ctx, store.ClaimParams{Worker: "seed", Limit: 1, LeaseFor: time.Hour})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v", err)
	}
	j, err := st.Start(ctx, jobs[0].Lease())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; {
		var batch []store.NewJobEvent
		for ; i < n && len(batch) < store.MaxEventsPerAppend; i++ {
			var data string
			if i%2 == 0 {
				data = fmt.Sprintf(`{"type":"response_chunk","response_id":"r%d","content":"Step %d: reading the next file and **thinking** about what it says.\n"}`, i, i)
			} else {
				data = fmt.Sprintf(`{"type":"tool_call","call_id":"c%d","tool":"Bash","args":{"command":"echo %d"}}`, i, i)
			}
			batch = append(batch, store.NewJobEvent{Type: store.JobEventProtocol, Data: []byte(data)})
		}
		if _, err := st.AppendJobEvents(ctx, j.Lease(), batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Complete(ctx, j.Lease(), "done"); err != nil {
		t.Fatal(err)
	}
	return task.ID
}

// TestLongLogScrolls: a task whose log holds 10,000 events renders them
// all (the virtualized list) and scrolls from top to bottom with no long
// task over 100 ms on the main thread.
func TestLongLogScrolls(t *testing.T) {
	home := t.TempDir()
	id := seedLongLog(t, home, 10_000)
	s := startServeIn(t, home, nil, "--workers", "0")
	tb := newTab(t, s.url, hooks)
	tb.open(fmt.Sprintf("/tasks/%d", id), "event-log")
	tb.checkLog(s, id)
	tb.shots("long-log")
	// Scroll the log (or the page, whichever scrolls) in steps of a
	// screen, one step per frame, counting long tasks from here on.
	var steps int
	tasks := tb.traceMainThread(func() {
		steps = evalFor[int](tb, "scroll the log", `(async () => {
		window.__maestro.longTasks.length = 0;
		const log = document.querySelector('[data-testid="event-log"]');
		let el = log;
		while (el && el !== document.body && !(el.scrollHeight > el.clientHeight + 10 && getComputedStyle(el).overflowY !== "visible")) el = el.parentElement;
		if (!el || el === document.body) el = document.scrollingElement;
		const frame = () => new Promise(r => requestAnimationFrame(() => r()));
		let n = 0;
		const down = Math.max(el.clientHeight, el.scrollHeight / 200);
		for (let y = 0; y < el.scrollHeight; y += down) { el.scrollTop = y; await frame(); n++; }
		for (let y = el.scrollHeight; y > 0; y -= down * 4) { el.scrollTop = y; await frame(); n++; }
		await frame();
		return n;
	})()`, 4*time.Minute)
	})
	// The scroll went up (as a drag of the scrollbar or a touch swipe
	// does: no wheel event, no key): the log no longer follows its end.
	if eval[bool](tb, "Follow", `!!`+q("log-follow")+`?.checked`) {
		t.Error("the log still follows its end after it was scrolled up (a scrollbar's drag, a swipe)")
	}
	long := eval[[]float64](tb, "long tasks", `window.__maestro.longTasks`)
	worst := 0.0
	for _, d := range long {
		worst = max(worst, d)
	}
	t.Logf("budget: scrolling the 10,000-event log (%d steps): the main thread ran %d tasks, the longest %.0f ms of CPU (%d over 100 ms; budget %d ms); by wall time the longest %.0f ms, and the longtask observer saw %d over 50 ms, the longest %.0f ms (wall time counts waiting for a core on a loaded machine)",
		steps, tasks.count, tasks.longest, tasks.over100, budgetLongTask, tasks.longestWall, len(long), worst)
	if tasks.longest > budgetLongTask {
		t.Errorf("a main-thread task of %.0f ms of CPU while scrolling the 10,000-event log (budget %d ms)", tasks.longest, budgetLongTask)
	}
	if items := eval[int](tb, "rendered items", `document.querySelectorAll('[data-testid="event-item"]').length`); items == 0 || items > 1000 {
		t.Errorf("%d event items in the DOM for 10,000 events: the list is not virtualized", items)
	}
}
