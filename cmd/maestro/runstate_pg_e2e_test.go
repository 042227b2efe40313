package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
)

// resumeScenario is a replay of piece general (execute → verify). In
// verify, whose tools are read-only but for Bash, the first turn prints a
// line; the second runs a Bash command that sleeps only in a workspace
// under worker B's data directory (data-workerB, startResumeWorker); the
// third completes. (A marker file written in verify would need Write,
// which verify does not offer: the call was refused, B never slept, and
// the test passed only when its poll caught the few milliseconds between
// verify's first turn and the end of the job.)
const resumeScenario = `{
  "schemaVersion": "evalops.maestro.scripted-scenario.v1",
  "id": "resume-across-workers",
  "description": "A run resumed on another worker in its second movement.",
  "metadata": {"recordedAt": "2026-11-26T00:00:00Z", "toolsExpected": ["transition", "Bash", "complete"]},
  "frames": [
    {"index": 0, "statements": [{"kind": "tool_call", "tool": "transition",
      "input": {"next": "verify", "summary": "Nothing to execute; verify."}}]},
    {"index": 1, "statements": [{"kind": "tool_call", "tool": "Bash",
      "input": {"command": "echo verify-first-turn: run on the first worker"}}]},
    {"index": 2, "statements": [{"kind": "tool_call", "tool": "Bash",
      "input": {"command": "case \"$PWD\" in */data-workerB/*) sleep 300;; esac; echo checked-after-resume"}}]},
    {"index": 3, "statements": [{"kind": "tool_call", "tool": "complete",
      "input": {"status": "success", "result": "verified"}}]}
  ]
}`

// TestRunStateResumesOnAnotherWorker (issue 21): a two-movement piece job
// runs on worker B, which is SIGKILLed in its second movement; worker C,
// with its own empty data directory, resumes it from the run state in
// PostgreSQL at that movement with the movement's conversation: it plays
// on from the interrupted turn (the Bash call, run again as documented)
// without running the first movement or the movement's first turn again.
func TestRunStateResumesOnAnotherWorker(t *testing.T) {
	t.Parallel()
	dsn := ownPostgres(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	payload, err := json.Marshal(map[string]any{"task": "Verify the workspace.", "replay": json.RawMessage(resumeScenario)})
	if err != nil {
		t.Fatal(err)
	}
	job, err := st.Enqueue(ctx, store.NewJob{Piece: "general", Payload: payload, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}

	b := startResumeWorker(ctx, t, dsn, "workerB")
	// B is in verify with the first turn's result saved, and its log of
	// that turn has reached the store (the state is saved before the job
	// events are flushed): kill it there.
	loggedTurn := func() bool {
		evs, err := st.ReadJobEvents(ctx, job.ID, 0, store.MaxListLimit)
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Attempt == 1 && (e.Type == store.JobEventRunEvent || e.Type == store.JobEventProtocol) && strings.Contains(string(e.Data), "verify-first-turn") {
				return true
			}
		}
		return false
	}
	for {
		rs, err := st.RunState(ctx, job.ID)
		if err == nil && rs.Movement == "verify" && strings.Contains(gunzipString(t, rs.Data), "verify-first-turn") && loggedTurn() {
			break
		}
		if cur, gerr := st.GetJob(ctx, job.ID); b.exited() || ctx.Err() != nil || gerr != nil || cur.State.Terminal() {
			t.Fatalf("the job did not reach verify on worker B: job %s (error %q), %v %v %v\n%s\nthe job's log:\n%s", cur.State, cur.Error, err, gerr, ctx.Err(), tail(b.stderr.String(), 4000), jobLogText(st, job.ID))
		}
		waitABit(ctx)
	}
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.done

	c := startResumeWorker(ctx, t, dsn, "workerC")
	var done store.Job
	for {
		done, err = st.GetJob(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done.State.Terminal() {
			break
		}
		if c.exited() || ctx.Err() != nil {
			t.Fatalf("job %d is %s: worker C did not finish it: %v\n%s", job.ID, done.State, ctx.Err(), tail(c.stderr.String(), 4000))
		}
		waitABit(ctx)
	}
	if done.State != store.StateSucceeded || done.Result != "verified" || !strings.HasPrefix(done.LeaseOwner, "workerC/") {
		t.Fatalf("job = %s %q (error %q) by %s, want succeeded \"verified\" by workerC\n%s", done.State, done.Result, done.Error, done.LeaseOwner, tail(c.stderr.String(), 4000))
	}

	evs, err := st.ReadJobEvents(ctx, job.ID, 0, store.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	var first, resumed strings.Builder
	for _, e := range evs {
		if e.Type != store.JobEventRunEvent && e.Type != store.JobEventProtocol {
			continue
		}
		if e.Attempt == 1 {
			fmt.Fprintf(&first, "%s\n", e.Data)
		} else if e.Attempt == done.Attempt {
			fmt.Fprintf(&resumed, "%s\n", e.Data)
		}
	}
	for _, want := range []string{`"movement":"execute"`, `"movement":"verify"`, `verify-first-turn`} {
		if !strings.Contains(first.String(), want) {
			t.Errorf("worker B's attempt lacks %s:\n%s", want, first.String())
		}
	}
	// C continued verify: resumed (restart entry), the Bash call of the
	// interrupted turn, and neither execute nor verify's first turn.
	for _, want := range []string{`"kind":"resumed"`, `"movement":"verify","entry":"restart"`, `checked-after-resume`} {
		if !strings.Contains(resumed.String(), want) {
			t.Errorf("worker C's attempt lacks %s:\n%s", want, resumed.String())
		}
	}
	for _, unwanted := range []string{`"movement":"execute"`, `verify-first-turn`} {
		if strings.Contains(resumed.String(), unwanted) {
			t.Errorf("worker C's attempt repeated %s (the run was not resumed with its conversation):\n%s", unwanted, resumed.String())
		}
	}
}

// startResumeWorker starts `maestro worker` with one slot, a short lease
// and its own home and data directory.
func startResumeWorker(ctx context.Context, t *testing.T, dsn, name string) *worker {
	t.Helper()
	dir := t.TempDir()
	return startPGWorker(ctx, t, filepath.Join(dir, "home"), filepath.Join(dir, "data-"+name), dsn, name, "--workers", "1", "--lease", "2s")
}

// waitABit pauses a polling loop for a short while (or until ctx ends).
func waitABit(ctx context.Context) {
	tm := time.NewTimer(100 * time.Millisecond)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

func gunzipString(t *testing.T, data []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("run state in the store: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("run state in the store: %v", err)
	}
	return string(out)
}

// jobLogText is the job's log, one event a line (at most the last 8 KB),
// for a failure message: what each tool call returned shows why a run
// went another way.
func jobLogText(st store.Store, jobID int64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := st.ReadJobEvents(ctx, jobID, 0, store.MaxListLimit)
	if err != nil {
		return "(read the job's log: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d %s %s\n", e.Seq, e.Type, e.Data)
	}
	return tail(b.String(), 8000)
}
