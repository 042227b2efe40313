//go:build browser

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"

	"github.com/maestro-run/maestro/internal/proctest"
)

// binary is the maestro binary TestMain builds.
var binary string

func TestMain(m *testing.M) {
	proctest.MainWithMaestro(&binary, m.Run)
}

// Bounds of the tests' waits.
const (
	stepTimeout = 60 * time.Second // one browser step or DOM condition
	serveLife   = 15 * time.Minute // the longest a serve of one test runs
)

// server is a running `maestro serve`.
type server struct {
	url, home, token string
	stderr           *proctest.Buffer
	stop             func() // SIGTERM, exit 0 expected (also at cleanup)
}

// startServe runs `maestro serve` on a free loopback port on replay (no
// model configured) with its home and data in a temporary directory,
// extra environment variables and args; it stops at cleanup (SIGTERM,
// exit 0 expected).
func startServe(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return startServeIn(t, t.TempDir(), env, args...)
}

// startServeIn is startServe with its home and data in home.
func startServeIn(t *testing.T, home string, env []string, args ...string) *server {
	t.Helper()
	s := &server{home: home}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "MAESTRO_API_TOKEN="); ok {
			s.token = v
		}
	}
	// The process lives (and its URL is awaited) at most serveLife; it is
	// stopped at cleanup before the context ends.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), serveLife)
	t.Cleanup(cancel)
	s.url, s.stderr, s.stop = proctest.StartServe(ctx, t, binary, append(proctest.NoModelEnv(home), env...), append([]string{"--data-dir", home}, args...)...)
	// On failure, what serve said (registered after StartServe, so it runs
	// before serve is stopped).
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log (last %d lines):\n%s", failLines, tail(s.stderr.String(), failLines))
		}
	})
	return s
}

// failLines is how many lines of a log a failure report shows.
const failLines = 150

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d earlier lines", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// api calls the server's REST API (with the token, if any) and decodes
// the JSON answer into out.
func (s *server) api(t *testing.T, method, path string, body, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = strings.NewReader(string(data))
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// debianChromium is the browser binary behind Debian's chromium launcher
// (/usr/bin/chromium, a shell script). Started directly, it runs without
// the flags the launcher adds (--enable-gpu-rasterization, which rasters
// every frame through SwiftShader in the GPU process; the extension
// loading flags), and without a shell start per browser.
const debianChromium = "/usr/lib/chromium/chromium"

// chromium returns $MAESTRO_CHROMIUM, else Debian's chromium (its browser
// binary, debianChromium, when present), or skips the test loudly (fails
// it under CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MAESTRO_CHROMIUM"); p != "" {
		return p
	}
	if fi, err := os.Stat(debianChromium); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return debianChromium
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	proctest.SkipOrFail(t, "CHROMIUM NOT INSTALLED: apt-get install chromium (scripts/install-deps.sh); the browser tests did not run")
	return ""
}

// tab is a browser tab on the app, with the test's artifacts directory.
type tab struct {
	t         *testing.T
	ctx       context.Context
	base      string
	artifacts string
	log       *proctest.Buffer // chromium's output
	console   *pageLog         // the page's console, errors and API requests
}

// pageLog keeps the last lines of what the page logged (console calls,
// uncaught exceptions, the browser's log entries such as failed loads)
// and of its API requests (sent, answered, finished or failed, with the
// time since the tab started), for a failure report.
type pageLog struct {
	mu    sync.Mutex
	start time.Time
	lines []string
	urls  map[network.RequestID]string
}

func (l *pageLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%7.3fs ", time.Since(l.start).Seconds())+fmt.Sprintf(format, args...))
	if len(l.lines) > 2*failLines {
		l.lines = append(l.lines[:0], l.lines[len(l.lines)-failLines:]...)
	}
}

func (l *pageLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return tail(strings.Join(l.lines, "\n"), failLines)
}

