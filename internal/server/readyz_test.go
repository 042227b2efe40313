package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/server"
)

// flakyArtifacts is an artifact store whose lookups fail with err while
// it is set, and that records whether each lookup had a deadline within
// the readiness bound.
type flakyArtifacts struct {
	*blobstore.Local
	err       atomic.Pointer[error]
	unbounded atomic.Bool
}

func (f *flakyArtifacts) Stat(ctx context.Context, key string) (blobstore.Info, error) {
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 2*time.Second {
		f.unbounded.Store(true)
	}
	if err := f.err.Load(); err != nil {
		return blobstore.Info{}, *err
	}
	return f.Local.Stat(ctx, key)
}

// TestReadyzArtifactStore: with an artifact store, /readyz checks it too,
// within the 2 s of the database check, and says which part is not ready;
// /healthz (liveness) does not look at it. It answered ready with the
// artifact store down, and jobs could fetch nothing.
func TestReadyzArtifactStore(t *testing.T) {
	t.Parallel()
	local, err := blobstore.OpenLocal(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	a := &flakyArtifacts{Local: local}
	st := sqliteStore(t)
	e := newEnv(t, st, func(c *server.Config) { c.Artifacts = a })
	ready := func(wantCode int, wantErr string) {
		t.Helper()
		code, body := e.do("GET", "/readyz", nil)
		var h api.Health
		if err := json.Unmarshal(body, &h); err != nil || code != wantCode || h.Error != wantErr {
			t.Errorf("readyz = %d %s, want %d with error %q", code, body, wantCode, wantErr)
		}
	}
	ready(http.StatusOK, "")

	refused := error(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	a.err.Store(&refused)
	ready(http.StatusServiceUnavailable, "the artifact store does not answer")
	e.must(http.StatusOK, "GET", "/healthz", nil, nil)
	denied := errors.New("AccessDenied")
	a.err.Store(&denied)
	ready(http.StatusServiceUnavailable, "the artifact store refuses the check (see the server log)")
	if a.unbounded.Load() {
		t.Error("the artifact store was checked without a deadline within 2 s")
	}

	a.err.Store(nil)
	ready(http.StatusOK, "")
	a.err.Store(&refused)
	st.Close()
	ready(http.StatusServiceUnavailable, "the store does not answer; the artifact store does not answer")
}
