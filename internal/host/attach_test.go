package host

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// resolvedPolicy is the policy of a server started with roots (maestro
// serve --workspace-root), as AttachSessions resolves it.
func resolvedPolicy(t *testing.T, roots []string, anyRoot bool) (AttachPolicy, error) {
	return AttachPolicy{Workspaces: t.TempDir(), Roots: roots, AnyRoot: anyRoot}.resolve()
}

// TestServeWorkspaceRoots: a client's workspaceRoot must lie in a
// --workspace-root directory (symlinks resolved); with none, any existing
// directory is accepted on loopback and none beyond it.
func TestServeWorkspaceRoots(t *testing.T) {
	t.Parallel()
	allowed, other := t.TempDir(), t.TempDir()
	inside := filepath.Join(allowed, "repo")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	sibling := inside + "-x" // shares the root's name as a prefix
	if err := os.Mkdir(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(allowed, "link-out")
	if err := os.Symlink(other, escape); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		roots   []string
		anyRoot bool
		root    string
		want    int // 0: accepted
	}{
		{"loopback, no roots: any directory", nil, true, other, 0},
		{"beyond loopback, no roots: refused", nil, false, other, http.StatusForbidden},
		{"beyond loopback, no roots: fresh workspace", nil, false, "", 0},
		{"the root itself", []string{allowed}, false, allowed, 0},
		{"inside the root", []string{allowed}, true, inside, 0},
		{"outside the root", []string{allowed}, true, other, http.StatusForbidden},
		{"symlink escaping the root", []string{allowed}, true, escape, http.StatusForbidden},
		{"a sibling sharing the prefix", []string{inside}, true, sibling, http.StatusForbidden},
		{"missing directory", []string{allowed}, true, filepath.Join(allowed, "nope"), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := resolvedPolicy(t, tc.roots, tc.anyRoot)
			if err != nil {
				t.Fatal(err)
			}
			root, herr := p.open(tc.root)
			if root != nil {
				root.Close()
			}
			switch {
			case tc.want == 0 && herr != nil:
				t.Fatalf("refused: %v", herr.Message)
			case tc.want != 0 && (herr == nil || herr.Status != tc.want):
				t.Fatalf("got %+v, want status %d", herr, tc.want)
			}
		})
	}
	if _, err := resolvedPolicy(t, []string{"rel/dir"}, true); err == nil {
		t.Fatal("a relative --workspace-root was accepted")
	}
}

// TestServeWorkspaceHoldingHome: a serve session's workspaceRoot that is
// or holds Maestro's home, or the data directory, is refused (403 workspace_violation), as maestro
// run and headless refuse it: the file tools run outside the sandbox.
// The check was made only where the host opened the workspace itself, so
// on a loopback serve (any directory accepted) a session in ~ had its
// model Read ~/.maestro/config.yaml and its keys.
func TestServeWorkspaceHoldingHome(t *testing.T) {
	t.Parallel()
	user := t.TempDir()
	home := filepath.Join(user, ".maestro")
	project := filepath.Join(user, "project")
	for _, d := range []string{home, project} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	srv := t.TempDir() // serve --data-dir /srv/maestro: its database, every session's log
	data := filepath.Join(srv, "maestro")
	h, err := New(Options{Home: home, DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	m, err := h.AttachSessions(AttachPolicy{Workspaces: t.TempDir(), AnyRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	for _, req := range []httpattach.CreateRequest{
		{ApprovalMode: protocol.ApprovalAuto, WorkspaceRoot: user},
		{ApprovalMode: protocol.ApprovalAuto, WorkspaceRoot: home},
		{ApprovalMode: protocol.ApprovalAuto, WorkspaceRoot: user, Agent: "codex"},
		{ApprovalMode: protocol.ApprovalAuto, WorkspaceRoot: srv},
	} {
		_, _, err := m.Create(t.Context(), req)
		if he, ok := errors.AsType[*httpattach.Error](err); !ok || he.Status != http.StatusForbidden || he.Code != httpattach.CodeWorkspaceViolation || !strings.Contains(he.Message, "holds Maestro's home") {
			t.Errorf("create in %s (agent %q): %v, want 403 workspace_violation naming the home", req.WorkspaceRoot, req.Agent, err)
		}
	}
	if _, _, err := m.Create(t.Context(), httpattach.CreateRequest{ApprovalMode: protocol.ApprovalAuto, WorkspaceRoot: project}); err != nil {
		t.Errorf("create in a project beside the home: %v", err)
	}
}