// listen records the events of a tab into l.
func (l *pageLog) listen(ctx context.Context) error {
	return chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *cdpruntime.EventConsoleAPICalled:
			var args []string
			for _, a := range e.Args {
				if a.Value != nil {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			l.add("console.%s: %s", e.Type, strings.Join(args, " "))
		case *cdpruntime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			l.add("exception: %s", msg)
		case *cdplog.EventEntryAdded:
			l.add("browser %s %s: %s %s", e.Entry.Source, e.Entry.Level, e.Entry.Text, e.Entry.URL)
		case *network.EventRequestWillBeSent:
			if !strings.Contains(e.Request.URL, "/api/") {
				return
			}
			l.mu.Lock()
			l.urls[e.RequestID] = e.Request.URL
			l.mu.Unlock()
			l.add("request %s %s %s", e.RequestID, e.Request.Method, e.Request.URL)
		case *network.EventResponseReceived:
			if l.url(e.RequestID, false) != "" {
				l.add("response %s %d", e.RequestID, e.Response.Status)
			}
		case *network.EventLoadingFinished:
			if l.url(e.RequestID, true) != "" {
				l.add("finished %s (%.0f bytes)", e.RequestID, e.EncodedDataLength)
			}
		case *network.EventLoadingFailed:
			if l.url(e.RequestID, true) != "" {
				l.add("failed %s: %s canceled=%v", e.RequestID, e.ErrorText, e.Canceled)
			}
		}
	})
}

// url returns the URL of an API request being recorded ("" when it is not
// one), forgetting it when done.
func (l *pageLog) url(id network.RequestID, done bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.urls[id]
	if done {
		delete(l.urls, id)
	}
	return u
}

// newTab starts a headless Chromium with a fresh profile (the flags of
// docs/web-ui.md: no sandbox, no GPU, no QUIC, no background traffic) and
// returns its first tab, at 1280×800. scripts run before the app's own in
// every document (measurement hooks).
//
// The flags keep the browser to the processes a test needs, for CPU: no
// GPU process (software compositing in the browser process, no SwiftShader
// rasterizer), the network service in the browser process, one renderer
// per page (the app is one loopback origin: no site isolation, no spare
// renderer), one raster thread, no extensions, translate, optimization
// hints, crash reporter or hang monitor (docs/web-ui.md). Screenshots are
// those of Debian's launcher with its default flags, pixel for pixel where
// the page's content is the same.
func newTab(t *testing.T, base string, scripts ...string) *tab {
	t.Helper()
	bin := chromium(t)
	log := &proctest.Buffer{}
	actx, cancel := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-software-rasterizer", true),
		chromedp.Flag("in-process-gpu", true),
		chromedp.Flag("num-raster-threads", "1"),
		chromedp.Flag("enable-features", "NetworkServiceInProcess"),
		chromedp.Flag("disable-features", "site-per-process,IsolateOrigins,SpareRendererForSitePerProcess,Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,CertificateTransparencyComponentUpdater"),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-hang-monitor", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.CombinedOutput(log),
	)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	tb := &tab{t: t, ctx: ctx, base: base, log: log, artifacts: artifactsDir(t), console: &pageLog{start: time.Now(), urls: map[network.RequestID]string{}}}
	// The first Run starts the browser: no timeout on its context.
	start := make(chan error, 1)
	go func() { start <- chromedp.Do(ctx) }()
	select {
	case err := <-start:
		if err != nil {
			t.Fatalf("start chromium: %v\n%s", err, log)
		}
	case <-time.After(stepTimeout):
		t.Fatalf("chromium did not start within %v\n%s", stepTimeout, log)
	}
	if err := tb.console.listen(ctx); err != nil {
		t.Fatalf("listen to the tab: %v", err)
	}
	for _, src := range scripts {
		tb.run("install a measurement hook", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src})
			return err
		}))
	}
	tb.run("viewport", chromedp.EmulateViewport(1280, 800))
	return tb
}

