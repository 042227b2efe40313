package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// subjobsTestdata is where the fanout pieces and scenarios live.
var subjobsTestdata = filepath.Join("..", "..", "internal", "queue", "testdata")

// TestSubtasksAsChildJobsOnTwoWorkers (issue 21, "Subtasks as child
// jobs"): `serve` A with --workers 0 and one-slot workers B and C, each
// with its own data directory, on one PostgreSQL. A fanout task spawns
// three subtasks: the API shows the parent in waiting_subtasks, its three
// child jobs carry parent_job_id and run on both workers (their lease
// owners), and the parent resumes with the three results in subtasks/.
// Then a second fanout task, its children slow, is cancelled through A
// while they run: every child ends cancelled, and the workers are free for
// a third.
func TestSubtasksAsChildJobsOnTwoWorkers(t *testing.T) {
	t.Parallel()
	dsn := ownPostgres(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dirA := t.TempDir()
	env := proctest.NoModelEnv(filepath.Join(dirA, "home"))
	url, stderrA, stopA := startServe(ctx, t, env, "--workers", "0", "--db", dsn, "--data-dir", filepath.Join(dirA, "data"))
	dataB, dataC := filepath.Join(t.TempDir(), "data"), filepath.Join(t.TempDir(), "data")
	b := startSubjobsWorker(ctx, t, dsn, dataB, "workerB")
	c := startSubjobsWorker(ctx, t, dsn, dataC, "workerC")
	h := &subjobsAPI{t: t, ctx: ctx, url: url, exited: func() bool { return b.exited() || c.exited() }, logs: func() string {
		return fmt.Sprintf("serve A:\n%s\nworker B:\n%s\nworker C:\n%s", tail(stderrA.String(), 3000), tail(b.stderr.String(), 3000), tail(c.stderr.String(), 3000))
	}}
	h.createPieces()

	// Three subtasks, three seconds each, on two one-slot workers.
	fan := h.submit("Write three parts", "fanout-jobs-paced.yaml")
	parent, kids := h.fanOut(fan.Job.ID, true)
	owners := map[string]int{}
	for _, k := range kids {
		worker, _, _ := strings.Cut(k.LeaseOwner, "/")
		owners[worker]++
	}
	if owners["workerB"] == 0 || owners["workerC"] == 0 {
		t.Errorf("the children ran on %v, want both workers", owners)
	}
	// The worker that resumed the parent wrote the three results into
	// subtasks/ of its copy of the task's workspace.
	data := map[string]string{"workerB": dataB, "workerC": dataC}
	resumedOn, _, _ := strings.Cut(parent.LeaseOwner, "/")
	checkSubtaskResults(t, queue.WorkDir(data[resumedOn], fan.Task.ID))

	// Cancelling a parent whose children run cancels them.
	h.cancelWhileRunning(2)
	stopA()
}

// TestSubtasksAsChildJobsSQLite: the same on one `serve` process with a
// SQLite store and one worker slot: the parent parks in waiting_subtasks
// and frees the only slot, so its children can run at all; cancelling a
// parent whose child runs cancels its children.
func TestSubtasksAsChildJobsSQLite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	env := proctest.NoModelEnv(filepath.Join(dir, "home"))
	data := filepath.Join(dir, "data")
	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", data)
	h := &subjobsAPI{t: t, ctx: ctx, url: url, exited: func() bool { return false }, logs: stderr.String}
	h.createPieces()
	fan := h.submit("Write three parts", "fanout-jobs.yaml")
	h.fanOut(fan.Job.ID, true)
	checkSubtaskResults(t, queue.WorkDir(data, fan.Task.ID))
	h.cancelWhileRunning(1)
	stop()
}

// subjobsAPI drives the subtask tests through a serve's API.
type subjobsAPI struct {
	t      *testing.T
	ctx    context.Context
	url    string
	exited func() bool // a process of the topology stopped
	logs   func() string
}

// call sends body to path and decodes the answer into out (if not nil),
// failing unless the status is want.
func (h *subjobsAPI) call(method, path string, body any, want int, out any) {
	t := h.t
	t.Helper()
	data, _ := json.Marshal(body)
	rctx, rcancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer rcancel()
	req, _ := http.NewRequestWithContext(rctx, method, h.url+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s\n%s", method, path, resp.StatusCode, want, got, h.logs())
	}
	if out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, got)
		}
	}
}

// createPieces stores the fanout and part pieces.
func (h *subjobsAPI) createPieces() {
	h.t.Helper()
	for _, name := range []string{"fanout", "part"} {
		src, err := os.ReadFile(filepath.Join(subjobsTestdata, "pieces", name+".yaml"))
		if err != nil {
			h.t.Fatal(err)
		}
		h.call("POST", "/api/v1/pieces", api.PieceRequest{YAML: string(src)}, http.StatusCreated, nil)
	}
}

// submit creates a fanout task replaying testdata scenario.
func (h *subjobsAPI) submit(title, scenario string) api.CreateTaskResponse {
	h.t.Helper()
	src, err := os.ReadFile(filepath.Join(subjobsTestdata, "scenarios", scenario))
	if err != nil {
		h.t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]string{"replay": string(src)})
	var created api.CreateTaskResponse
	h.call("POST", "/api/v1/tasks", api.CreateTaskRequest{Title: title, Piece: "fanout", Payload: payload}, http.StatusCreated, &created)
	return created
}

