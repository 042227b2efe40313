package host

import (
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/agentcli/agentclitest"
	"github.com/maestro-run/maestro/internal/proctest"
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
		// It said --agent, a flag of maestro headless.
		{"unknown agent", httpattach.CreateRequest{Agent: "nope"}, `agent "nope": unknown agent`},
	} {
		_, _, err := sessions.Create(t.Context(), tc.req)
		he, ok := errors.AsType[*httpattach.Error](err)
		if !ok || he.Status != http.StatusBadRequest || !strings.Contains(he.Message, tc.want) || strings.Contains(he.Message, "--") {
			t.Errorf("%s: %v, want 400 saying %q", tc.name, err, tc.want)
		}
	}
}

// TestAgentSessionNoSandboxWarnings: a session on an agent CLI runs no
// Bash of Maestro's (the CLI sandboxes its own tools), so it logs no
// warning about Maestro's Bash sandbox; before, every such session warned
// that "commands run on the host without isolation" and that the
// sandbox's limits were off.
func TestAgentSessionNoSandboxWarnings(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	adapter := agentclitest.InstallUserAdapter(t, home)
	env := map[string]string{"PATH": adapter + string(os.PathListSeparator) + os.Getenv("PATH")}
	var logs proctest.Buffer
	h, err := New(Options{Home: home, Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.NewSession(t.Context(), Spec{Workspace: t.TempDir(), Agent: "fake-agent"})
	if err != nil {
		t.Fatal(err)
	}
	firstFrames(t, s.Runtime, 2)
	s.Started()
	if _, err := s.Sandbox(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := logs.String(); strings.Contains(got, "sandbox") {
		t.Errorf("logs of an agent CLI session mention Maestro's sandbox:\n%s", got)
	}
}
