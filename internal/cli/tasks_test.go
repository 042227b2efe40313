package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/pgtest"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/sqlite/sqlitetest"
)

// syncOut is a goroutine-safe buffer that can signal when a pattern
// appears.
type syncOut struct {
	mu    sync.Mutex
	b     bytes.Buffer
	re    *regexp.Regexp
	found chan string
}

func (b *syncOut) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.b.Write(p)
	if b.re != nil {
		if m := b.re.FindString(b.b.String()); m != "" {
			select {
			case b.found <- m:
				b.re = nil
			default:
			}
		}
	}
	return n, err
}

func (b *syncOut) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// runCLI runs one command in process and returns its exit code and output.
func runTasksCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut syncOut
	ios := &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	code := Run(ctx, ios, args)
	return code, out.String(), errOut.String()
}

// startServeCLI runs `maestro serve` in process on a free port and returns
// its base URL; the server stops when the test ends.
func startServeCLI(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	return serveInProcess(t, env, args).url
}

// askScenarioFile is a scripted model that asks which colour the fence
// should be, then finishes with the answer (the server's tests use it too).
const askScenarioFile = "../server/testdata/ask-scenario.yaml"

// TestServeAndTasks runs `maestro serve` and drives it with `maestro tasks`:
// a no-op task followed to the end, a task that asks and is answered by a
// comment while `tasks logs -f` follows it, list/show/logs, cancel and retry.
func TestServeAndTasks(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": dataDir}
	url := startServeCLI(t, env, "--data-dir", dataDir, "--workers", "1")
	env["MAESTRO_SERVER"] = url

	code, out, errOut := runTasksCLI(t, env, "tasks", "submit", "say ok", "--piece", "noop", "-f")
	if code != 0 || !strings.Contains(out, "task 1 created (job 1, queued)") || !strings.Contains(out, "status succeeded") ||
		!strings.Contains(out, "noop") || !strings.Contains(errOut, "job 1 succeeded") {
		t.Fatalf("submit -f: exit %d\n%s\n%s", code, out, errOut)
	}

	// A task that asks: follow it in the background, answer, and see the
	// follower finish with the result.
	input := filepath.Join(t.TempDir(), "brief.txt")
	os.WriteFile(input, []byte("a fence"), 0o644)
	askScenario, err := os.ReadFile(askScenarioFile)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]string{"replay": string(askScenario)})
	code, out, errOut = runTasksCLI(t, env, "tasks", "submit", "Paint the fence.", "--piece", "chat", "--payload", string(payload), "--file", input)
	if code != 0 || !strings.Contains(out, "task 2 created") {
		t.Fatalf("submit: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "input/brief.txt (7 bytes)") {
		t.Fatalf("submit does not list the file sent: %s", out)
	}
	type result struct {
		code        int
		out, errOut string
	}
	logs := make(chan result, 1)
	followOut := &syncOut{re: regexp.MustCompile(`status waiting_human`), found: make(chan string, 1)}
	go func() {
		var errBuf syncOut
		ios := &IOStreams{In: strings.NewReader(""), Out: followOut, ErrOut: &errBuf, Getenv: func(k string) string { return env[k] }}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		c := Run(ctx, ios, []string{"tasks", "logs", "2", "-f"})
		logs <- result{c, followOut.String(), errBuf.String()}
	}()
	select {
	case <-followOut.found:
	case r := <-logs:
		t.Fatalf("logs -f ended before the job waited: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	case <-time.After(60 * time.Second):
		t.Fatalf("the job did not wait for an answer:\n%s", followOut.String())
	}
	// The job moved the file sent with the task into input/ before it ran.
	if data, err := os.ReadFile(filepath.Join(dataDir, "tasks", "2", "work", "input", "brief.txt")); err != nil || string(data) != "a fence" {
		t.Fatalf("uploaded file: %q %v", data, err)
	}
	code, out, errOut = runTasksCLI(t, env, "tasks", "show", "2")
	if code != 0 || !strings.Contains(out, "waiting_human") || !strings.Contains(out, "Which colour should the fence be?") ||
		!strings.Contains(out, "maestro tasks comment 2") {
		t.Fatalf("show waiting task: exit %d\n%s\n%s", code, out, errOut)
	}
	// The log of a job that waits says how to answer, not to follow it.
	code, _, errOut = runTasksCLI(t, env, "tasks", "logs", "2")
	if code != 0 || !strings.Contains(errOut, `job 2 waits for your answer: maestro tasks comment 2 "…"`) {
		t.Fatalf("logs of a waiting job: exit %d\n%s", code, errOut)
	}
	code, out, errOut = runTasksCLI(t, env, "tasks", "comment", "2", "blue")
	if code != 0 || !strings.Contains(out, "job 2 resumed (queued)") {
		t.Fatalf("comment: exit %d\n%s\n%s", code, out, errOut)
	}
	var r result
	select {
	case r = <-logs:
	case <-time.After(60 * time.Second):
		t.Fatalf("logs -f did not end after the answer:\n%s", followOut.String())
	}
	if r.code != 0 || !strings.Contains(r.out, "comment from user: blue") || !strings.Contains(r.out, "status succeeded") ||
		!strings.Contains(r.out, "The fence is painted blue.") {
		t.Fatalf("logs -f: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
	// Following across the question and the answer printed every event
	// once, in order: exactly what the finished log prints.
	code, out, _ = runTasksCLI(t, env, "tasks", "logs", "2")
	if code != 0 || out != r.out {
		t.Fatalf("logs -f and logs differ: %s", lineDiff(out, r.out))
	}
	if !strings.Contains(out, "? movement respond asks:\n  Which colour should the fence be?\n") || strings.Contains(out, `{"type"`) {
		t.Fatalf("logs does not render the question, or shows raw events:\n%s", out)
	}
	code, out, _ = runTasksCLI(t, env, "tasks", "logs", "2", "-f", "--json")
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		var e store.JobEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Seq != int64(i+1) {
			t.Fatalf("logs -f --json: exit %d, line %d is not event %d (%v):\n%s", code, i+1, i+1, err, out)
		}
	}

	code, out, _ = runTasksCLI(t, env, "tasks", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^2\s+succeeded\s+chat\s+.*Paint the fence\.$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^1\s+succeeded\s+noop`).MatchString(out) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	code, out, _ = runTasksCLI(t, env, "tasks", "logs", "1")
	if code != 0 || !strings.Contains(out, "#1 status queued") || !strings.Contains(out, "status succeeded") {
		t.Fatalf("logs: exit %d\n%s", code, out)
	}
	code, out, _ = runTasksCLI(t, env, "tasks", "show", "2", "--json")
	var detail struct {
		Jobs []store.Job `json:"jobs"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &detail) != nil || len(detail.Jobs) != 1 || detail.Jobs[0].Result != "The fence is painted blue." {
		t.Fatalf("show --json: exit %d\n%s", code, out)
	}

	// Cancel and retry act on the latest job; a finished job cannot be
	// cancelled.
	code, _, errOut = runTasksCLI(t, env, "tasks", "cancel", "1")
	if code != 1 || !strings.Contains(errOut, "409: job 1 has already finished (succeeded); there is nothing to cancel") || strings.Contains(errOut, "transition") {
		t.Fatalf("cancel a finished job: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runTasksCLI(t, env, "tasks", "show", "99")
	if code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("show a missing task: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runTasksCLI(t, env, "tasks", "show", "x")
	if code != 2 || !strings.Contains(errOut, "task id") {
		t.Fatalf("show x: exit %d\n%s", code, errOut)
	}
}

func TestServeAuth(t *testing.T) {
	t.Parallel()
	// Not loopback and no token: refused before anything starts.
	dataDir := t.TempDir()
	code, _, errOut := runTasksCLI(t, map[string]string{}, "serve", "--listen", "0.0.0.0:0", "--data-dir", dataDir)
	if code != ExitUsage || !strings.Contains(errOut, "token is required") || !strings.Contains(errOut, "MAESTRO_API_TOKEN") {
		t.Fatalf("serve on 0.0.0.0 without a token: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "maestro.db")); err == nil {
		t.Fatal("serve opened the store before refusing")
	}
	code, _, errOut = runTasksCLI(t, map[string]string{}, "serve", "--listen", "nonsense", "--data-dir", dataDir)
	if code != ExitUsage || !strings.Contains(errOut, "--listen") {
		t.Fatalf("bad --listen: exit %d\n%s", code, errOut)
	}

	// A token from the environment is required from clients.
	env := map[string]string{"MAESTRO_API_TOKEN": "tok-123"}
	url := startServeCLI(t, env, "--data-dir", dataDir, "--workers", "0")
	code, _, errOut = runTasksCLI(t, map[string]string{}, "tasks", "list", "--server", url)
	if code != 1 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "--token") {
		t.Fatalf("no token: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runTasksCLI(t, map[string]string{}, "tasks", "list", "--server", url, "--token", "wrong")
	if code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("wrong token: exit %d\n%s", code, errOut)
	}
	code, out, errOut := runTasksCLI(t, env, "tasks", "submit", "hi", "--server", url)
	if code != 0 || !strings.Contains(out, "task 1 created") {
		t.Fatalf("with the token: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runTasksCLI(t, map[string]string{}, "tasks", "list", "--server", "ftp://x")
	if code != ExitUsage || !strings.Contains(errOut, "--server") {
		t.Fatalf("bad --server: exit %d\n%s", code, errOut)
	}
}

// cutStream serves the API but ends the first event stream after two
// events, as a dropped connection would.
type cutStream struct {
	h   http.Handler
	mu  sync.Mutex
	cut bool
}

type countingWriter struct {
	http.ResponseWriter
	ids    int
	cancel context.CancelFunc
	limit  int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	for _, f := range bytes.SplitAfter(p, []byte("\n\n")) {
		if w.ids >= w.limit {
			w.cancel()
			break // the rest is swallowed: the client never sees it
		}
		if bytes.HasPrefix(f, []byte("id: ")) {
			w.ids++
		}
		w.ResponseWriter.Write(f)
	}
	return len(p), nil
}

func (w *countingWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (c *cutStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	first := !c.cut && strings.HasSuffix(r.URL.Path, "/events") && r.Header.Get("Accept") == "text/event-stream"
	if first {
		c.cut = true
	}
	c.mu.Unlock()
	if !first {
		c.h.ServeHTTP(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	c.h.ServeHTTP(&countingWriter{ResponseWriter: w, cancel: cancel, limit: 5}, r.WithContext(ctx))
}

// TestTasksLogsReconnects: `tasks logs -f` whose stream drops resumes with
// Last-Event-ID and prints every event exactly once.
func TestTasksLogsReconnects(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t, sqlite.Options{})
	api, err := server.New(server.Config{Store: st, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(&cutStream{h: api})
	defer ts.Close()
	_, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "events"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := st.Claim(t.Context(), store.ClaimParams{Worker: "w", Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatal(err)
	}
	lease := jobs[0].Lease()
	// Steps around a streamed text whose first chunk is the last event
	// the first connection delivers (the cut is after event 5).
	evs := []store.NewJobEvent{{Type: "step", Data: json.RawMessage(`{"n":0}`)}}
	for _, chunk := range []string{"Hel", "lo, ", "world"} {
		evs = append(evs, store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(fmt.Sprintf(`{"type":"response_chunk","response_id":"r1","content":%q,"is_thinking":false}`, chunk))})
	}
	for i := 1; i < 4; i++ {
		evs = append(evs, store.NewJobEvent{Type: "step", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	if _, err := st.AppendJobEvents(t.Context(), lease, evs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Complete(t.Context(), lease, "done"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTasksCLI(t, map[string]string{}, "tasks", "logs", "1", "-f", "--server", ts.URL)
	if code != 0 || !strings.Contains(errOut, "resuming after event 5") {
		t.Fatalf("logs -f: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "\nHello, world\n") {
		t.Fatalf("the streamed text is not joined across the reconnection:\n%s", out)
	}
	// Every event once, in order: the same as the log read in pages.
	_, whole, _ := runTasksCLI(t, map[string]string{}, "tasks", "logs", "1", "--server", ts.URL)
	// (-f ends with the job's result, which no complete event showed.)
	if out != whole+"done\n" {
		t.Fatalf("logs -f across a reconnection and logs differ: %s", lineDiff(whole+"done\n", out))
	}
	seqs := regexp.MustCompile(`(?m) #(\d+) `).FindAllStringSubmatch(out, -1)
	done, _ := st.GetJob(t.Context(), job.ID)
	if int64(len(seqs)) != done.LastSeq-3 {
		t.Fatalf("printed %d time-stamped lines, the log has %d events, 3 of them text:\n%s", len(seqs), done.LastSeq, out)
	}
}

// pg is the package's PostgreSQL cluster (internal/pgtest), started on
// first use and stopped by TestMain.
var pg pgtest.Shared

func TestMain(m *testing.M) {
	code := pg.Main(m)
	if maestroBinDir != "" {
		os.RemoveAll(maestroBinDir)
	}
	os.Exit(code)
}

// TestServeOnPostgres: `maestro serve --db postgres://…` runs a task to
// the end, driven by `maestro tasks`.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := pg.Cluster(t).NewSchema(t)
	dataDir := t.TempDir()
	url := startServeCLI(t, map[string]string{"MAESTRO_HOME": dataDir}, "--db", dsn, "--data-dir", dataDir, "--workers", "2")
	code, out, errOut := runTasksCLI(t, map[string]string{}, "tasks", "submit", "say ok", "--piece", "noop", "-f", "--server", url)
	if code != 0 || !strings.Contains(out, "status succeeded") {
		t.Fatalf("submit -f: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "maestro.db")); err == nil {
		t.Fatal("serve --db postgres://… created a SQLite database")
	}
}
