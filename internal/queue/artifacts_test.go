package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
)

// TestSweepArtifactStaging: the uploads staged in an artifact store are
// swept as the data directory's are: a finished job's go into its task's
// input/ in the store, orphans go once older than the grace period, what
// an unfinished job needs stays, a job object without files goes.
func TestSweepArtifactStaging(t *testing.T) {
	t.Parallel()
	now, old, young := sweepTimes()
	tests := []struct {
		name    string
		job     store.State // "" none
		files   bool
		changed time.Time
		want    queue.StagingSweep
		kept    bool
	}{
		{name: "queued job", job: store.StateQueued, files: true, changed: old, kept: true},
		{name: "cancelled while queued", job: store.StateCancelled, files: true, changed: young, want: queue.StagingSweep{Moved: 1}},
		{name: "no job, young", files: true, changed: young, kept: true},
		{name: "no job, old", files: true, changed: old, want: queue.StagingSweep{Removed: 1}},
		{name: "job object without files", job: store.StateSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openSQLite(t, nil)
			ctx := t.Context()
			dir := t.TempDir()
			a, err := blobstore.OpenLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			files := map[string]string{"report.txt": "figures\n", "docs/notes.md": "# notes\n"}
			if tt.files {
				for name, data := range files {
					key := blobstore.Join(blobstore.UploadPrefix(stagingKey), name)
					if err := blobstore.PutBytes(ctx, a, key, []byte(data)); err != nil {
						t.Fatal(err)
					}
					os.Chtimes(filepath.Join(dir, filepath.FromSlash(key)), tt.changed, tt.changed)
				}
			}
			var task store.Task
			if tt.job != "" {
				var job store.Job
				task, job, err = st.CreateTask(ctx, store.NewTask{Title: "t", Piece: "noop", Payload: stagingPayload(t, stagingKey, nil)})
				if err != nil {
					t.Fatal(err)
				}
				driveTo(t, st, job, tt.job)
				if err := blobstore.PutBytes(ctx, a, blobstore.UploadJobKey(stagingKey), []byte(jsonInt(job.ID)+"\n")); err != nil {
					t.Fatal(err)
				}
			}
			got, err := queue.SweepArtifactStaging(ctx, st, a, now, grace, quiet)
			if err != nil {
				t.Fatalf("SweepArtifactStaging: %v", err)
			}
			if got != tt.want {
				t.Errorf("sweep = %+v, want %+v", got, tt.want)
			}
			staged, _ := a.List(ctx, blobstore.UploadPrefix(stagingKey))
			if tt.kept != (len(staged) == len(files)) {
				t.Errorf("staged objects after the sweep: %v (kept: %v)", staged, tt.kept)
			}
			if _, err := a.Stat(ctx, blobstore.UploadJobKey(stagingKey)); !tt.kept && !blobstore.IsNotExist(err) {
				t.Errorf("the job object is still there (%v)", err)
			}
			if tt.want.Moved == 1 {
				for name, want := range files {
					data, err := blobstore.ReadAll(ctx, a, blobstore.Join(blobstore.TaskPrefix(task.ID), "work/input", name), 100)
					if err != nil || string(data) != want {
						t.Errorf("input/%s in the store = %q, %v; want %q", name, data, err, want)
					}
				}
			}
		})
	}
}

