package queue_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// subjobsRunner is the engine runner with the fanout and part pieces of
// testdata/pieces besides the built-ins.
func subjobsRunner(data string) queue.Runner {
	return queue.NewEngineRunner(queue.EngineRunnerConfig{
		DataDir: data,
		Pieces: func(ctx context.Context) (*engine.Library, error) {
			return engine.NewLibrary(ctx, []string{filepath.Join("testdata", "pieces")}, "")
		},
	})
}

// scenarioPayload is a job payload replaying testdata/scenarios/name.
func scenarioPayload(t *testing.T, name string) json.RawMessage {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "scenarios", name))
	if err != nil {
		t.Fatal(err)
	}
	return payloadWith(t, map[string]any{"replay": string(src)})
}

// submitFanout creates a task of piece fanout replaying scenario.
func submitFanout(t *testing.T, st store.Store, scenario string) (store.Task, store.Job) {
	t.Helper()
	task, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "Write the parts", Piece: "fanout", Payload: scenarioPayload(t, scenario)})
	if err != nil {
		t.Fatal(err)
	}
	return task, job
}

// waitSucceeded waits until job id ends and fails the test unless it
// succeeded.
func waitSucceeded(t *testing.T, st store.Store, id int64) store.Job {
	t.Helper()
	done := waitJob(t, st, id, "its end", func(j store.Job) bool { return j.State.Terminal() })
	if done.State != store.StateSucceeded {
		t.Fatalf("job %d = %s (%q)", id, done.State, done.Error)
	}
	return done
}

// children lists the child jobs of parent.
func children(t *testing.T, st store.Store, parent int64) []store.Job {
	t.Helper()
	kids, err := st.ListJobs(t.Context(), store.JobFilter{ParentJobID: parent})
	if err != nil {
		t.Fatal(err)
	}
	return kids
}

// statusStates are the states a job's status events went through.
func statusStates(t *testing.T, st store.Store, id int64) []store.State {
	t.Helper()
	var states []store.State
	for _, e := range events(t, st, id) {
		if e.Type != store.JobEventStatus {
			continue
		}
		var s store.StatusEvent
		if err := json.Unmarshal(e.Data, &s); err != nil {
			t.Fatal(err)
		}
		states = append(states, s.State)
	}
	return states
}

// TestSubtasksRunAsChildJobs: a queued job's SpawnSubTask enqueues child
// jobs (parent_job_id set, the subtask's piece and script); at
// WAIT_SUBTASKS the parent parks in waiting_subtasks and frees its
// worker, which is the pool's only one, so the children can run only
// because it did; when the last child ends the parent is queued again,
// gathers the three results into subtasks/ and finishes.
func TestSubtasksRunAsChildJobs(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: subjobsRunner(data), Workers: 1})
	task, job := submitFanout(t, st, "fanout-jobs.yaml")
	if done := waitSucceeded(t, st, job.ID); done.Result != "Merged alpha, beta and gamma." {
		t.Fatalf("parent's result = %q", done.Result)
	}
	if states := statusStates(t, st, job.ID); !slices.Contains(states, store.StateWaitingSubtasks) {
		t.Errorf("the parent never waited for its subtasks: %v", states)
	}
	kids := children(t, st, job.ID)
	if len(kids) != 3 {
		t.Fatalf("%d child jobs, want 3: %+v", len(kids), kids)
	}
	work := queue.WorkDir(data, task.ID)
	for i, name := range []string{"alpha", "beta", "gamma"} {
		k := kids[i]
		var pl queue.Payload
		if err := json.Unmarshal(k.Payload, &pl); err != nil {
			t.Fatal(err)
		}
		if k.State != store.StateSucceeded || k.Piece != "part" || k.TaskID != 0 || pl.Subtask == nil || pl.Subtask.ID != i+1 || k.Result != name+" part written" {
			t.Errorf("child %d = %+v, payload %+v", i+1, k, pl)
		}
		// The child wrote into its parent's workspace; the parent wrote
		// the result file from the child job's record.
		if got, err := os.ReadFile(filepath.Join(work, "output", "parts", name+".txt")); err != nil || string(got) != name+"\n" {
			t.Errorf("the %s part in the parent's workspace: %q, %v", name, got, err)
		}
		res, err := os.ReadFile(filepath.Join(work, "subtasks", "0"+string(rune('1'+i))+"-"+name+".md"))
		if err != nil || !strings.Contains(string(res), "- Status: succeeded") || !strings.Contains(string(res), name+" part written") {
			t.Errorf("subtask %s's result file: %v\n%s", name, err, res)
		}
	}
	rs, err := engine.LoadState(queue.StateDir(data, task.ID))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range rs.Subtasks {
		if s.Job != kids[i].ID || s.Status != engine.StatusSucceeded || !s.Delivered {
			t.Errorf("run state's subtask %d = %+v, want job %d succeeded and delivered", i+1, s, kids[i].ID)
		}
	}
}

