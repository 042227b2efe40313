package host

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/sessionowner"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// downLiveSessions is a store of live sessions that does not answer (serve
// on PostgreSQL with PostgreSQL stopped).
type downLiveSessions struct{ store.LiveSessions }

func (downLiveSessions) OwnLiveSession(context.Context, string, string, string) (store.LiveSession, error) {
	return store.LiveSession{}, errors.New("connection refused")
}

// TestRefusedSessionLeavesNothing: a session serve's cluster refuses with
// 503 once made (the store is down) leaves neither its log under
// <data dir>/sessions nor its fresh workspace under <data dir>/workspaces;
// a workspace the client named stays, with its files. Both were left
// behind, one pair per refused request.
func TestRefusedSessionLeavesNothing(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	h, err := New(Options{Home: t.TempDir(), DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	workspaces := filepath.Join(data, "workspaces")
	local, err := h.AttachSessions(AttachPolicy{Workspaces: workspaces, AnyRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sessionowner.New(sessionowner.Config{Store: downLiveSessions{}, Local: local, Instance: "serve-a", Address: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	named := t.TempDir()
	if err := os.WriteFile(filepath.Join(named, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, req := range []httpattach.CreateRequest{
		{ApprovalMode: protocol.ApprovalAuto},
		{ApprovalMode: protocol.ApprovalAuto, WorkspaceRoot: named},
	} {
		_, _, err := c.Create(t.Context(), req)
		if !isStatus(err, http.StatusServiceUnavailable) {
			t.Fatalf("create (workspaceRoot %q) with the store down: %v, want 503", req.WorkspaceRoot, err)
		}
	}
	for _, dir := range []string{filepath.Join(data, "sessions"), workspaces} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s holds %d entries after refused sessions, want none", dir, len(entries))
		}
	}
	if data, err := os.ReadFile(filepath.Join(named, "keep.txt")); err != nil || string(data) != "mine" {
		t.Errorf("the client's workspace lost its file: %q, %v", data, err)
	}
	if len(local.IDs()) != 0 {
		t.Errorf("refused sessions still registered: %v", local.IDs())
	}
}
