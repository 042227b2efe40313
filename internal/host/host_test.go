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

// TestResumeWorkspaceGone: resuming a session whose workspace was removed
// says so, naming the session's workspace and --workspace to continue
// elsewhere (before: '--workspace "DIR": stat DIR: no such file', for a
// flag the user had not passed), and leaves the session free: once the
// directory is back it resumes.
func TestResumeWorkspaceGone(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := h.NewSession(t.Context(), Spec{Workspace: ws, Sandbox: "off"})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	s.Close()
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	_, err = h.NewSession(t.Context(), Spec{Resume: id, Sandbox: "off"})
	want := "worked in " + ws + ", which is no longer a directory: to continue it elsewhere, add --workspace DIR"
	if _, usage := errors.AsType[*SpecError](err); err == nil || usage || !strings.Contains(err.Error(), want) {
		t.Fatalf("resume: %v, want an error (not a usage error) containing %q", err, want)
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := h.NewSession(t.Context(), Spec{Resume: id, Sandbox: "off"})
	if err != nil {
		t.Fatalf("resume once the workspace is back: %v", err)
	}
	r.Close()
}

// TestNewSessionLaunchIDs: a session started with the launcher's ids
// (maestro headless under MAESTRO_SESSION_ID and MAESTRO_AGENT_RUN_ID)
// reports the launcher's session id in ready, session_info and snapshots,
// records both ids in its metadata, and resumes by the launcher's id with
// it kept; an id with control characters or spaces is refused.
func TestNewSessionLaunchIDs(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ws := t.TempDir()
	s, err := h.NewSession(t.Context(), Spec{Workspace: ws, Sandbox: "off", SessionID: "ses_launch", AgentRunID: "run_42"})
	if err != nil {
		t.Fatal(err)
	}
	fs := firstFrames(t, s.Runtime, 2)
	if ready, ok := fs[0].(protocol.Ready); !ok || ready.SessionID == nil || *ready.SessionID != "ses_launch" {
		t.Errorf("ready = %+v, want session ses_launch", fs[0])
	}
	if info, ok := fs[1].(protocol.SessionInfo); !ok || info.SessionID == nil || *info.SessionID != "ses_launch" {
		t.Errorf("session_info = %+v, want session ses_launch", fs[1])
	}
	if snap := s.Runtime.Snapshot(); snap.SessionID != "ses_launch" {
		t.Errorf("snapshot session %q, want ses_launch", snap.SessionID)
	}
	if m := s.Log.Meta(); m.ClientSessionID != "ses_launch" || m.AgentRunID != "run_42" || m.ID == "ses_launch" {
		t.Errorf("metadata %+v, want the launcher's ids beside the log's own", m)
	}
	logID := s.ID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := h.NewSession(t.Context(), Spec{Resume: "ses_launch", Sandbox: "off"})
	if err != nil {
		t.Fatalf("resume by the launcher's id: %v", err)
	}
	if r.ID() != logID || r.Runtime.Snapshot().SessionID != "ses_launch" || r.Log.Meta().AgentRunID != "run_42" {
		t.Errorf("resumed %s as %q (run %q), want %s as ses_launch (run_42)", r.ID(), r.Runtime.Snapshot().SessionID, r.Log.Meta().AgentRunID, logID)
	}
	r.Close()
	for _, bad := range []Spec{{SessionID: "two words"}, {AgentRunID: "run\n1\x00"}, {SessionID: strings.Repeat("x", MaxLaunchID+1)}} {
		bad.Workspace, bad.Sandbox = ws, "off"
		var se *SpecError
		if _, err := h.NewSession(t.Context(), bad); !errors.As(err, &se) || !strings.Contains(se.Msg, "MAESTRO_") {
			t.Errorf("spec %+v: %v, want a SpecError naming the variable", bad, err)
		}
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
