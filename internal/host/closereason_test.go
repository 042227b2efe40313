package host

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// closeReasonScenario: a Write (approval asked unless the mode is auto),
// then a text answer.
const closeReasonScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"close","description":"close reasons",
"metadata":{"recordedAt":"2026-11-27T00:00:00Z","toolsExpected":["Write"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Write","id":"call_w","input":{"path":"a.txt","content":"a"}}]},
{"index":1,"statements":[{"kind":"text","text":"done"}]}]}`

// TestClosedSaysWhyTheSessionEnded: a session's closed event on the bus
// carries why it ended, from its last prompt: COMPLETED when it
// answered, ERROR when it failed (here the replay script is exhausted, a
// fatal error), USER_STOPPED when it was stopped mid-prompt (closed
// while an approval was pending, as a shutdown or Ctrl-C does).
// Before, every session closed COMPLETED.
func TestClosedSaysWhyTheSessionEnded(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	srv.CreateStream()
	scenario := filepath.Join(t.TempDir(), "close.json")
	if err := os.WriteFile(scenario, []byte(closeReasonScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MAESTRO_EVENT_BUS_URL": srv.URL()}
	h, err := New(Options{Home: t.TempDir(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.EventBus().Close()
	// run runs prompts on a new session, each to its end, or with stopAt
	// the last one until its first frame of that type, then closes the
	// session.
	run := func(mode protocol.ApprovalMode, stopAt string, prompts ...string) string {
		s, err := h.NewSession(t.Context(), Spec{Workspace: t.TempDir(), Replay: scenario, Sandbox: "off", ApprovalMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Runtime.Connect(runtime.ConnectOptions{ID: runtime.LocalConnectionID, Local: true})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := c.Subscribe(runtime.SubscribeOptions{From: runtime.FromOldest})
		if err != nil {
			t.Fatal(err)
		}
		s.Runtime.Start()
		for i, p := range prompts {
			if err := c.Handle(t.Context(), protocol.Prompt{Content: p}); err != nil {
				t.Fatal(err)
			}
			if i < len(prompts)-1 || stopAt == "" {
				if err := s.Runtime.WaitIdle(t.Context()); err != nil {
					t.Fatal(err)
				}
				continue
			}
			for {
				f, err := sub.Next(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if f.Message.MessageType() == stopAt {
					break
				}
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return s.ID()
	}
	want := map[string]string{
		run(protocol.ApprovalAuto, "", "write"):                       "MAESTRO_CLOSE_REASON_COMPLETED",
		run(protocol.ApprovalAuto, "", "write", "exhausted"):          "MAESTRO_CLOSE_REASON_ERROR",
		run(protocol.ApprovalPrompt, protocol.TypeServerRequest, "x"): "MAESTRO_CLOSE_REASON_USER_STOPPED",
	}
	got := map[string]string{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		for _, m := range srv.Messages() {
			if m.Event.Type() != eventbus.TypeSessionClosed {
				continue
			}
			var d struct {
				ID     string `json:"session_id"`
				Reason string `json:"close_reason"`
			}
			if err := json.Unmarshal(m.Event.Data(), &d); err != nil {
				t.Fatal(err)
			}
			got[d.ID] = d.Reason
		}
	}
	for id, reason := range want {
		if got[id] != reason {
			t.Errorf("session %s closed %q, want %s", id, got[id], reason)
		}
	}
}