// artifactsDir is where a test's screenshots go:
// $MAESTRO_TEST_ARTIFACTS/<test>/ (default test-artifacts/ at the top of
// the module, which git ignores).
func artifactsDir(t *testing.T) string {
	root := os.Getenv("MAESTRO_TEST_ARTIFACTS")
	if root == "" {
		root = filepath.Join("..", "..", "..", "test-artifacts")
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// run runs actions under stepTimeout; on failure it saves a screenshot
// and fails the test.
func (tb *tab) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.failShot(what)
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// failShot saves what the page shows when a step fails.
func (tb *tab) failShot(what string) {
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		name := filepath.Join(tb.artifacts, "FAILED-"+regexp.MustCompile(`\W+`).ReplaceAllString(what, "-")+".png")
		os.WriteFile(name, png, 0o644)
		tb.t.Logf("screenshot of the failure: %s", name)
	}
	if html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`)); err == nil {
		tb.t.Logf("the page says:\n%s", html)
	}
	tb.t.Logf("the page's console and API requests (last %d):\n%s", failLines, tb.console)
}

// eval evaluates a JavaScript expression (promises awaited) into out.
func eval[T any](tb *tab, what, expr string) T {
	tb.t.Helper()
	return evalFor[T](tb, what, expr, stepTimeout)
}

// evalFor is eval bounded by d.
func evalFor[T any](tb *tab, what, expr string, d time.Duration) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, d)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.failShot(what)
		tb.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// wait waits until a JavaScript expression is truthy.
func (tb *tab) wait(what, expr string) {
	tb.t.Helper()
	tb.waitFor(what, expr, stepTimeout)
}

func (tb *tab) waitFor(what, expr string, d time.Duration) {
	tb.t.Helper()
	tb.run("wait until "+what, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[chromedp.Void]("!!("+expr+")", chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(d))(ctx, tg)
		return err
	}))
}

// tid is the CSS selector of a data-testid.
func tid(id string) string { return `[data-testid="` + id + `"]` }

// q is the JavaScript expression of the first element of a data-testid
// (plus an optional CSS suffix).
func q(id string, suffix ...string) string {
	return fmt.Sprintf("document.querySelector(%q)", tid(id)+strings.Join(suffix, ""))
}

// open navigates to a path of the app and waits until a data-testid is
// present.
func (tb *tab) open(path, testid string) {
	tb.t.Helper()
	tb.run("open "+path, chromedp.Navigate(tb.base+path))
	tb.wait(path+" shows "+testid, q(testid))
}

// click clicks the first element of a data-testid once it is visible and
// holds still (the same box in two frames running): the click goes to the
// middle of the box measured, and a box that a late render moves takes the
// click elsewhere.
func (tb *tab) click(testid string, suffix ...string) {
	tb.t.Helper()
	sel := tid(testid) + strings.Join(suffix, "")
	eval[chromedp.Void](tb, "wait until "+sel+" holds still", fmt.Sprintf(`new Promise((resolve) => {
		let last = "";
		const step = () => {
			const r = document.querySelector(%q)?.getBoundingClientRect();
			const now = r ? [r.x, r.y, r.width, r.height].join() : "";
			if (now !== "" && now === last) return resolve();
			last = now;
			requestAnimationFrame(step);
		};
		requestAnimationFrame(step);
	})`, sel))
	tb.run("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// clickEnabled waits until a button is enabled, then clicks it: a click
// on a button still disabled (its state not yet re-rendered after an
// edit) is dropped without a word.
func (tb *tab) clickEnabled(testid string) {
	tb.t.Helper()
	tb.wait(testid+" is enabled", q(testid)+` && !`+q(testid)+`.disabled`)
	tb.click(testid)
}

// fill types a value into a field, replacing what it holds.
func (tb *tab) fill(sel, value string) {
	tb.t.Helper()
	tb.setValue(sel, "")
	tb.run("type into "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible), chromedp.SendKeys(chromedp.CSS(sel), value))
}

// setValue sets a field's value as a paste or a choice would: through the
// element's own value setter (which React tracks), then the input and
// change events.
func (tb *tab) setValue(sel, value string) {
	tb.t.Helper()
	eval[chromedp.Void](tb, "set the value of "+sel, fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		const proto = Object.getPrototypeOf(el);
		Object.getOwnPropertyDescriptor(proto, "value").set.call(el, %q);
		el.dispatchEvent(new Event("input", {bubbles: true}));
		el.dispatchEvent(new Event("change", {bubbles: true}));
	})()`, sel, value))
}

