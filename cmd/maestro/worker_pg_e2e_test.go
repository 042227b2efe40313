package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
)

// Issue 5 acceptance, for real: 2,000 noop jobs, two `maestro worker`
// processes with 4 workers each on one PostgreSQL database.
const (
	pgE2EJobs       = 2000
	pgE2EWorkers    = 4 // per process
	pgE2EDeadline   = 3 * time.Minute
	pgE2EPoll       = 200 * time.Millisecond
	pgE2EStopBound  = 20 * time.Second // the worker drains for up to 10 s
	pgE2EQueryBound = 30 * time.Second
)

// TestWorkerProcessesPostgres: none lost, none run twice, both processes
// take part, both stop cleanly on SIGTERM.
func TestWorkerProcessesPostgres(t *testing.T) {
	t.Parallel()
	// The schema is this test's own.
	dsn := ownPostgres(t)

	ctx, cancel := context.WithTimeout(t.Context(), pgE2EDeadline+2*time.Minute)
	defer cancel()
	// Opening the store migrates the schema.
	st, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := make(map[int64]bool, pgE2EJobs)
	enqStart := time.Now()
	for i := range pgE2EJobs {
		j, err := st.Enqueue(ctx, store.NewJob{Piece: queue.NoopPiece})
		if err != nil {
			t.Fatalf("enqueue job %d of %d: %v", i+1, pgE2EJobs, err)
		}
		ids[j.ID] = true
	}
	t.Logf("enqueued %d jobs in %s", pgE2EJobs, time.Since(enqStart).Round(time.Millisecond))

	procs := []string{"procA", "procB"}
	workers := make(map[string]*worker, len(procs))
	dumpStderr := func() string {
		var b strings.Builder
		for _, name := range procs {
			if w := workers[name]; w != nil {
				fmt.Fprintf(&b, "--- %s stderr (last 4000 bytes):\n%s\n", name, tail(w.stderr.String(), 4000))
			}
		}
		return b.String()
	}
	started := time.Now()
	for _, name := range procs {
		dir := t.TempDir()
		workers[name] = startPGWorker(ctx, t, filepath.Join(dir, "home"), filepath.Join(dir, "data"), dsn, name, "--workers", fmt.Sprint(pgE2EWorkers))
	}

	// Wait until every job succeeded: poll the store's counts.
	deadline := time.NewTimer(pgE2EDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(pgE2EPoll)
	defer tick.Stop()
	var counts map[store.State]int64
	for counts[store.StateSucceeded] < pgE2EJobs {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("after %s only %v of %d jobs are done (job states %v)\n%s", pgE2EDeadline, counts[store.StateSucceeded], pgE2EJobs, counts, dumpStderr())
		}
		for name, w := range workers {
			if w.exited() {
				t.Fatalf("worker %s exited before the jobs were done: %v\n%s", name, w.cmd.ProcessState, dumpStderr())
			}
		}
		qctx, qcancel := context.WithTimeout(ctx, pgE2EQueryBound)
		c, err := st.CountJobs(qctx)
		qcancel()
		if err != nil {
			t.Fatalf("count jobs: %v\n%s", err, dumpStderr())
		}
		counts = c
	}
	elapsed := time.Since(started)
	t.Logf("%d noop jobs, %d processes x %d workers on PostgreSQL: %s (%.0f jobs/s, process start-up included)",
		pgE2EJobs, len(procs), pgE2EWorkers, elapsed.Round(time.Millisecond), pgE2EJobs/elapsed.Seconds())

	// SIGTERM: each process stops within the bound and exits 0.
	for _, name := range procs {
		if err := workers[name].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM %s: %v", name, err)
		}
	}
	for _, name := range procs {
		w := workers[name]
		select {
		case <-w.done:
			if w.waitErr != nil {
				t.Errorf("worker %s exit after SIGTERM: %v, want 0\n%s", name, w.waitErr, dumpStderr())
			}
		case <-time.After(pgE2EStopBound):
			t.Errorf("worker %s still running %s after SIGTERM\n%s", name, pgE2EStopBound, dumpStderr())
		}
	}

	// None lost: every job succeeded, nothing else is in the store.
	if counts[store.StateSucceeded] != pgE2EJobs || len(counts) != 1 {
		t.Errorf("job states = %v, want all %d succeeded", counts, pgE2EJobs)
	}
	// None run twice: one attempt each, one noop event, one start and one
	// completion; the lease owner names the slot that ran it.
	perProc := map[string]int{}
	seen := 0
	var after int64
	for {
		js, err := st.ListJobs(ctx, store.JobFilter{AfterID: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(js) == 0 {
			break
		}
		for _, j := range js {
			after = j.ID
			seen++
			if !ids[j.ID] {
				t.Errorf("job %d is in the store but the test did not enqueue it", j.ID)
				continue
			}
			delete(ids, j.ID)
			proc, _, _ := strings.Cut(j.LeaseOwner, "/")
			perProc[proc]++
			if j.State != store.StateSucceeded || j.Attempt != 1 {
				t.Errorf("job %d: state %s attempt %d, want succeeded on attempt 1", j.ID, j.State, j.Attempt)
			}
			if err := checkNoopEvents(ctx, st, j); err != nil {
				t.Errorf("job %d (owner %s): %v", j.ID, j.LeaseOwner, err)
			}
		}
		if t.Failed() && seen >= 100 {
			t.Fatalf("stopping after %d jobs checked\n%s", seen, dumpStderr())
		}
	}
	if len(ids) != 0 {
		t.Errorf("%d enqueued jobs are missing from the store", len(ids))
	}
	t.Logf("jobs per process: %v", perProc)
	for _, name := range procs {
		if perProc[name] == 0 {
			t.Errorf("process %s ran no job (jobs per process %v); both should take part", name, perProc)
		}
	}
	if len(perProc) != len(procs) {
		t.Errorf("jobs per lease owner prefix = %v, want only %v", perProc, procs)
	}
	for _, name := range procs {
		if out := workers[name].stderr.String(); strings.Contains(out, "level=ERROR") {
			t.Errorf("worker %s logged errors:\n%s", name, tail(out, 4000))
		}
	}
}

// checkNoopEvents checks a noop job's log: seq 1..n without gaps, no event
// of a second attempt, exactly one noop event, at most one claim
// ("dispatching"), one "running" and one "succeeded" status, every status
// naming a worker naming the lease owner.
func checkNoopEvents(ctx context.Context, st store.Store, j store.Job) error {
	qctx, cancel := context.WithTimeout(ctx, pgE2EQueryBound)
	defer cancel()
	evs, err := st.ReadJobEvents(qctx, j.ID, 0, store.MaxListLimit)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	var errs []error
	noops := 0
	statuses := map[store.State]int{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			errs = append(errs, fmt.Errorf("event %d has seq %d: the log has a gap", i+1, e.Seq))
		}
		if e.Attempt > 1 {
			errs = append(errs, fmt.Errorf("event %d (%s) belongs to attempt %d", e.Seq, e.Type, e.Attempt))
		}
		switch e.Type {
		case store.JobEventNoop:
			noops++
		case store.JobEventStatus:
			var s store.StatusEvent
			if err := json.Unmarshal(e.Data, &s); err != nil {
				errs = append(errs, fmt.Errorf("status event %d: %v: %s", e.Seq, err, e.Data))
				continue
			}
			statuses[s.State]++
			// Only the slot holding the lease touched the job.
			if s.Worker != "" && s.Worker != j.LeaseOwner {
				errs = append(errs, fmt.Errorf("status %s (event %d) by worker %q, but the lease owner is %q", s.State, e.Seq, s.Worker, j.LeaseOwner))
			}
		}
	}
	if int64(len(evs)) != j.LastSeq {
		errs = append(errs, fmt.Errorf("%d events, but the job's last seq is %d", len(evs), j.LastSeq))
	}
	if noops != 1 {
		errs = append(errs, fmt.Errorf("%d noop events, want exactly 1", noops))
	}
	if statuses[store.StateRunning] != 1 || statuses[store.StateSucceeded] != 1 || statuses[store.StateDispatching] > 1 {
		errs = append(errs, fmt.Errorf("status events %v, want exactly one running and one succeeded (at most one dispatching)", statuses))
	}
	if err := errors.Join(errs...); err != nil {
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "\n  %d a%d %s %s", e.Seq, e.Attempt, e.Type, e.Data)
		}
		return fmt.Errorf("%w\nevents:%s", err, b.String())
	}
	return nil
}

// startPGWorker starts `maestro worker` on the PostgreSQL database dsn,
// named name (lease owners name/1…name/N), with home and data of its own
// and flags added (e.g. --workers N).
func startPGWorker(ctx context.Context, t *testing.T, home, data, dsn, name string, flags ...string) *worker {
	t.Helper()
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"worker", "--db", dsn, "--data-dir", data, "--name", name}, flags...)
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = proctest.NoModelEnv(home)
	return launch(t, cmd)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
