package queue_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// TestEngineRunnerPlantedStateLinks: the directory of the workspace that
// the engine used for its own state (logs/) replaced by a link
// before the job runs (an earlier attempt's agent planted them); the job
// writes nothing through them, and its state is where the agent cannot
// write (issue 14 item 2).
func TestEngineRunnerPlantedStateLinks(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"logs"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := openSQLite(t, nil)
			data := t.TempDir()
			target := t.TempDir()
			ctx := t.Context()
			task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Paint the fence", Piece: "general", Payload: payload(t, askScenario)})
			if err != nil {
				t.Fatal(err)
			}
			work := queue.WorkDir(data, task.ID)
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
				t.Fatal(err)
			}
			startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data})})
			got := waitJob(t, st, job.ID, "stopped", func(j store.Job) bool { return j.State == store.StateWaitingHuman || j.State.Terminal() })
			ents, err := os.ReadDir(target)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				t.Errorf("the job wrote %s through the planted %s link (job %s %q)", e.Name(), name, got.State, got.Error)
			}
			if got.State != store.StateWaitingHuman {
				t.Errorf("job = %s %q, want waiting for the answer", got.State, got.Error)
			}
			if rs, err := engine.LoadState(queue.StateDir(data, task.ID)); err != nil || rs.Status != engine.StatusWaitingHuman {
				t.Errorf("run state: %+v, %v", rs, err)
			}
		})
	}
}

// TestEngineRunnerMigratesOldLayout: a task directory of the layout
// before work/ and state/ (the workspace was the task directory, the run
// state in its logs/) holding a run waiting for an answer is migrated when
// the job resumes, and the run continues from its state.
func TestEngineRunnerMigratesOldLayout(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	ctx := t.Context()
	stop := startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data})})
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Paint the fence", Piece: "general", Payload: payload(t, askScenario)})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, st, job.ID, "waiting_human", inState(store.StateWaitingHuman))
	stop()

	// Rewrite the task directory as the old layout left it.
	dir := queue.TaskDir(data, task.ID)
	old := filepath.Join(t.TempDir(), "old")
	if err := os.Rename(queue.WorkDir(data, task.ID), old); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(queue.StateDir(data, task.ID), "logs"), filepath.Join(old, "logs")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(old, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.LoadState(dir); err != nil {
		t.Fatalf("the old layout has no run state: %v", err)
	}

	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data})})
	if _, _, err := st.AddComment(ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Body: "blue", ResumeWaiting: true}); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, st, job.ID, "succeeded", inState(store.StateSucceeded))
	if done.Result != "The fence is painted." {
		t.Errorf("job = %+v", done)
	}
	if got, err := os.ReadFile(filepath.Join(queue.WorkDir(data, task.ID), "output", "fence.txt")); err != nil || string(got) != "painted\n" {
		t.Errorf("deliverable: %q, %v", got, err)
	}
	rs, err := engine.LoadState(queue.StateDir(data, task.ID))
	if err != nil || len(rs.Answers) != 1 || rs.Answers[0].Answer != "blue" {
		t.Errorf("run state after the migration: %+v, %v", rs, err)
	}
	if _, err := os.Lstat(filepath.Join(queue.WorkDir(data, task.ID), "logs")); err == nil {
		t.Error("the run's logs/ was left in the workspace")
	}
}
