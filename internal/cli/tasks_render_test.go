package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/store"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/tasks-* from a live piece-demo job")

const (
	pieceDemoEvents      = "testdata/tasks-piece-demo.events.jsonl"
	pieceDemoGolden      = "testdata/tasks-piece-demo.golden"
	pieceDemoColorGolden = "testdata/tasks-piece-demo.color.golden"
)

// renderLog renders JSON-lines events as `tasks logs` does (through
// termSafe), times in UTC.
func renderLog(t *testing.T, jsonl []byte, ios *IOStreams, asJSON bool) string {
	t.Helper()
	var out bytes.Buffer
	ios.Out = termSafe(&out, outColor(ios))
	l := newJobLog(ios, asJSON)
	l.loc = time.UTC
	for i, line := range bytes.Split(bytes.TrimRight(jsonl, "\n"), []byte("\n")) {
		var e store.JobEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("event line %d: %v", i+1, err)
		}
		l.add(line, e)
	}
	l.close()
	return out.String()
}

// TestJobLogGolden renders the recorded log of the piece-demo job (the job
// `maestro serve` runs when no model is configured) and compares it with
// the golden files: plain text when Out is not a terminal or NO_COLOR is
// set, ANSI styles on a terminal; --json prints the events unchanged.
func TestJobLogGolden(t *testing.T) {
	events, err := os.ReadFile(pieceDemoEvents)
	if err != nil {
		t.Fatalf("%v (record it with go test ./internal/cli -run TestTasksPieceDemoLive -update)", err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name   string
		tty    bool
		env    map[string]string
		asJSON bool
		golden string
	}{
		{name: "not a terminal", golden: pieceDemoGolden},
		{name: "terminal with NO_COLOR", tty: true, env: map[string]string{"NO_COLOR": "1"}, golden: pieceDemoGolden},
		{name: "terminal", tty: true, golden: pieceDemoColorGolden},
		{name: "json", tty: true, asJSON: true, golden: pieceDemoEvents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderLog(t, events, &IOStreams{OutTTY: tc.tty, ErrTTY: tc.tty, Getenv: env(tc.env)}, tc.asJSON)
			if *updateGolden && tc.golden != pieceDemoEvents {
				if err := os.WriteFile(tc.golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(tc.golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("rendered log differs from %s (go test -update rewrites it):\n%s", tc.golden, lineDiff(string(want), got))
			}
			hasANSI := strings.Contains(got, "\x1b[")
			if wantANSI := tc.golden == pieceDemoColorGolden; hasANSI != wantANSI {
				t.Errorf("ANSI escapes: %v, want %v", hasANSI, wantANSI)
			}
		})
	}
}

// TestJobLogRendering pins the parts of the view that matter to a reader,
// on the golden log: the badge, the movements, streamed text joined, one
// line per tool call, the status echo of run events dropped, the result
// and the usage line.
func TestJobLogRendering(t *testing.T) {
	events, err := os.ReadFile(pieceDemoEvents)
	if err != nil {
		t.Fatal(err)
	}
	got := renderLog(t, events, &IOStreams{}, false)
	for _, want := range []string{
		"#3 ▶ REPLAY scripted model turns (replay/maestro-replay-v1), tools run for real\n",
		"\n── movement execute (1 of at most 12) ──\n",
		"\n── movement verify (2 of at most 12) ──\n",
		"This is a scripted replay demo: no model is being called. Maestro is playing",
		"∴ Show real work with the built-in tools",
		"● Write output/hello-maestro/README.md\n  ✓ Write",
		"● Bash ls -la output/hello-maestro && wc -l output/hello-maestro/greet.txt\n  │ total",
		"● transition → verify\n",
		"» execute → verify: Wrote output/hello-maestro/README.md",
		"✓ run succeeded in verify\nThis was Maestro's scripted replay demo",
		"#65 status succeeded (attempt 1)\n5 model call(s) · 8 tool call(s) · tokens in 4072 out 798 cache r/w 6600/4290 · $0 (replay) · ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the rendered log lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{`{"type"`, "protocol ", "run_event ", "response_chunk"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("the rendered log shows raw events (%q):\n%s", unwanted, got)
		}
	}
	if n := strings.Count(got, "movement execute (1 of at most 12)"); n != 1 {
		t.Errorf("the movement header is printed %d times (its status echo must be dropped)", n)
	}
}

// TestJobLogEvents covers the views the demo log does not reach.
func TestJobLogEvents(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	ev := func(seq int64, typ store.JobEventKind, data string) store.JobEvent {
		return store.JobEvent{JobID: 1, Seq: seq, Type: typ, Data: json.RawMessage(data), CreatedAt: at.Add(time.Duration(seq) * time.Second)}
	}
	for _, tc := range []struct {
		name   string
		events []store.JobEvent
		want   string
	}{
		{
			name: "a failed tool call with its output tail, then an error",
			events: []store.JobEvent{
				ev(1, store.JobEventProtocol, `{"type":"tool_call","call_id":"c1","tool":"Bash","args":{"command":"make test"},"requires_approval":false}`),
				ev(2, store.JobEventProtocol, `{"type":"tool_output","call_id":"c1","content":"FAIL x\n"}`),
				ev(4, store.JobEventProtocol, `{"type":"tool_end","call_id":"c1","success":false,"error_code":"exit_1"}`),
				ev(5, store.JobEventProtocol, `{"type":"error","message":"model overloaded","fatal":false,"error_type":"transient"}`),
			},
			want: "● Bash make test\n  │ FAIL x\n  ✗ Bash failed (exit_1) (3s)\n✗ error (transient): model overloaded\n",
		},
		{
			name: "text interrupted by a job status ends its line first",
			events: []store.JobEvent{
				ev(1, store.JobEventProtocol, `{"type":"response_chunk","response_id":"r","content":"half a sen","is_thinking":false}`),
				ev(2, store.JobEventStatus, `{"state":"failed","attempt":3,"error":"worker lost"}`),
			},
			want: "half a sen\n10:00:02 #2 status failed (attempt 3): worker lost\n",
		},
		{
			name: "a question to the user",
			events: []store.JobEvent{
				ev(1, store.JobEventRunEvent, `{"kind":"waiting","run_id":"r","seq":4,"time":"2026-11-25T10:00:01Z","data":{"movement":"plan","for":"user","question":"Which branch?\nmain or dev"}}`),
				ev(2, store.JobEventProtocol, `{"type":"status","message":"movement plan asks: Which branch? main or dev"}`),
				ev(3, store.JobEventComment, `{"author_kind":"user","body":"dev"}`),
			},
			want: "? movement plan asks:\n  Which branch?\n  main or dev\n10:00:03 #3 comment from user: dev\n",
		},
		{
			name: "a live model, a status that echoes nothing, unknown events raw",
			events: []store.JobEvent{
				ev(1, store.JobEventProtocol, `{"type":"ready","protocol_version":"2026-04-02","model":"claude-x","provider":"anthropic","session_id":null,"executor_type":"live"}`),
				ev(2, store.JobEventProtocol, `{"type":"status","message":"Model call failed (429); retrying in 1s (attempt 2)"}`),
				ev(3, store.JobEventNoop, `{"ok":true}`),
				ev(4, store.JobEventProtocol, `{"type":"future_thing","x":1}`),
				ev(5, store.JobEventRunEvent, `{"kind":"future_kind","data":{"y":2}}`),
			},
			want: "10:00:01 #1 model anthropic/claude-x\nModel call failed (429); retrying in 1s (attempt 2)\n" +
				"10:00:03 #3 noop {\"ok\":true}\n10:00:04 #4 protocol future_thing {\"type\":\"future_thing\",\"x\":1}\n" +
				"10:00:05 #5 run_event future_kind {\"y\":2}\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			l := newJobLog(&IOStreams{Out: &out}, false)
			l.loc = time.UTC
			for _, e := range tc.events {
				raw, _ := json.Marshal(e)
				l.add(raw, e)
			}
			l.close()
			if out.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}

var (
	// The time and the sequence number: a Bash tool's output arrives in as
	// many events as the pipe delivered chunks, so later numbers move.
	clockRE    = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d #\d+`)
	toolTookRE = regexp.MustCompile(`(?m)^(  [✓✗] .*) \((\d+(\.\d+)?(ns|µs|ms|s|m|h))+\)$`)
	runTookRE  = regexp.MustCompile(`(?m)^(\d+ model call\(s\) .*) · (\d+(\.\d+)?(ns|µs|ms|s|m|h))+$`)
	lsLineRE   = regexp.MustCompile(`(?m)^  │ (total \d+|[-dl][-rwxsStT]{9}.*)$`)
)

// normalizeLog removes what differs between two runs of the same job:
// clock times, durations, the `ls -la` lines of the demo's Bash call, and
// the order of read-only tool calls of one model turn (they run
// concurrently, so their call and end lines interleave differently from
// run to run: each such block of lines is sorted).
func normalizeLog(s string) string {
	s = clockRE.ReplaceAllString(s, "hh:mm:ss #N")
	s = toolTookRE.ReplaceAllString(s, "$1")
	s = runTookRE.ReplaceAllString(s, "$1")
	s = lsLineRE.ReplaceAllString(s, "  │ <ls line>")
	lines := strings.Split(s, "\n")
	concurrent := func(l string) bool { return readOnlyRE.MatchString(l) }
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && concurrent(lines[j]) {
			j++
		}
		if j > i {
			slices.Sort(lines[i:j])
			i = j
		} else {
			i++
		}
	}
	return strings.Join(lines, "\n")
}

var readOnlyRE = regexp.MustCompile(`^(● (Read|Glob|Grep) |  [✓✗] (Read|Glob|Grep)( |$))`)

// TestTasksPieceDemoLive runs the piece-demo job on `maestro serve` (no
// model configured) and checks what a user sees of it: `tasks logs`
// renders as the golden file (times and the ls output normalised), `logs
// -f` prints exactly the same, `--json` the events as the API has them,
// `tasks show` lists the deliverables and `tasks download` fetches them.
// With -update it records the job's events and rewrites the golden files.
func TestTasksPieceDemoLive(t *testing.T) {
	dataDir := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": dataDir}
	env["MAESTRO_SERVER"] = startServeCLI(t, env, "--data-dir", dataDir, "--workers", "1")
	code, out, errOut := runTasksCLI(t, env, "tasks", "submit", "Summarise", "-f")
	if code != 0 {
		t.Fatalf("submit -f: exit %d\n%s\n%s", code, out, errOut)
	}
	followed := strings.TrimPrefix(out, "task 1 created (job 1, queued)\n")

	code, jsonl, errOut := runTasksCLI(t, env, "tasks", "logs", "1", "--json")
	if code != 0 {
		t.Fatalf("logs --json: exit %d\n%s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(jsonl, "\n"), "\n")
	for i, line := range lines {
		var e store.JobEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Seq != int64(i+1) {
			t.Fatalf("logs --json line %d is not event %d: %v\n%s", i+1, i+1, err, line)
		}
	}
	if *updateGolden {
		// The recorded events, and the golden views of them.
		if err := os.WriteFile(pieceDemoEvents, []byte(jsonl), 0o644); err != nil {
			t.Fatal(err)
		}
		for golden, tty := range map[string]bool{pieceDemoGolden: false, pieceDemoColorGolden: true} {
			view := renderLog(t, []byte(jsonl), &IOStreams{OutTTY: tty, Getenv: func(string) string { return "" }}, false)
			if err := os.WriteFile(golden, []byte(view), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	code, logs, errOut := runTasksCLI(t, env, "tasks", "logs", "1")
	if code != 0 {
		t.Fatalf("logs: exit %d\n%s", code, errOut)
	}
	if followed != logs {
		t.Errorf("logs -f and logs differ:\n%s", lineDiff(logs, followed))
	}
	if strings.Contains(logs, "\x1b[") {
		t.Errorf("ANSI escapes on a non-terminal:\n%s", logs)
	}
	recorded, err := os.ReadFile(pieceDemoEvents)
	if err != nil {
		t.Fatal(err)
	}
	want := normalizeLog(renderLog(t, recorded, &IOStreams{}, false))
	if got := normalizeLog(logs); got != want {
		t.Errorf("the live piece-demo log differs from the recorded one (the demo changed? go test -run TestTasksPieceDemoLive -update):\n%s", lineDiff(want, got))
	}

	// show lists the deliverables; download writes them, byte for byte.
	code, show, _ := runTasksCLI(t, env, "tasks", "show", "1")
	if code != 0 || !regexp.MustCompile(`(?m)^deliverables \(output/\):\n\s+140 B  \S+ \S+  hello-maestro/README\.md\n\s+67 B  \S+ \S+  hello-maestro/greet\.txt\n  2 file\(s\), 207 B · maestro tasks download 1$`).MatchString(show) {
		t.Fatalf("show: exit %d\n%s", code, show)
	}
	dir := filepath.Join(t.TempDir(), "dl")
	code, out, errOut = runTasksCLI(t, env, "tasks", "download", "1", "-o", dir)
	if code != 0 || !strings.Contains(out, "wrote "+filepath.Join(dir, "hello-maestro", "greet.txt")+" (67 B)") || !strings.Contains(out, "2 file(s), 207 B in "+dir) {
		t.Fatalf("download: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, name := range []string{"README.md", "greet.txt"} {
		got, err := os.ReadFile(filepath.Join(dir, "hello-maestro", name))
		want, _ := os.ReadFile(filepath.Join(dataDir, "tasks", "1", "work", "output", "hello-maestro", name))
		if err != nil || len(want) == 0 || !bytes.Equal(got, want) {
			t.Errorf("downloaded %s: %q (%v), want %q", name, got, err, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "hello-maestro"))
	if len(entries) != 2 {
		t.Errorf("download left %d entries (temporary files?): %v", len(entries), entries)
	}
	// Never overwrites without --force, and says so before writing.
	os.WriteFile(filepath.Join(dir, "hello-maestro", "greet.txt"), []byte("mine"), 0o644)
	code, _, errOut = runTasksCLI(t, env, "tasks", "download", "1", "-o", dir)
	if data, _ := os.ReadFile(filepath.Join(dir, "hello-maestro", "greet.txt")); code != 1 || string(data) != "mine" ||
		!strings.Contains(errOut, "already exist") || !strings.Contains(errOut, "--force") {
		t.Fatalf("download over an existing file: exit %d, file %q\n%s", code, data, errOut)
	}
	code, out, errOut = runTasksCLI(t, env, "tasks", "download", "1", "hello-maestro/greet.txt", "-o", dir, "--force")
	if data, _ := os.ReadFile(filepath.Join(dir, "hello-maestro", "greet.txt")); code != 0 || !strings.HasPrefix(string(data), "hello, world\n") ||
		strings.Count(out, "wrote ") != 1 {
		t.Fatalf("download --force of one file: exit %d, file %q\n%s\n%s", code, data, out, errOut)
	}
	code, _, errOut = runTasksCLI(t, env, "tasks", "download", "1", "nothing-here", "-o", dir)
	if code != 1 || !strings.Contains(errOut, `no deliverable "nothing-here"`) || !strings.Contains(errOut, "hello-maestro/README.md") {
		t.Fatalf("download of a missing path: exit %d\n%s", code, errOut)
	}
	// The default directory is ./task-<id>/ (relative to the current directory).
	t.Chdir(t.TempDir())
	code, out, errOut = runTasksCLI(t, env, "tasks", "download", "1", "hello-maestro")
	if _, err := os.Stat(filepath.Join("task-1", "hello-maestro", "README.md")); code != 0 || err != nil {
		t.Fatalf("download into the default directory: exit %d (%v)\n%s\n%s", code, err, out, errOut)
	}
}

// TestTasksDownloadRefusesEscapes: a server that lists a path leading out
// of the download directory gets nothing written, anywhere; nor does a
// symlink planted in the directory lead a write outside it.
func TestTasksDownloadRefusesEscapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path, wantErr string
		symlink             bool // the download directory holds link → a directory outside it
	}{
		{name: "parent", path: "../x", wantErr: `"../x"`},
		{name: "nested parent", path: "a/../../x", wantErr: `"a/../../x"`},
		{name: "absolute", path: "/tmp/maestro-hostile-x", wantErr: `"/tmp/maestro-hostile-x"`},
		{name: "backslash", path: `..\x`, wantErr: "backslash"},
		{name: "empty", path: "", wantErr: "not empty"},
		{name: "dot", path: ".", wantErr: "naming a file"},
		{name: "through a symlink", path: "link/x", symlink: true, wantErr: "link/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requested := make(chan string, 10)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/api/v1/tasks/7/deliverables":
					fmt.Fprintf(w, `{"files":[{"path":"ok.txt","size":2},{"path":%q,"size":6}]}`, tc.path)
				case strings.HasPrefix(r.URL.Path, "/api/v1/tasks/7/deliverables/"):
					requested <- r.URL.Path
					w.Write([]byte("pwned!"))
				default:
					http.NotFound(w, r)
				}
			}))
			defer ts.Close()
			base := t.TempDir()
			dir := filepath.Join(base, "out")
			outside := filepath.Join(base, "outside")
			os.MkdirAll(outside, 0o755)
			if tc.symlink {
				os.MkdirAll(dir, 0o755)
				if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := runTasksCLI(t, map[string]string{}, "tasks", "download", "7", "-o", dir, "--server", ts.URL)
			if code != 1 || !strings.Contains(errOut, tc.wantErr) {
				t.Fatalf("exit %d, want 1 with %s:\n%s\n%s", code, tc.wantErr, out, errOut)
			}
			for _, p := range []string{filepath.Join(base, "x"), filepath.Join(outside, "x"), "/tmp/maestro-hostile-x"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
			if !tc.symlink {
				// Refused before any request for a file: nothing written.
				if len(requested) != 0 {
					t.Errorf("files were requested before the list was checked: %s", <-requested)
				}
				if _, err := os.Stat(dir); err == nil {
					t.Errorf("%s was created", dir)
				}
			}
		})
	}
}

// lineDiff shows the first lines where two texts differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\nwant %q\ngot  %q", i+1, wl, gl)
		}
	}
	return "(equal)"
}

// runAndJob is one event of TestRunAndJobLogDrawAlike: a protocol message
// or a piece run's event.
type runAndJob struct {
	msg protocol.Message
	run engine.Event
}

// TestRunAndJobLogDrawAlike: `maestro run` and `maestro tasks logs` draw
// the same events with the same code, line for line: the run's renderer
// fed the events as they happen, and a job log fed them as the job's
// events (the job's time stamps left aside).
func TestRunAndJobLogDrawAlike(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	events := []runAndJob{
		{msg: protocol.Ready{ProtocolVersion: protocol.Version, Model: "maestro-replay-v1", Provider: "replay", ExecutorType: protocol.ExecutorReplay}},
		{msg: protocol.SessionInfo{Cwd: "/work/ws"}},
		{run: engine.MovementStarted{Movement: "plan", Number: 1, MaxMovements: 5}},
		{msg: protocol.ResponseStart{ResponseID: "r1"}},
		{msg: protocol.ResponseChunk{ResponseID: "r1", Content: "Look at the", IsThinking: true}},
		{msg: protocol.ResponseChunk{ResponseID: "r1", Content: " files."}},
		{msg: protocol.ResponseChunk{ResponseID: "r1", Content: " Checking"}},
		{msg: protocol.ResponseEnd{ResponseID: "r1", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5}}},
		{msg: protocol.ToolCall{CallID: "c1", Tool: "Bash", Args: json.RawMessage(`{"command":"make test"}`)}},
		{msg: protocol.ToolStart{CallID: "c1"}},
		{msg: protocol.ToolOutput{CallID: "c1", Content: "FAIL x\n"}},
		{msg: protocol.ToolEnd{CallID: "c1", Success: false, ErrorCode: "exit_1"}},
		{msg: protocol.ToolCall{CallID: "c2", Tool: "transition", Args: json.RawMessage(`{"next":"fix"}`)}},
		{msg: protocol.ToolEnd{CallID: "c2", Success: true}},
		{run: engine.Transition{From: "plan", To: "fix", Summary: "tests fail"}},
		{msg: protocol.Status{Message: "Model call failed (429); retrying"}},
		{msg: protocol.Error{Message: "model overloaded", ErrorType: "transient"}},
		{msg: protocol.ServerRequest{RequestID: "q1", RequestType: "approval", CallID: "c3", Tool: "Bash", Args: json.RawMessage(`{}`), Reason: "runs rm"}},
		{msg: protocol.ServerRequestResolved{RequestID: "q1", RequestType: protocol.RequestApproval, CallID: "c3", Resolution: protocol.ResolutionApproved, ResolvedBy: protocol.ResolvedByUser}},
		{run: engine.Waiting{Movement: "fix", For: "user", Question: "Which branch?\nmain or dev"}},
		{run: engine.Complete{Movement: "fix", Status: engine.StatusSucceeded}},
	}
	var runOut bytes.Buffer
	run := newRenderer(&IOStreams{Out: &runOut, ErrOut: &runOut, Getenv: func(string) string { return "" }}, true)
	var jobOut bytes.Buffer
	job := newJobLog(&IOStreams{Out: &jobOut}, false)
	job.loc = time.UTC
	for i, ev := range events {
		when := at.Add(time.Duration(i) * time.Second)
		e := store.JobEvent{JobID: 1, Seq: int64(i + 1), CreatedAt: when}
		if ev.msg != nil {
			run.protocol(ev.msg, when, "")
			e.Type = "protocol"
			e.Data, _ = protocol.Marshal(ev.msg)
		} else {
			run.RunEvent(engine.Record{RunID: "r", Seq: i, Time: when, Event: ev.run})
			e.Type = "run_event"
			e.Data, _ = json.Marshal(engine.Record{RunID: "r", Seq: i, Time: when, Event: ev.run})
		}
		raw, _ := json.Marshal(e)
		job.add(raw, e)
	}
	run.endText()
	job.close()
	jobView := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d #\d+ `).ReplaceAllString(jobOut.String(), "")
	if jobView != runOut.String() {
		t.Errorf("the job log and the run differ:\n%s\njob log:\n%s\nrun:\n%s", lineDiff(runOut.String(), jobView), jobView, runOut.String())
	}
	for _, want := range []string{
		"▶ REPLAY scripted model turns (replay/maestro-replay-v1), tools run for real\n",
		"\n── movement plan (1 of at most 5) ──\n",
		"∴ Look at the\n files. Checking\n",
		"● Bash make test\n  │ FAIL x\n  ✗ Bash failed (exit_1) (3s)\n",
		"● transition → fix\n  ✓ transition (1s)\n» plan → fix: tests fail\n",
		"✗ error (transient): model overloaded\n? approval for Bash: runs rm\nrequest q1 resolved\n",
		"? movement fix asks:\n  Which branch?\n  main or dev\n✓ run succeeded in fix\n",
	} {
		if !strings.Contains(runOut.String(), want) {
			t.Errorf("the view lacks %q:\n%s", want, runOut.String())
		}
	}
}