func (h *subjobsAPI) job(id int64) store.Job {
	h.t.Helper()
	var r api.JobResponse
	h.call("GET", fmt.Sprintf("/api/v1/jobs/%d", id), nil, http.StatusOK, &r)
	return r.Job
}

// children lists the child jobs of parent (GET /api/v1/jobs?parent_job_id=).
func (h *subjobsAPI) children(parent int64) []store.Job {
	h.t.Helper()
	var l api.JobList
	h.call("GET", fmt.Sprintf("/api/v1/jobs?parent_job_id=%d", parent), nil, http.StatusOK, &l)
	return l.Jobs
}

// until polls the API until ok accepts what it reads.
func (h *subjobsAPI) until(what string, ok func() bool) {
	h.t.Helper()
	for !ok() {
		if h.ctx.Err() != nil || h.exited() {
			h.t.Fatalf("gave up waiting for %s: %v\n%s", what, h.ctx.Err(), h.logs())
		}
		waitABit(h.ctx)
	}
}

// fanOut follows fanout job id to its end: it succeeds with the merged
// result, and its three child jobs, with parent_job_id, succeeded with
// their results. With mustWait the parent waited in waiting_subtasks
// (its status events, which the API serves, show the state: a fanout on
// two workers may wait for less time than one poll takes). Without it the
// parent may also go on at once: a worker whose children all ended on the
// other worker before its WAIT_SUBTASKS does not park (engine/run.go).
// It returns the parent and the children.
func (h *subjobsAPI) fanOut(id int64, mustWait bool) (store.Job, []store.Job) {
	t := h.t
	t.Helper()
	var parent store.Job
	h.until("the fanout job to end", func() bool {
		parent = h.job(id)
		return parent.State.Terminal()
	})
	if parent.State != store.StateSucceeded || parent.Result != "Merged alpha, beta and gamma." {
		t.Fatalf("parent = %s %q (error %q)\n%s", parent.State, parent.Result, parent.Error, h.logs())
	}
	var page api.JobEventPage
	h.call("GET", fmt.Sprintf("/api/v1/jobs/%d/events", id), nil, http.StatusOK, &page)
	var statuses []string
	sawWaiting := false
	for _, e := range page.Events {
		if e.Type != store.JobEventStatus {
			continue
		}
		var st store.StatusEvent
		if err := json.Unmarshal(e.Data, &st); err != nil {
			t.Fatalf("status event %s: %v", e.Data, err)
		}
		sawWaiting = sawWaiting || st.State == store.StateWaitingSubtasks
		statuses = append(statuses, fmt.Sprintf("%d:%s", e.Attempt, st.State))
	}
	if mustWait && !sawWaiting {
		t.Errorf("the parent never waited in waiting_subtasks; its states: %s\n%s", strings.Join(statuses, " "), h.logs())
	}
	kids := h.children(id)
	if len(kids) != 3 {
		t.Fatalf("%d child jobs, want 3: %+v", len(kids), kids)
	}
	for i, k := range kids {
		if k.ParentJobID != id || k.State != store.StateSucceeded || k.Piece != "part" || !strings.HasSuffix(k.Result, "part written") || k.LeaseOwner == "" {
			t.Errorf("child %d = %+v", i+1, k)
		}
	}
	return parent, kids
}

// cancelWhileRunning submits a fanout task whose children are slow, waits
// until the parent waits for them with running of them running, cancels
// the parent through the API and checks every child ended cancelled; then
// a fast fanout task succeeds, so the slots the children held are free
// (with one slot, running == 1, its parent must park to let them run).
func (h *subjobsAPI) cancelWhileRunning(running int) {
	t := h.t
	t.Helper()
	slow := h.submit("Write three slow parts", "fanout-jobs-slow.yaml")
	h.until("the slow children to run", func() bool {
		n := 0
		for _, k := range h.children(slow.Job.ID) {
			if k.State == store.StateRunning {
				n++
			}
		}
		return h.job(slow.Job.ID).State == store.StateWaitingSubtasks && n == running
	})
	h.call("POST", fmt.Sprintf("/api/v1/jobs/%d/cancel", slow.Job.ID), api.CancelRequest{Reason: "test"}, http.StatusOK, nil)
	kids := h.children(slow.Job.ID)
	if len(kids) != 3 {
		t.Fatalf("%d slow child jobs, want 3", len(kids))
	}
	for _, k := range kids {
		if k.State != store.StateCancelled {
			t.Errorf("slow child %d is %s after its parent was cancelled, want cancelled", k.ID, k.State)
		}
	}
	again := h.submit("Write three parts again", "fanout-jobs.yaml")
	h.fanOut(again.Job.ID, running == 1)
}

// checkSubtaskResults checks the three result files in subtasks/ of the
// workspace work.
func checkSubtaskResults(t *testing.T, work string) {
	t.Helper()
	for i, name := range []string{"alpha", "beta", "gamma"} {
		res, err := os.ReadFile(filepath.Join(work, "subtasks", fmt.Sprintf("%02d-%s.md", i+1, name)))
		if err != nil || !strings.Contains(string(res), "- Status: succeeded") || !strings.Contains(string(res), name+" part written") {
			t.Errorf("subtask %s's result in %s: %v\n%s", name, work, err, res)
		}
	}
}

// startSubjobsWorker starts `maestro worker` with one slot on dsn with
// its own home and data directory.
func startSubjobsWorker(ctx context.Context, t *testing.T, dsn, data, name string) *worker {
	t.Helper()
	return startPGWorker(ctx, t, filepath.Join(filepath.Dir(data), "home"), data, dsn, name, "--workers", "1")
}