// TestEngineRunnerArtifactsAcrossDataDirs: two workers with separate data
// directories share one artifact store. The first adopts the staged upload
// into the task's input/ and parks the job on a question, syncing its run
// state; the second resumes the job from what the store holds (it never
// saw the first's disk), finishes it, and its deliverable and the input
// are in the store.
func TestEngineRunnerArtifactsAcrossDataDirs(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	ctx := t.Context()
	a := localStore(t)
	if err := blobstore.PutBytes(ctx, a, blobstore.UploadPrefix(stagingKey)+"/brief.txt", []byte("fence specs\n")); err != nil {
		t.Fatal(err)
	}
	dataA, dataB := t.TempDir(), t.TempDir()
	pl := payloadWith(t, map[string]any{"replay": json.RawMessage(askScenario), staging.PayloadField: stagingKey})
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Paint the fence", Piece: "general", Payload: pl})
	if err != nil {
		t.Fatal(err)
	}
	if err := blobstore.PutBytes(ctx, a, blobstore.UploadJobKey(stagingKey), []byte(jsonInt(job.ID))); err != nil {
		t.Fatal(err)
	}
	// A starts once the job object is written, as the server writes it:
	// a worker adopting the upload before that leaves the object to the
	// staging sweep (TestSweepArtifactStaging), which this test does not run.
	stopA := startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: dataA, Artifacts: a})})
	waitJob(t, st, job.ID, "waiting_human", inState(store.StateWaitingHuman))
	stopA()
	if data, err := os.ReadFile(filepath.Join(queue.WorkDir(dataA, task.ID), "input", "brief.txt")); err != nil || string(data) != "fence specs\n" {
		t.Errorf("A's input/brief.txt = %q, %v", data, err)
	}
	if objs, _ := a.List(ctx, "uploads"); len(objs) != 0 {
		t.Errorf("uploads/ after the claim: %v, want nothing staged", objs)
	}

	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: dataB, Artifacts: a})})
	if _, resumed, err := st.AddComment(ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Body: "blue", ResumeWaiting: true}); err != nil || len(resumed) != 1 {
		t.Fatalf("answer: resumed %v, %v", resumed, err)
	}
	done := waitJob(t, st, job.ID, "succeeded", inState(store.StateSucceeded))
	if done.Result != "The fence is painted." || done.Attempt != 2 {
		t.Errorf("job = %+v, want it finished by its second attempt", done)
	}
	rs, err := engine.LoadState(queue.StateDir(dataB, task.ID))
	if err != nil || len(rs.Answers) != 1 || rs.Answers[0].Answer != "blue" {
		t.Errorf("B's run state: %+v, %v; want the resumed run with the answer", rs, err)
	}
	for key, want := range map[string]string{
		blobstore.TaskPrefix(task.ID) + "/work/input/brief.txt":  "fence specs\n",
		blobstore.TaskPrefix(task.ID) + "/work/output/fence.txt": "painted\n",
	} {
		if data, err := blobstore.ReadAll(context.Background(), a, key, 100); err != nil || string(data) != want {
			t.Errorf("store %s = %q, %v; want %q", key, data, err, want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(queue.WorkDir(dataB, task.ID), "input", "brief.txt")); err != nil || string(data) != "fence specs\n" {
		t.Errorf("B's input/brief.txt (materialised) = %q, %v", data, err)
	}
	// The resumed run has the workspace layout the first attempt had: a
	// Bash 'echo … > output/x' on B failed with no output/ (an empty
	// directory is not in the store).
	for _, d := range []string{"input", "output", "subtasks", "skills"} {
		if fi, err := os.Stat(filepath.Join(queue.WorkDir(dataB, task.ID), d)); err != nil || !fi.IsDir() {
			t.Errorf("B's work/%s: %v, want the directory", d, err)
		}
	}
}

// failingGet is an artifact store whose Get of one key fails, as an S3
// store does when the server stops answering half-way through a claim.
type failingGet struct {
	*blobstore.Local
	key string
}

func (f failingGet) Get(ctx context.Context, key string) (io.ReadSeekCloser, blobstore.Info, error) {
	if key == f.key {
		return nil, blobstore.Info{}, errors.New("connection refused")
	}
	return f.Local.Get(ctx, key)
}

// TestEngineRunnerMaterialiseFailureSyncsNothing: an attempt that cannot
// materialise the job's files from the store fails saying so, and syncs
// nothing back. The final sync of such an attempt mirrored the partial
// scratch output/ to the store, deleting the deliverables the claim had
// not fetched yet, and its own error replaced the materialise error.
func TestEngineRunnerMaterialiseFailureSyncsNothing(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	ctx := t.Context()
	local := localStore(t)
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Paint the fence", Piece: "general", MaxAttempts: 1,
		Payload: payloadWith(t, map[string]any{"replay": json.RawMessage(askScenario)})})
	if err != nil {
		t.Fatal(err)
	}
	output := blobstore.TaskPrefix(task.ID) + "/work/output/"
	for _, name := range []string{"a.txt", "b.txt"} {
		if err := blobstore.PutBytes(ctx, local, output+name, []byte(name+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	a := failingGet{Local: local, key: output + "b.txt"}
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: t.TempDir(), Artifacts: a})})
	done := waitJob(t, st, job.ID, "failed", inState(store.StateFailed))
	if !strings.Contains(done.Error, "materialise the job's workspace") || !strings.Contains(done.Error, "connection refused") {
		t.Errorf("job error = %q, want the materialise error", done.Error)
	}
	for _, name := range []string{"a.txt", "b.txt"} {
		if data, err := blobstore.ReadAll(context.Background(), local, output+name, 100); err != nil || string(data) != name+"\n" {
			t.Errorf("store %s after the failed claim = %q, %v; want it kept", output+name, data, err)
		}
	}
}

// localStore is an artifact store in a temporary directory, closed when
// the test ends.
func localStore(t *testing.T) *blobstore.Local {
	t.Helper()
	a, err := blobstore.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}
