package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

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
	taskDir := queue.TaskDir(data, task.ID)
	release := func() { os.WriteFile(filepath.Join(taskDir, "input", "go"), nil, 0o644) }
	t.Cleanup(release) // never leave the orphaned command waiting

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// The worker holds the store's lock; the test reads the file directly.
	ro, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	jobState := func() (string, int) {
		var state string
		var attempt int
		if err := ro.QueryRowContext(ctx, "SELECT state, attempt FROM jobs WHERE id = ?", job.ID).Scan(&state, &attempt); err != nil {
			t.Fatalf("read job %d: %v", job.ID, err)
		}
		return state, attempt
	}
	waitFor := func(what string, ok func() bool, w *worker) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !ok() {
			select {
			case <-tick.C:
			case <-ctx.Done():
				s, a := jobState()
				t.Fatalf("gave up waiting for %s (job %s, attempt %d); worker stderr:\n%s", what, s, a, w.stderr.String())
			}
		}
	}

	w1 := startWorker(ctx, t, home, data, "first")
	waitFor("the Bash command to run", func() bool {
		_, err := os.Stat(filepath.Join(taskDir, "output", "started"))
		var n int
		ro.QueryRowContext(ctx, `SELECT count(*) FROM job_events WHERE job_id = ? AND type = 'protocol' AND data LIKE '%"tool_start"%'`, job.ID).Scan(&n)
		s, _ := jobState()
		return err == nil && n == 1 && s == string(store.StateRunning)
	}, w1)
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w1.cmd.Wait()
	// Everything the dead attempt wrote.
	var killedAt int64
	if err := ro.QueryRowContext(ctx, "SELECT max(seq) FROM job_events WHERE job_id = ?", job.ID).Scan(&killedAt); err != nil {
		t.Fatal(err)
	}
	if s, a := jobState(); s != string(store.StateRunning) || a != 1 {
		t.Fatalf("after the crash the job is %s attempt %d, want running attempt 1", s, a)
	}
	release()

	w2 := startWorker(ctx, t, home, data, "second")
	waitFor("the job to succeed", func() bool {
		s, _ := jobState()
		return s == string(store.StateSucceeded)
	}, w2)
	if err := w2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := w2.cmd.Wait(); err != nil {
		t.Errorf("second worker exit: %v; stderr:\n%s", err, w2.stderr.String())
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
			if e.Type != store.EventTypeStatus || s.State != store.StateQueued || s.Reason != "lease expired" || e.Attempt != 1 {
				t.Errorf("event %d after the crash = %s %s, want the reaper's status queued (lease expired)", e.Seq, e.Type, e.Data)
			}
		case e.Seq > killedAt+1 && e.Attempt != 2:
			t.Errorf("event %d after the reclaim is of attempt %d: the dead attempt wrote after the crash, or the log was replayed", e.Seq, e.Attempt)
		}
		if e.Type == queue.EventRunEvent && e.Attempt == 2 {
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

type worker struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

func startWorker(ctx context.Context, t *testing.T, home, data, name string) *worker {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, "worker", "--lease", "2s", "--data-dir", data, "--name", name)
	cmd.Env = cleanEnv(home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &worker{cmd: cmd, stderr: &stderr}
}
