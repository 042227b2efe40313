package queue_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// TestSweepArtifactStaging: the uploads staged in an artifact store are
// swept as the data directory's are: a finished job's go into its task's
// input/ in the store, orphans go once older than the grace period, what
// an unfinished job needs stays, a job object without files goes.
func TestSweepArtifactStaging(t *testing.T) {
	t.Parallel()
	const grace = time.Hour
	now := time.Now()
	old, young := now.Add(-2*grace), now.Add(-grace/2)
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