// selectValue picks an option of a <select>.
func (tb *tab) selectValue(sel, value string) {
	tb.t.Helper()
	tb.setValue(sel, value)
	if got := eval[string](tb, "read "+sel, fmt.Sprintf(`document.querySelector(%q).value`, sel)); got != value {
		tb.t.Fatalf("%s has no option %q (value %q)", sel, value, got)
	}
}

// attr returns an attribute of the first element of a data-testid.
func (tb *tab) attr(testid, name string) string {
	tb.t.Helper()
	return eval[string](tb, "read "+name+" of "+testid, fmt.Sprintf(`(%s?.getAttribute(%q)) ?? ""`, q(testid), name))
}

// shots saves the page at desktop (1280×800) and phone (390×844) sizes as
// <name>-desktop.png and <name>-390.png, and scans it with axe-core. The
// page is scrolled to its top, or to the element of a data-testid.
func (tb *tab) shots(name string, focus ...string) {
	tb.t.Helper()
	scroll := `window.scrollTo(0, 0)`
	if len(focus) > 0 {
		scroll = q(focus[0]) + `?.scrollIntoView({block: "center"})`
	}
	for _, v := range []struct {
		suffix string
		w, h   int64
		opts   []chromedp.EmulateViewportOption
	}{
		{"desktop", 1280, 800, nil},
		{"390", 390, 844, []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulatePortrait}},
	} {
		tb.run("viewport "+v.suffix, chromedp.EmulateViewport(v.w, v.h, v.opts...))
		eval[chromedp.Void](tb, "scroll", scroll+"; undefined")
		// Two frames, so that the layout of the new size is painted.
		eval[chromedp.Void](tb, "let the page lay out", `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r())))`)
		ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
		png, err := chromedp.Run(ctx, fastScreenshot())
		cancel()
		if err != nil {
			tb.t.Fatalf("screenshot %s: %v", name, err)
		}
		file := filepath.Join(tb.artifacts, name+"-"+v.suffix+".png")
		if err := os.WriteFile(file, png, 0o644); err != nil {
			tb.t.Fatal(err)
		}
		tb.t.Logf("screenshot: %s", file)
		tb.axe(name + " at " + v.suffix)
		if v.w == 390 {
			tb.noSideways(name)
		}
	}
	tb.run("viewport desktop", chromedp.EmulateViewport(1280, 800))
}

// noSideways fails the test when the page, at 390 px, is wider than the
// screen or shows a link or control beyond its right edge (inside a table
// that scrolls sideways, say): a phone user would not find it.
func (tb *tab) noSideways(name string) {
	tb.t.Helper()
	off := eval[string](tb, "look for what lies beyond the screen's edge", `(() => {
		const out = [];
		if (document.documentElement.scrollWidth > 390) out.push("the page is " + document.documentElement.scrollWidth + " px wide");
		for (const e of document.querySelectorAll("a[href], button, input, select, textarea, summary")) {
			const r = e.getBoundingClientRect();
			if (r.width === 0 && r.height === 0) continue;
			if (r.right > 391 || r.left < -1) out.push(e.tagName.toLowerCase() + " " + JSON.stringify((e.textContent || e.getAttribute("aria-label") || "").trim().slice(0, 40)) + " at x " + Math.round(r.left) + "-" + Math.round(r.right));
		}
		return out.join("; ");
	})()`)
	if off != "" {
		tb.t.Errorf("%s at 390 px: %s", name, off)
	}
}

// fastScreenshot captures the viewport as a PNG, as
// chromedp.CaptureScreenshot does, but encoded for speed rather than size
// (the same pixels, a larger file, less of the browser's CPU).
func fastScreenshot() chromedp.Action[[]byte] {
	return func(ctx context.Context, tg *chromedp.Target) ([]byte, error) {
		fast := true
		r, err := cdp.Call(ctx, tg, page.CaptureScreenshot, page.CaptureScreenshotParams{FromSurface: &fast, OptimizeForSpeed: &fast})
		if err != nil {
			return nil, fmt.Errorf("capture a screenshot: %w", err)
		}
		return r.Data, nil
	}
}