// TestRunEventsDrawnOnce: a run event is drawn once, from the event. A job
// log recorded before run events were sent once repeats each as a status
// right after it, which is not drawn again; a status that is not such a
// repetition is always drawn.
func TestRunEventsDrawnOnce(t *testing.T) {
	move := engine.MovementStarted{Movement: "plan", Number: 1, MaxMovements: 5}
	for _, tc := range []struct {
		name   string
		events []runAndJob
		want   string
	}{
		{"the event alone", []runAndJob{{run: move}}, "\n── movement plan (1 of at most 5) ──\n"},
		{"its recorded repetition", []runAndJob{{run: move}, {msg: protocol.Status{Message: move.Describe()}}}, "\n── movement plan (1 of at most 5) ──\n"},
		{"another status", []runAndJob{{run: move}, {msg: protocol.Status{Message: "starting"}}}, "\n── movement plan (1 of at most 5) ──\nstarting\n"},
		{"the same text later", []runAndJob{{run: move}, {msg: protocol.ResponseEnd{}}, {msg: protocol.Status{Message: move.Describe()}}},
			"\n── movement plan (1 of at most 5) ──\nmovement plan (1 of at most 5)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := newRenderer(&IOStreams{Out: &out, ErrOut: &out, Getenv: func(string) string { return "" }}, false)
			for _, ev := range tc.events {
				if ev.msg != nil {
					r.Event(ev.msg)
				} else {
					r.RunEvent(engine.Record{Event: ev.run})
				}
			}
			if out.String() != tc.want {
				t.Errorf("got:\n%q\nwant:\n%q", out.String(), tc.want)
			}
		})
	}
}

