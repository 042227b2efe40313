package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// crashScenario runs a Bash command that blocks until input/go exists,
// then completes.
const crashScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"crash","description":"block until released",
"metadata":{"recordedAt":"2026-11-23T00:00:00Z","toolsExpected":["Bash","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Bash","input":{"command":"touch output/started && while [ ! -f input/go ]; do sleep 0.05; done && echo released"}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"survived the crash"}}]}
]}`

// TestWorkerCrashReclaim: a worker is SIGKILLed mid-job; a second worker
// reclaims the job after its lease and finishes it; the event log has no
// gap and nothing of the dead attempt is repeated.
func TestWorkerCrashReclaim(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home, data := filepath.Join(dir, "home"), filepath.Join(dir, "data")
	os.MkdirAll(home, 0o755)
	// The test's own commands need no sandbox policy.
	os.WriteFile(filepath.Join(home, "config.yaml"), []byte("sandbox: off\n"), 0o600)
	dbPath := filepath.Join(data, "maestro.db")

	// Create the task while no worker holds the database.
	st, err := sqlite.Open(t.Context(), dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := json.Marshal(map[string]json.RawMessage{"replay": json.RawMessage(crashScenario)})
	task, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "wait for the go signal", Piece: "general", Payload: pl, MaxAttempts: 3})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	workDir := queue.WorkDir(data, task.ID) // the agent's workspace (input/, output/)
	release := func() { os.WriteFile(filepath.Join(workDir, "input", "go"), nil, 0o644) }
	t.Cleanup(release) // never leave the orphaned command waiting

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// The worker holds the store's lock; the test reads the file directly.
	ro, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	// Every query has its own bound, independent of ctx, so a timed-out
	// wait can still read the job for its report.
	queryRow := func(dest []any, query string, args ...any) error {
		qctx, qcancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer qcancel()
		return ro.QueryRowContext(qctx, query, args...).Scan(dest...)
	}
	lastState := "(never read)"
	readState := func() (string, int, error) {
		var state string
		var attempt int
		if err := queryRow([]any{&state, &attempt}, "SELECT state, attempt FROM jobs WHERE id = ?", job.ID); err != nil {
			return "", 0, fmt.Errorf("read job %d: %w", job.ID, err)
		}
		lastState = fmt.Sprintf("%s, attempt %d", state, attempt)
		return state, attempt, nil
	}
	jobState := func() (string, int) {
		t.Helper()
		s, a, err := readState()
		if err != nil {
			t.Fatal(err)
		}
		return s, a
	}
	var workers []*worker
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !ok() {
			select {
			case <-tick.C:
			case <-ctx.Done():
				state := lastState
				if _, _, err := readState(); err != nil {
					state += fmt.Sprintf(" (when last read; reading it now failed: %v)", err)
				} else {
					state = lastState
				}
				var b strings.Builder
				for _, w := range workers {
					fmt.Fprintf(&b, "--- worker %s (%s) stderr:\n%s\n", w.name, w.status(), w.stderr.String())
				}
				t.Fatalf("gave up waiting for %s: %v; job %d is %s\n%s", what, context.Cause(ctx), job.ID, state, b.String())
			}
		}
	}

	w1 := startWorker(ctx, t, home, data, "first")
	workers = append(workers, w1)
	waitFor("the Bash command to run", func() bool {
		_, err := os.Stat(filepath.Join(workDir, "output", "started"))
		var n int
		queryRow([]any{&n}, `SELECT count(*) FROM job_events WHERE job_id = ? AND type = 'protocol' AND data LIKE '%"tool_start"%'`, job.ID)
		s, _, serr := readState()
		return err == nil && n == 1 && serr == nil && s == string(store.StateRunning)
	})
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w1.done
	// Everything the dead attempt wrote.
	var killedAt int64
	if err := queryRow([]any{&killedAt}, "SELECT max(seq) FROM job_events WHERE job_id = ?", job.ID); err != nil {
		t.Fatal(err)
	}
	if s, a := jobState(); s != string(store.StateRunning) || a != 1 {
		t.Fatalf("after the crash the job is %s attempt %d, want running attempt 1", s, a)
	}
	release()

	w2 := startWorker(ctx, t, home, data, "second")
	workers = append(workers, w2)
	waitFor("the job to succeed", func() bool {
		s, _, err := readState()
		return err == nil && s == string(store.StateSucceeded)
	})
	if err := w2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w2.done:
		if w2.waitErr != nil {
			t.Errorf("second worker exit: %v; stderr:\n%s", w2.waitErr, w2.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("second worker still running 30s after SIGTERM; stderr:\n%s", w2.stderr.String())
	}
	ro.Close()

	st, err = sqlite.Open(t.Context(), dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.GetJob(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateSucceeded || got.Attempt != 2 || got.Result != "survived the crash" {
		t.Errorf("job = state %s attempt %d result %q, want succeeded on attempt 2", got.State, got.Attempt, got.Result)
	}
	evs, err := st.ReadJobEvents(t.Context(), job.ID, 0, store.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || int64(len(evs)) != got.LastSeq {
		t.Fatalf("%d events, last seq %d", len(evs), got.LastSeq)
	}
	// seq 1..killedAt: attempt 1 up to the crash; killedAt+1: the reaper
	// requeues it (lease expired); after that only attempt 2 writes.
	sawAttempt := map[int]bool{}
	runEvents := map[string]int64{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap", i+1, e.Seq)
		}
		sawAttempt[e.Attempt] = true
		switch {
		case e.Seq <= killedAt && e.Attempt > 1:
			t.Errorf("event %d before the crash is of attempt %d", e.Seq, e.Attempt)
		case e.Seq == killedAt+1:
			var s store.StatusEvent
			json.Unmarshal(e.Data, &s)
			if e.Type != store.JobEventStatus || s.State != store.StateQueued || s.Reason != "lease expired" || e.Attempt != 1 {
				t.Errorf("event %d after the crash = %s %s, want the reaper's status queued (lease expired)", e.Seq, e.Type, e.Data)
			}
		case e.Seq > killedAt+1 && e.Attempt != 2:
			t.Errorf("event %d after the reclaim is of attempt %d: the dead attempt wrote after the crash, or the log was replayed", e.Seq, e.Attempt)
		}
		if e.Type == store.JobEventRunEvent && e.Attempt == 2 {
			var r struct {
				RunID string `json:"run_id"`
				Seq   int    `json:"seq"`
			}
			json.Unmarshal(e.Data, &r)
			key := r.RunID + "#" + strconv.Itoa(r.Seq)
			if prev, dup := runEvents[key]; dup {
				t.Errorf("run event %s appears twice in attempt 2 (job events %d and %d)", key, prev, e.Seq)
			}
			runEvents[key] = e.Seq
		}
	}
	if !sawAttempt[1] || !sawAttempt[2] {
		t.Errorf("events of attempts %v, want both 1 and 2", sawAttempt)
	}
	if t.Failed() {
		for _, e := range evs {
			t.Logf("%d a%d %s %s", e.Seq, e.Attempt, e.Type, e.Data)
		}
	}
}

// worker is a started `maestro worker` process.
type worker struct {
	name   string
	cmd    *exec.Cmd
	stderr *proctest.Buffer
	// done is closed when the process has exited; waitErr is then
	// cmd.Wait's result.
	done    chan struct{}
	waitErr error
}

// exited reports whether the process has exited.
func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// status describes the process for a failure report.
func (w *worker) status() string {
	if !w.exited() {
		return "running"
	}
	if w.waitErr != nil {
		return "exited: " + w.waitErr.Error()
	}
	return "exited 0"
}

// startWorker starts `maestro worker` on the SQLite store in data.
func startWorker(ctx context.Context, t *testing.T, home, data, name string) *worker {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, "worker", "--lease", "2s", "--data-dir", data, "--name", name)
	// MAESTRO_DB empty: SQLite in data, whatever the environment says.
	cmd.Env = append(proctest.NoModelEnv(home), "MAESTRO_DB=")
	return launch(t, cmd)
}

// launch starts cmd (named by its --name flag) with stderr captured and
// waits for it in the background; cleanup kills it if still running.
func launch(t *testing.T, cmd *exec.Cmd) *worker {
	t.Helper()
	w := &worker{cmd: cmd, stderr: &proctest.Buffer{}, done: make(chan struct{})}
	for i, a := range cmd.Args {
		if a == "--name" && i+1 < len(cmd.Args) {
			w.name = cmd.Args[i+1]
		}
	}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.waitErr = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-w.done
	})
	return w
}
