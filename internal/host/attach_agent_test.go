package host

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/agentcli/agentclitest"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// TestAttachAgentSession: a session created over HTTP with agent runs on
// that agent CLI (the user adapter of internal/agentcli's testdata, on
// PATH); thinkingLevel and an unknown agent are refused with 400.
func TestAttachAgentSession(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	adapter := agentclitest.InstallUserAdapter(t, home)
	env := map[string]string{"PATH": adapter + string(os.PathListSeparator) + os.Getenv("PATH")}
	h, err := New(Options{Home: home, DataDir: t.TempDir(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := h.AttachSessions(AttachPolicy{Workspaces: t.TempDir(), AnyRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sessions.Close() })

	rt, id, err := sessions.Create(t.Context(), httpattach.CreateRequest{Agent: "fake-agent", ApprovalMode: "prompt"})
	if err != nil {
		t.Fatalf("create on fake-agent: %v", err)
	}
	if snap := rt.Snapshot(); snap.State.Provider != "fake-agent" || id == "" {
		t.Fatalf("session %q on provider %q, want fake-agent", id, snap.State.Provider)
	}

	for _, tc := range []struct {
		name string
		req  httpattach.CreateRequest
		want string
	}{
		{"thinking", httpattach.CreateRequest{Agent: "fake-agent", ThinkingLevel: "high"}, "thinkingLevel applies to Maestro's own agent loop"},
		{"unknown agent", httpattach.CreateRequest{Agent: "nope"}, "unknown agent"},
	} {
		_, _, err := sessions.Create(t.Context(), tc.req)
		he, ok := errors.AsType[*httpattach.Error](err)
		if !ok || he.Status != http.StatusBadRequest || !strings.Contains(he.Message, tc.want) {
			t.Errorf("%s: %v, want 400 saying %q", tc.name, err, tc.want)
		}
	}
}