// TestJobLogWithoutEcho: the recorded piece-demo log as jobs write it once
// the engine sends each run event once (the status repeating a run event
// right after it removed, where the recording has one), renders exactly
// as the golden files say.
func TestJobLogWithoutEcho(t *testing.T) {
	events, err := os.ReadFile(pieceDemoEvents)
	if err != nil {
		t.Fatal(err)
	}
	var kept [][]byte
	var lastRun string
	for _, line := range bytes.Split(bytes.TrimRight(events, "\n"), []byte("\n")) {
		var e store.JobEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		prev := lastRun
		lastRun = ""
		switch e.Type {
		case "run_event":
			var rec engine.Record
			if err := json.Unmarshal(e.Data, &rec); err != nil {
				t.Fatal(err)
			}
			lastRun = rec.Event.Describe()
		case "protocol":
			if m, err := protocol.DecodeServer(e.Data); err == nil {
				if s, ok := m.(protocol.Status); ok && prev != "" && s.Message == prev {
					continue
				}
			}
		}
		kept = append(kept, line)
	}
	for golden, tty := range map[string]bool{pieceDemoGolden: false, pieceDemoColorGolden: true} {
		got := renderLog(t, append(bytes.Join(kept, []byte("\n")), '\n'), &IOStreams{OutTTY: tty, Getenv: func(string) string { return "" }}, false)
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("the log without repetitions differs from %s:\n%s", golden, lineDiff(string(want), got))
		}
	}
}
