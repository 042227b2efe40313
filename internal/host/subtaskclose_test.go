package host

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// TestSubtaskCloseDoesNotWaitForTheBus: with NATS down, closing a piece
// run's subtask log (what engine.Config.FollowLog returns, called before
// the subtask's result goes to its parent) returns at once, and its
// closed event goes out when NATS comes back while the process lives.
// Before, each subtask's close held its result up by the 3 s the bus's
// close waits.
func TestSubtaskCloseDoesNotWaitForTheBus(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	srv.CreateStream()
	env := map[string]string{"MAESTRO_EVENT_BUS_URL": srv.URL()}
	h, err := New(Options{Home: t.TempDir(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.EventBus().Close()
	parent, err := session.NewStore(t.TempDir()).Create(session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	sub, err := session.NewStore(filepath.Join(parent.Dir(), "runs", "1", "subtasks", "01-alpha", "logs")).Create(session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	closed := h.FollowSession(sub.Dir(), sub.Meta())
	srv.Stop()
	sub.Event(protocol.ToolCall{CallID: "c1", Tool: "Read", Args: json.RawMessage(`{}`)})
	sub.Event(protocol.ToolEnd{CallID: "c1", Success: true})
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); closed(sub.Cursor(), "completed") }()
	select {
	case <-done:
	case <-time.After(2 * time.Second): // the bus's close waits 3 s
		t.Fatal("the subtask's close waited for the bus")
	}
	srv.Restart()
	srv.WaitFor(func(m bustest.Message) bool {
		return m.Event.Type() == eventbus.TypeSessionClosed && strings.HasPrefix(m.Event.ID(), sub.ID()+".")
	})
}