// axeSource is axe-core from web/node_modules (npm ci in web/ installs it:
// a devDependency of the app).
func axeSource(t *testing.T) string {
	t.Helper()
	p := os.Getenv("MAESTRO_AXE_JS")
	if p == "" {
		p = filepath.Join("..", "..", "..", "web", "node_modules", "axe-core", "axe.min.js")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		proctest.SkipOrFail(t, "AXE-CORE NOT INSTALLED (%v): run npm ci in web/ (scripts/test-web.sh does)", err)
	}
	return string(data)
}

// axe scans the page with axe-core and fails the test on a serious or
// critical violation.
func (tb *tab) axe(what string) {
	tb.t.Helper()
	src := axeSource(tb.t)
	if !eval[bool](tb, "is axe loaded", `typeof window.axe === "object"`) {
		eval[chromedp.Void](tb, "load axe-core", src+"\n;undefined")
	}
	found := eval[[]string](tb, "axe scan of "+what, `axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v =>
			v.id + " (" + v.impact + "): " + v.help + " — " + v.nodes.slice(0, 4).map(n => n.target.join(" ")).join(", ")))`)
	for _, f := range found {
		tb.t.Errorf("axe, %s: %s", what, f)
	}
	tb.t.Logf("axe: %s: %d serious or critical violation(s)", what, len(found))
}

// mainThreadTasks is what a trace says of the renderer's main thread: its
// longest task by wall time and by thread (CPU) time, in ms, and how many
// tasks took more than 100 ms of CPU.
type mainThreadTasks struct {
	count                int
	longestWall, longest float64
	over100              int
}

// traceMainThread records a DevTools trace of the page while f runs and
// returns the main thread's tasks. CPU time (the trace's tdur) is the
// measure that holds on a loaded machine, where wall time also counts the
// time the thread waited for a core.
func (tb *tab) traceMainThread(f func()) mainThreadTasks {
	tb.t.Helper()
	var mu sync.Mutex
	var raw [][]byte
	done := make(chan struct{})
	lctx, stop := context.WithCancel(tb.ctx)
	defer stop()
	if err := chromedp.Listen(lctx, func(ev any) {
		switch e := ev.(type) {
		case *tracing.EventDataCollected:
			mu.Lock()
			for _, v := range e.Value {
				raw = append(raw, []byte(v))
			}
			mu.Unlock()
		case *tracing.EventTracingComplete:
			close(done)
		}
	}); err != nil {
		tb.t.Fatal(err)
	}
	tb.run("start tracing", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, tracing.Start, tracing.StartParams{TransferMode: tracing.StartTransferModeReportEvents,
			TraceConfig: &tracing.TraceConfig{IncludedCategories: []string{"disabled-by-default-devtools.timeline", "toplevel", "__metadata"}}})
		return err
	}))
	f()
	tb.run("end tracing", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, tracing.End, cdp.Empty{})
		return err
	}))
	select {
	case <-done:
	case <-time.After(stepTimeout):
		tb.t.Fatalf("the trace did not complete within %v", stepTimeout)
	}
	type event struct {
		Name string  `json:"name"`
		Ph   string  `json:"ph"`
		Pid  int64   `json:"pid"`
		Tid  int64   `json:"tid"`
		Dur  float64 `json:"dur"`
		TDur float64 `json:"tdur"`
		Args struct {
			Name string `json:"name"`
		} `json:"args"`
	}
	mu.Lock()
	defer mu.Unlock()
	var events []event
	main := map[[2]int64]bool{}
	for _, v := range raw {
		var e event
		if json.Unmarshal(v, &e) != nil {
			continue
		}
		if e.Ph == "M" && e.Name == "thread_name" && e.Args.Name == "CrRendererMain" {
			main[[2]int64{e.Pid, e.Tid}] = true
		}
		events = append(events, e)
	}
	var r mainThreadTasks
	for _, e := range events {
		if e.Name != "RunTask" || e.Ph != "X" || !main[[2]int64{e.Pid, e.Tid}] {
			continue
		}
		r.count++
		r.longestWall = max(r.longestWall, e.Dur/1000)
		r.longest = max(r.longest, e.TDur/1000)
		if e.TDur > 100_000 {
			r.over100++
		}
	}
	if r.count == 0 {
		tb.t.Fatalf("the trace holds no task of the renderer's main thread (%d events)", len(events))
	}
	return r
}
