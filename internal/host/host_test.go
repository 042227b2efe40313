package host

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// newHost is a host whose home is a fresh directory and whose
// environment names no model: sessions run the bundled replay demo.
func newHost(t *testing.T) *Host {
	t.Helper()
	h, err := New(Options{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// firstFrames starts s's runtime and returns its first n frames.
func firstFrames(t *testing.T, rt *runtime.Runtime, n int) []protocol.Message {
	t.Helper()
	c, err := rt.Connect(runtime.ConnectOptions{ID: runtime.LocalConnectionID, Local: true})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(runtime.SubscribeOptions{From: runtime.FromOldest, Lossless: true})
	if err != nil {
		t.Fatal(err)
	}
	rt.Start()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []protocol.Message
	for range n {
		f, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f.Message)
	}
	return out
}

// TestNewSession: a session is assembled over its log and workspace (the
// demo when no model is configured), starts with ready and session_info
// naming them, saves its log when closed, and resumes with its own model
// and workspace.
func TestNewSession(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ws := t.TempDir()
	s, err := h.NewSession(t.Context(), Spec{Workspace: ws, Sandbox: "off", ApprovalMode: protocol.ApprovalAuto})
	if err != nil {
		t.Fatal(err)
	}
	if s.Choice == nil || s.Choice.Executor != protocol.ExecutorReplay {
		t.Fatalf("choice = %+v, want the replay demo", s.Choice)
	}
	fs := firstFrames(t, s.Runtime, 2)
	ready, ok := fs[0].(protocol.Ready)
	if !ok || ready.SessionID == nil || *ready.SessionID != s.ID() || ready.ExecutorType != protocol.ExecutorReplay {
		t.Errorf("first frame = %+v, want ready naming session %s on replay", fs[0], s.ID())
	}
	if info, ok := fs[1].(protocol.SessionInfo); !ok || info.Cwd != s.Root.Dir() {
		t.Errorf("second frame = %+v, want session_info with cwd %s", fs[1], s.Root.Dir())
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	logged, err := os.ReadFile(s.Log.LogPath())
	if err != nil || !strings.Contains(string(logged), `"type":"ready"`) {
		t.Fatalf("session log %s: %v\n%s", s.Log.LogPath(), err, logged)
	}

	r, err := h.NewSession(t.Context(), Spec{Resume: s.ID()[:13], Sandbox: "off"})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	defer r.Close()
	if r.ID() != s.ID() || r.Root.Dir() != s.Root.Dir() || r.Choice.Replay != s.Choice.Replay {
		t.Errorf("resumed %s in %s on %q, want %s in %s on %q", r.ID(), r.Root.Dir(), r.Choice.Replay, s.ID(), s.Root.Dir(), s.Choice.Replay)
	}
}

// TestNewSessionRefusals: a spec that cannot be honoured as given is a
// *SpecError naming what to change; a workspace holding Maestro's home is
// refused outright; nothing is left open or created either way.
func TestNewSessionRefusals(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ws := t.TempDir()
	tests := []struct {
		name    string
		spec    Spec
		want    string
		specErr bool
	}{
		{"resume with a model", Spec{Resume: "0123456789", Model: "anthropic/x"}, "drop --model/--replay", true},
		{"missing workspace", Spec{Workspace: filepath.Join(ws, "nope")}, "nope", true},
		{"unknown sandbox mode", Spec{Workspace: ws, Sandbox: "sometimes"}, "--sandbox", true},
		{"unknown agent", Spec{Workspace: ws, Agent: "nope"}, "claude-code", true},
		{"own-loop flag on an agent", Spec{Workspace: ws, Agent: "codex", Thinking: "high"}, "--thinking applies to Maestro's own agent loop", true},
		{"unknown session", Spec{Resume: "0123456789"}, "session not found", false},
		{"workspace holding the home", Spec{Workspace: filepath.Dir(h.Home())}, "MAESTRO_HOME", false},
	}
	for _, tc := range tests {
		_, err := h.NewSession(t.Context(), tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
			continue
		}
		if _, ok := errors.AsType[*SpecError](err); ok != tc.specErr {
			t.Errorf("%s: %v is a SpecError: %v, want %v", tc.name, err, ok, tc.specErr)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(h.Home(), "sessions")); len(entries) != 0 {
		t.Errorf("refused specs left %d session(s)", len(entries))
	}
}

// TestAttachSessions: the registry of serve's session API creates started
// sessions in fresh workspaces, refuses a client-named scenario file, and
// once closed saves every log and refuses new sessions.
func TestAttachSessions(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m, err := h.AttachSessions(AttachPolicy{Workspaces: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Create(t.Context(), httpattach.CreateRequest{Model: "replay/" + filepath.Join(h.Home(), "config.yaml")}); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("a scenario file over HTTP: %v, want 400", err)
	}
	rt, id, err := m.Create(t.Context(), httpattach.CreateRequest{ApprovalMode: protocol.ApprovalAuto})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := m.Get(id); !ok || got != rt {
		t.Fatalf("Get(%s) = %v, %v", id, got, ok)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	logged, err := os.ReadFile(filepath.Join(h.Home(), "sessions", id, "events.jsonl"))
	if err != nil || !strings.Contains(string(logged), `"type":"session_info"`) {
		t.Errorf("the closed session's log: %v\n%s", err, logged)
	}
	if _, _, err := m.Create(t.Context(), httpattach.CreateRequest{}); !isStatus(err, http.StatusServiceUnavailable) {
		t.Errorf("create after close: %v, want 503", err)
	}
}

func isStatus(err error, status int) bool {
	he, ok := errors.AsType[*httpattach.Error](err)
	return ok && he.Status == status
}