// TestCancelParentCancelsChildJobs: cancelling a parent that waits for
// running child jobs cancels them, and the workers running them stop.
func TestCancelParentCancelsChildJobs(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: subjobsRunner(data), Workers: 3})
	_, job := submitFanout(t, st, "fanout-jobs-slow.yaml")
	waitJob(t, st, job.ID, "waiting_subtasks", inState(store.StateWaitingSubtasks))
	kids := children(t, st, job.ID)
	if len(kids) != 3 {
		t.Fatalf("%d child jobs, want 3", len(kids))
	}
	for _, k := range kids {
		waitJob(t, st, k.ID, "running", inState(store.StateRunning))
	}
	if _, err := st.Cancel(t.Context(), job.ID, "test"); err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		got := waitJob(t, st, k.ID, "cancelled", inState(store.StateCancelled))
		if !strings.Contains(got.Error, "parent job") {
			t.Errorf("child %d cancelled with %q", k.ID, got.Error)
		}
	}
	// Every worker is free again: a noop job runs.
	noop, err := st.Enqueue(t.Context(), store.NewJob{Piece: queue.NoopPiece})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, st, noop.ID, "succeeded", inState(store.StateSucceeded))
}

// TestParentEndCancelsChildJobs: a parent that completes while a child
// job has not ended has the child cancelled, and its run state records
// the subtask as cancelled.
func TestParentEndCancelsChildJobs(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	startPool(t, queue.Config{Store: st, Runner: subjobsRunner(data), Workers: 2})
	task, job := submitFanout(t, st, "fanout-jobs-abandon.yaml")
	waitSucceeded(t, st, job.ID)
	kids := children(t, st, job.ID)
	if len(kids) != 1 {
		t.Fatalf("%d child jobs, want 1", len(kids))
	}
	got := waitJob(t, st, kids[0].ID, "cancelled", inState(store.StateCancelled))
	if !strings.Contains(got.Error, "succeeded") {
		t.Errorf("child cancelled with %q", got.Error)
	}
	rs, err := engine.LoadState(queue.StateDir(data, task.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Subtasks) != 1 || rs.Subtasks[0].Status != engine.StatusCancelled {
		t.Errorf("run state's subtasks = %+v", rs.Subtasks)
	}
}

// TestChildJobsShareArtifacts: with an artifact store, two pools with
// their own data directories (two machines) run a fanout job and its
// children: each child works on its parent's files from the store and
// syncs what it wrote back without removing its siblings' files, and the
// parent's syncs keep them all, with the three results.
func TestChildJobsShareArtifacts(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	a := localStore(t)
	for _, data := range []string{t.TempDir(), t.TempDir()} {
		startPool(t, queue.Config{Store: st, Workers: 1, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{
			DataDir: data, Artifacts: a,
			Pieces: func(ctx context.Context) (*engine.Library, error) {
				return engine.NewLibrary(ctx, []string{filepath.Join("testdata", "pieces")}, "")
			},
		})})
	}
	task, job := submitFanout(t, st, "fanout-jobs.yaml")
	waitSucceeded(t, st, job.ID)
	prefix := "tasks/" + jsonInt(task.ID) + "/work/"
	for i, name := range []string{"alpha", "beta", "gamma"} {
		got, err := blobstore.ReadAll(t.Context(), a, prefix+"output/parts/"+name+".txt", 1<<10)
		if err != nil || string(got) != name+"\n" {
			t.Errorf("the %s part in the artifact store: %q, %v", name, got, err)
		}
		res, err := blobstore.ReadAll(t.Context(), a, prefix+"subtasks/0"+string(rune('1'+i))+"-"+name+".md", 1<<20)
		if err != nil || !strings.Contains(string(res), name+" part written") {
			t.Errorf("subtask %s's result in the artifact store: %v\n%s", name, err, res)
		}
	}
}

// TestChildJobsKeepTheParentsCorrelationAndTrace: a child job's payload
// carries its parent's metadata (the correlation of its spans, model
// requests and events) and continues the parent's trace; it started a new
// trace with no correlation.
func TestChildJobsKeepTheParentsCorrelationAndTrace(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	startPool(t, queue.Config{Store: st, Runner: subjobsRunner(t.TempDir()), Workers: 1})
	src, err := os.ReadFile(filepath.Join("testdata", "scenarios", "fanout-jobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	metadata := map[string]any{"organization_id": "org-1", "workspace_id": "ws-1", "agent_run_id": "run-1"}
	_, job, err := st.CreateTask(t.Context(), store.NewTask{Title: "Write the parts", Piece: "fanout", Payload: payloadWith(t, map[string]any{
		"replay": string(src), "metadata": metadata,
		"trace_context": map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"},
	})})
	if err != nil {
		t.Fatal(err)
	}
	waitSucceeded(t, st, job.ID)
	kids := children(t, st, job.ID)
	if len(kids) != 3 {
		t.Fatalf("%d child jobs, want 3", len(kids))
	}
	for _, k := range kids {
		var pl struct {
			Metadata     map[string]any    `json:"metadata"`
			TraceContext map[string]string `json:"trace_context"`
		}
		if err := json.Unmarshal(k.Payload, &pl); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(pl.Metadata, metadata) {
			t.Errorf("child job %d's metadata = %v, want its parent's %v", k.ID, pl.Metadata, metadata)
		}
		if tp := pl.TraceContext["traceparent"]; !strings.HasPrefix(tp, "00-"+traceID+"-") {
			t.Errorf("child job %d's traceparent = %q, want the parent's trace %s", k.ID, tp, traceID)
		}
	}
}
