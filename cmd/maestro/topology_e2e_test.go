package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/blobstore/s3test"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
)

// TestScaleOutTopology is issue 21's acceptance test (docs/scale-out.md):
// one PostgreSQL, one S3-compatible server (versitygw, POSIX backend),
// `serve` A with --workers 0, and workers B and C with data directories of
// their own, all on --artifacts s3://…. The piece and its replay scenario
// are in testdata/topology: movement gather reads the uploaded brief;
// movement report writes a marker into the scratch workspace, runs a Bash
// call that hangs only where that marker is (B's disk), asks a question,
// then writes output/report.md.
//
//   - The task, its piece and its upload go in through A's API; the job
//     runs on B.
//   - B is SIGKILLed in the middle of report, inside the Bash call (seen in
//     the store: the run state is at report and the call has begun).
//   - C claims the job once B's lease expires and resumes report with its
//     conversation: gather and report's first turn do not run again, the
//     interrupted Bash call runs again (the one step docs/scale-out.md
//     allows to repeat), on C's copy of the upload fetched from S3.
//   - The question is answered through A (`tasks comment`); C finishes.
//   - report.md, written on C, downloads through A byte for byte.
//
// The live-session part of the acceptance (a session created through one
// serve, attached through another, the same cursors) is
// TestServeSessionsAcrossProcesses, on PostgreSQL too.
func TestScaleOutTopology(t *testing.T) {
	t.Parallel()
	dsn := ownPostgres(t)
	s3 := s3test.Start(t)
	bucket := s3.NewBucket(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pieceYAML := readTestdata(t, "topology/topology-report.yaml")
	scenario := readTestdata(t, "topology/scenario.json")

	artifacts := "s3://" + bucket + "/maestro"
	type machine struct {
		env  []string
		data string
	}
	newMachine := func() machine {
		dir := t.TempDir()
		return machine{env: append(proctest.NoModelEnv(filepath.Join(dir, "home")), s3.Env()...), data: filepath.Join(dir, "data")}
	}
	mA, mB, mC := newMachine(), newMachine(), newMachine()
	urlA, stderrA, stopA := startServe(ctx, t, mA.env, "--workers", "0", "--db", dsn, "--data-dir", mA.data, "--artifacts", artifacts, "--name", "serveA")
	startWorkerOn := func(m machine, name string) *worker {
		cmd := exec.CommandContext(ctx, binary, "worker", "--db", dsn, "--data-dir", m.data, "--artifacts", artifacts,
			"--workers", "1", "--lease", "2s", "--name", name)
		cmd.Env = m.env
		return launch(t, cmd)
	}
	b := startWorkerOn(mB, "workerB")
	var c *worker
	dump := func() string {
		s := fmt.Sprintf("--- serve A:\n%s\n--- worker B:\n%s", tail(stderrA.String(), 3000), tail(b.stderr.String(), 3000))
		if c != nil {
			s += "\n--- worker C:\n" + tail(c.stderr.String(), 3000)
		}
		return s
	}

	// The piece is stored through A, where every worker loads it from.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, urlA+api.PiecesPath, bytes.NewReader(pieceYAML))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("store the piece through A: %s\n%s", resp.Status, dump())
	}

	// The task and its upload go in through A, as `tasks submit --file`.
	brief := []byte("Brief: describe the topology. Machines A, B, C.\n")
	briefPath := filepath.Join(t.TempDir(), "brief.txt")
	if err := os.WriteFile(briefPath, brief, 0o644); err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(map[string]json.RawMessage{"replay": scenario})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := tasksCLI(ctx, mA.env, urlA, "submit", "Report on the topology", "--piece", "topology-report",
		"--file", briefPath, "--payload", string(payload), "--max-attempts", "4", "--json")
	var created api.CreateTaskResponse
	if err == nil {
		err = json.Unmarshal([]byte(out), &created)
	}
	if err != nil {
		t.Fatalf("submit through A: %v\nstdout:\n%s\nstderr:\n%s\n%s", err, out, errOut, dump())
	}
	taskID, jobID := created.Task.ID, created.Job.ID
	if len(created.Files) != 1 || created.Files[0].Path != "brief.txt" {
		t.Fatalf("A received the files %+v, want brief.txt", created.Files)
	}

	// B runs it; kill B inside report's Bash call: the run state in the
	// store is at report with the marker turn saved, and the call has
	// begun (its event is in the store).
	waitStore(ctx, t, "worker B to be inside report's Bash call", dump, func() (bool, error) {
		if b.exited() {
			return false, errors.New("worker B exited")
		}
		rs, err := st.RunState(ctx, jobID)
		if err != nil || rs.Movement != "report" || !strings.Contains(gunzipString(t, rs.Data), "marker of the first worker") {
			return false, nil
		}
		return strings.Contains(attemptEvents(ctx, t, st, jobID, 1), "sleep 300"), nil
	})
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.done
	// B read the upload in gather (its own copy, fetched from S3).
	if first := attemptEvents(ctx, t, st, jobID, 1); !strings.Contains(first, `"movement":"gather"`) || !readSucceeded(first, "input/brief.txt") {
		t.Errorf("worker B's attempt did not read the upload in gather:\n%s", first)
	}

	// C resumes report and asks the question.
	c = startWorkerOn(mC, "workerC")
	var asked store.Job
	waitStore(ctx, t, "the job to wait for an answer", dump, func() (bool, error) {
		asked, err = st.GetJob(ctx, jobID)
		if err != nil || asked.State.Terminal() {
			return false, fmt.Errorf("job %s (%q): %v", asked.State, asked.Error, err)
		}
		return asked.State == store.StateWaitingHuman, nil
	})
	resumed := attemptEvents(ctx, t, st, jobID, asked.Attempt)
	if by := claimedBy(ctx, t, st, jobID); asked.Attempt < 2 || !strings.HasPrefix(by[1], "workerB/") || !strings.HasPrefix(by[asked.Attempt], "workerC/") {
		t.Errorf("the question was asked by attempt %d; attempts were claimed by %v; want attempt 1 on worker B and the asking attempt on worker C", asked.Attempt, by)
	}
	// The resumed attempt continued report (restart entry) with the
	// interrupted Bash call, on the upload C fetched from S3.
	for _, want := range []string{`"kind":"resumed"`, `"movement":"report","entry":"restart"`, `brief-checked-after-resume`, "Machines A, B, C."} {
		if !strings.Contains(resumed, want) {
			t.Errorf("worker C's attempt lacks %s:\n%s", want, resumed)
		}
	}
	for _, unwanted := range []string{`"movement":"gather"`, "marker of the first worker"} {
		if strings.Contains(resumed, unwanted) {
			t.Errorf("worker C's attempt repeated %s (report was not resumed with its conversation):\n%s", unwanted, resumed)
		}
	}
	// The conversation carried over: the run state C saved holds B's
	// marker turn and C's Bash result.
	if rs, err := st.RunState(ctx, jobID); err != nil {
		t.Errorf("run state: %v", err)
	} else if s := gunzipString(t, rs.Data); rs.Movement != "report" || !strings.Contains(s, "marker of the first worker") || !strings.Contains(s, "brief-checked-after-resume") {
		t.Errorf("run state at the question: movement %q, want report with B's marker turn and C's Bash result:\n%s", rs.Movement, tail(s, 3000))
	}

	// The answer goes in through A; the job finishes on C.
	if out, errOut, err := tasksCLI(ctx, mA.env, urlA, "comment", fmt.Sprint(taskID), "Topology report"); err != nil || !strings.Contains(out, "resumed") {
		t.Fatalf("answer through A: %v\n%s\n%s\n%s", err, out, errOut, dump())
	}
	var done store.Job
	waitStore(ctx, t, "the job to finish", dump, func() (bool, error) {
		done, err = st.GetJob(ctx, jobID)
		return err == nil && done.State.Terminal(), err
	})
	if done.State != store.StateSucceeded || done.Result != "report written to output/report.md" || !strings.HasPrefix(done.LeaseOwner, "workerC/") {
		t.Fatalf("job = %s %q (error %q) by %q, want succeeded on worker C\n%s", done.State, done.Result, done.Error, done.LeaseOwner, dump())
	}

	// No step ran twice but the interrupted Bash call.
	calls := map[string]int{}
	for attempt := 1; attempt <= done.Attempt; attempt++ {
		for _, call := range toolCalls(attemptEvents(ctx, t, st, jobID, attempt)) {
			calls[call]++
		}
	}
	for call, n := range calls {
		want := 1
		if strings.Contains(call, "sleep 300") {
			want = 2
		}
		if n != want {
			t.Errorf("tool call %s ran %d times, want %d", call, n, want)
		}
	}
	if len(calls) != 7 {
		t.Errorf("tool calls over all attempts: %v, want the scenario's 7 distinct calls", calls)
	}

	// The deliverable written on C downloads through A, byte for byte.
	want := reportContent(t, scenario)
	dl := filepath.Join(t.TempDir(), "dl")
	if out, errOut, err := tasksCLI(ctx, mA.env, urlA, "download", fmt.Sprint(taskID), "-o", dl); err != nil {
		t.Fatalf("download through A: %v\n%s\n%s", err, out, errOut)
	}
	if got, err := os.ReadFile(filepath.Join(dl, "report.md")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("report.md downloaded through A = %q, %v; want %q", got, err, want)
	}
	if got, err := os.ReadFile(filepath.Join(queue.WorkDir(mC.data, taskID), "output", "report.md")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("report.md on C = %q, %v; want %q", got, err, want)
	}
	// The upload was materialised on C from the store; A's disk holds no
	// task files or staged uploads.
	if got, err := os.ReadFile(filepath.Join(queue.WorkDir(mC.data, taskID), "input", "brief.txt")); err != nil || !bytes.Equal(got, brief) {
		t.Errorf("C's input/brief.txt = %q, %v", got, err)
	}
	for _, p := range []string{filepath.Join(mA.data, "tasks"), filepath.Join(mA.data, "uploads")} {
		if ents, err := os.ReadDir(p); !errors.Is(err, fs.ErrNotExist) && len(ents) > 0 {
			t.Errorf("A's data directory holds %s (%d entries): the files should be in the store only", p, len(ents))
		}
	}
	bs, err := blobstore.OpenS3(ctx, s3.Config(bucket, "maestro"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := blobstore.ReadAll(ctx, bs, blobstore.TaskPrefix(taskID)+"/work/output/report.md", 1<<20); err != nil || !bytes.Equal(got, want) {
		t.Errorf("store's report.md = %q, %v", got, err)
	}
	if objs, err := bs.List(ctx, blobstore.TaskPrefix(taskID)+"/work"); err != nil {
		t.Error(err)
	} else {
		for _, o := range objs {
			if strings.Contains(o.Key, "slow-here") {
				t.Errorf("the store holds %s: B's scratch marker left B's disk", o.Key)
			}
		}
	}
	stopA()
}

// readTestdata reads testdata/name.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// waitStore polls cond (what the processes wrote to the store) until it
// holds; it fails the test when cond errs or ctx ends.
func waitStore(ctx context.Context, t *testing.T, what string, dump func() string, cond func() (bool, error)) {
	t.Helper()
	for {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil || ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v %v\n%s", what, err, ctx.Err(), dump())
		}
		waitABit(ctx)
	}
}

// attemptEvents is the run and protocol events of one attempt of a job,
// one JSON object a line.
func attemptEvents(ctx context.Context, t *testing.T, st store.Store, jobID int64, attempt int) string {
	t.Helper()
	evs, err := st.ReadJobEvents(ctx, jobID, 0, store.MaxListLimit)
	if err != nil {
		t.Fatalf("job events: %v", err)
	}
	var b strings.Builder
	for _, e := range evs {
		if e.Attempt == attempt && (e.Type == store.JobEventRunEvent || e.Type == store.JobEventProtocol) {
			fmt.Fprintf(&b, "%s\n", e.Data)
		}
	}
	return b.String()
}

// claimedBy maps each attempt of a job to the worker that claimed it (the
// job's status events).
func claimedBy(ctx context.Context, t *testing.T, st store.Store, jobID int64) map[int]string {
	t.Helper()
	evs, err := st.ReadJobEvents(ctx, jobID, 0, store.MaxListLimit)
	if err != nil {
		t.Fatalf("job events: %v", err)
	}
	by := map[int]string{}
	for _, e := range evs {
		var s store.StatusEvent
		if e.Type == store.JobEventStatus && json.Unmarshal(e.Data, &s) == nil && s.State == store.StateRunning {
			by[s.Attempt] = s.Worker
		}
	}
	return by
}

// toolCalls lists the tool calls begun in events (attemptEvents' lines),
// each as its tool name and arguments.
func toolCalls(events string) []string {
	var calls []string
	for line := range strings.Lines(events) {
		var ev struct {
			Type string          `json:"type"`
			Tool string          `json:"tool"`
			Args json.RawMessage `json:"args"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "tool_call" {
			calls = append(calls, ev.Tool+" "+string(ev.Args))
		}
	}
	return calls
}

// readSucceeded reports whether events (attemptEvents' lines) hold a Read
// of path that ended successfully.
func readSucceeded(events, path string) bool {
	var call string
	for line := range strings.Lines(events) {
		var ev struct {
			Type    string `json:"type"`
			CallID  string `json:"call_id"`
			Tool    string `json:"tool"`
			Success bool   `json:"success"`
			Args    struct {
				Path string `json:"path"`
			} `json:"args"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "tool_call" && ev.Tool == "Read" && ev.Args.Path == path:
			call = ev.CallID
		case ev.Type == "tool_end" && call != "" && ev.CallID == call:
			return ev.Success
		}
	}
	return false
}

// reportContent is the content of output/report.md as the scenario's
// Write call gives it.
func reportContent(t *testing.T, scenario []byte) []byte {
	t.Helper()
	var sc struct {
		Frames []struct {
			Statements []struct {
				Tool  string `json:"tool"`
				Input struct {
					Path    string `json:"path"`
					Content string `json:"content"`
				} `json:"input"`
			} `json:"statements"`
		} `json:"frames"`
	}
	if err := json.Unmarshal(scenario, &sc); err != nil {
		t.Fatal(err)
	}
	for _, f := range sc.Frames {
		for _, s := range f.Statements {
			if s.Tool == "Write" && s.Input.Path == "output/report.md" {
				return []byte(s.Input.Content)
			}
		}
	}
	t.Fatal("the scenario writes no output/report.md")
	return nil
}
