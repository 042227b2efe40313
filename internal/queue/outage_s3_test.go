package queue_test

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/blobstore/s3test"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// stopOnPut is an S3 store that stops its server just before the first
// Put of a key containing key: the store goes away while a job runs.
type stopOnPut struct {
	*blobstore.S3
	srv     *s3test.Server
	key     string
	stopped atomic.Bool
}

func (s *stopOnPut) Put(ctx context.Context, key string, r io.Reader, size int64, sum string) error {
	if strings.Contains(key, s.key) && s.stopped.CompareAndSwap(false, true) {
		s.srv.Stop()
	}
	return s.S3.Put(ctx, key, r, size, sum)
}

// TestArtifactStoreOutageS3: with a real S3 server (versitygw) that stops,
// a job claimed meanwhile is given back without spending its attempt (one
// here) until the server is started again, then succeeds; a job whose
// server stops while it runs keeps its result and tries its final sync
// again until the server is back, and succeeds in that attempt. Both
// deliverables are in the bucket afterwards.
func TestArtifactStoreOutageS3(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	a := srv.Open(t, "maestro")
	st := openSQLite(t, nil)
	ctx := t.Context()
	runner := queue.NewEngineRunnerSyncRetry(queue.EngineRunnerConfig{DataDir: t.TempDir(), Artifacts: &stopOnPut{S3: a, srv: srv, key: "work/output/during.txt"}}, 50*time.Millisecond)
	startPool(t, queue.Config{Store: st, Runner: runner, Poll: 50 * time.Millisecond, Backoff: func(int) time.Duration { return 100 * time.Millisecond }})
	deliverable := func(task store.Task, name string) {
		t.Helper()
		data, err := blobstore.ReadAll(ctx, a, blobstore.TaskPrefix(task.ID)+"/work/output/"+name, 100)
		if err != nil || string(data) != "figures\n" {
			t.Errorf("task %d: %s in the bucket = %q, %v", task.ID, name, data, err)
		}
	}
	succeeded := func(job store.Job, attempts int) {
		t.Helper()
		done := waitJob(t, st, job.ID, "its end", func(j store.Job) bool { return j.State.Terminal() })
		if done.State != store.StateSucceeded || done.Result != "Reported." || done.MaxAttempts-done.Attempt != 0 || (attempts > 0 && done.Attempt != attempts) {
			t.Fatalf("job %d = %s (attempt %d/%d), error %q; want succeeded", job.ID, done.State, done.Attempt, done.MaxAttempts, done.Error)
		}
	}

	// The server is down when the job is claimed.
	srv.Stop()
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Report", Piece: "general", MaxAttempts: 1,
		Payload: payload(t, strings.ReplaceAll(writeScenario, "report.txt", "claimed.txt"))})
	if err != nil {
		t.Fatal(err)
	}
	evs := waitEvents(t, st, job.ID, "the job given back", func(evs []store.JobEvent) bool { return len(givenBack(t, evs)) > 0 })
	if s := givenBack(t, evs)[0]; !strings.HasPrefix(s.Error, "artifact store unreachable: ") || !strings.Contains(s.Error, "connection refused") {
		t.Errorf("status event giving the job back = %+v", s)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	succeeded(job, 0)
	deliverable(task, "claimed.txt")

	// The server stops while the job runs, before its deliverable is sent.
	task, job, err = st.CreateTask(ctx, store.NewTask{Title: "Report", Piece: "general", MaxAttempts: 1,
		Payload: payload(t, strings.ReplaceAll(writeScenario, "report.txt", "during.txt"))})
	if err != nil {
		t.Fatal(err)
	}
	waitEvents(t, st, job.ID, "a sync retry", func(evs []store.JobEvent) bool { return len(statusLines(evs, "retrying in")) > 0 })
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	succeeded(job, 1)
	deliverable(task, "during.txt")
}
