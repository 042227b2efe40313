package queue

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/taskdir"
)

// downStore is an artifact store that never answers: nothing listens on
// its port.
type downStore struct{}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func (downStore) Put(context.Context, string, io.Reader, int64, string) error { return errRefused }
func (downStore) Get(context.Context, string) (io.ReadSeekCloser, blobstore.Info, error) {
	return nil, blobstore.Info{}, errRefused
}
func (downStore) Stat(context.Context, string) (blobstore.Info, error) {
	return blobstore.Info{}, errRefused
}
func (downStore) List(context.Context, string) ([]blobstore.Info, error) { return nil, errRefused }
func (downStore) Delete(context.Context, string) error                   { return errRefused }
func (downStore) Location() string                                       { return "s3://bkt" }

// TestSyncedBound: a final sync that finds the artifact store unreachable
// is tried again after 1 s, 2 s, 4 s … (at most 30 s apart), each pause
// said in the job's log, for finalSyncTimeout; then the job is given back
// without spending its attempt, the error saying why. One that fails for
// another reason, or whose attempt ended, is not retried.
func TestSyncedBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		data := t.TempDir()
		j := &Job{Job: store.Job{ID: 7, TaskID: 3, Attempt: 1}}
		var lines []string
		j.Emit = func(_ context.Context, evs ...store.NewJobEvent) error {
			for _, e := range evs {
				m, err := protocol.DecodeServer(e.Data)
				if s, ok := m.(protocol.Status); err == nil && ok {
					lines = append(lines, s.Message)
				}
			}
			return nil
		}
		dir := JobDir(data, j.Job)
		if _, _, err := taskdir.Prepare(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(taskdir.WorkDir(dir), "output"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(taskdir.WorkDir(dir), "output", "report.txt"), []byte("figures\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := &engineRunner{cfg: EngineRunnerConfig{DataDir: data, Artifacts: downStore{}}}
		start := time.Now()
		res := r.synced(t.Context(), j, true, Result{State: store.StateSucceeded, Result: "Reported."})
		if took := time.Since(start); took != finalSyncTimeout {
			t.Errorf("synced gave up after %s, want %s", took, finalSyncTimeout)
		}
		if res.State != store.StateFailed || !res.NotCounted || !strings.HasPrefix(res.Error, "artifact store unreachable: sync the job's files to s3://bkt: ") {
			t.Errorf("result = %+v, want a failure not counted, the store unreachable", res)
		}
		want := []string{"1s", "2s", "4s", "8s", "16s", "30s", "30s"}
		if len(lines) < len(want) {
			t.Fatalf("status lines %q, want at least %d", lines, len(want))
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], "artifact store unreachable: sync the job's files to s3://bkt: ") || !strings.HasSuffix(lines[i], "; retrying in "+w) {
				t.Errorf("status line %d = %q, want artifact store unreachable: sync …; retrying in %s", i, lines[i], w)
			}
		}

		// An attempt that ended (shutdown, lease lost) does not wait.
		ctx, cancel := context.WithCancel(t.Context())
		r.cfg.Artifacts = cancelling{downStore{}, cancel}
		start = time.Now()
		res = r.synced(ctx, j, true, Result{State: store.StateSucceeded})
		if time.Since(start) != 0 || res.State != store.StateFailed || res.NotCounted {
			t.Errorf("synced on an ended attempt: %+v after %s, want failed at once", res, time.Since(start))
		}
		// Nor does a failure that is not an outage.
		r.cfg.Artifacts = refusing{downStore{}}
		res = r.synced(t.Context(), j, true, Result{State: store.StateSucceeded})
		if time.Since(start) != 0 || res.State != store.StateFailed || res.NotCounted || !strings.Contains(res.Error, "AccessDenied") {
			t.Errorf("synced refused by the store: %+v, want failed at once", res)
		}
	})
}

// cancelling is a down store whose first call ends the attempt.
type cancelling struct {
	downStore
	cancel context.CancelFunc
}

func (c cancelling) List(context.Context, string) ([]blobstore.Info, error) {
	c.cancel()
	return nil, errRefused
}

func (c cancelling) Put(context.Context, string, io.Reader, int64, string) error {
	c.cancel()
	return errRefused
}

// refusing is a store that answers but refuses the credentials.
type refusing struct{ downStore }

var errDenied = errors.New("AccessDenied: the credentials are refused")

func (refusing) List(context.Context, string) ([]blobstore.Info, error) { return nil, errDenied }
func (refusing) Put(context.Context, string, io.Reader, int64, string) error {
	return errDenied
}
