package eventbus_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// refusals is a slog handler that signals each "publish failed" record.
type refusals struct{ c chan string }

func (r refusals) Enabled(context.Context, slog.Level) bool { return true }
func (r refusals) Handle(_ context.Context, rec slog.Record) error {
	if strings.Contains(rec.Message, "publish failed") {
		var id string
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "id" {
				id = a.Value.String()
			}
			return true
		})
		select {
		case r.c <- id:
		default:
		}
	}
	return nil
}
func (r refusals) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r refusals) WithGroup(string) slog.Handler      { return r }

// The stream refuses one event (bigger than its max_msg_size) while the
// events after it would fit: none of them is stored before it, and once
// the limit is raised every event is stored exactly once in the log's
// order (docs/events.md, "Order").
func TestRefusedEventKeepsSessionOrder(t *testing.T) {
	srv := bustest.Start(t)
	srv.ConfigureStream(func(c *jetstream.StreamConfig) { c.MaxMsgSize = 2048 })
	refused := refusals{c: make(chan string, 16)}
	b, err := eventbus.Open(eventbus.Options{
		Settings: eventbus.Settings{URL: srv.URL(), Source: "maestro-test"},
		Logger:   slog.New(refused),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, f := followNewSession(t, b)
	s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: ptr(s.ID())})
	const calls = 10
	for i := 1; i <= calls; i++ {
		name := "Read"
		if i == 2 {
			name = strings.Repeat("x", 4096) // tool_call.attempted over 2,048 bytes
		}
		toolTurn(s, fmt.Sprintf("c%d", i), name, true, "")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-refused.c:
		if !strings.HasSuffix(id, ".0") {
			t.Fatalf("refused %s", id)
		}
	case <-time.After(time.Minute):
		t.Fatal("the big event was not refused within a minute")
	}
	// Refused, and being retried: what the stream holds is the events
	// before it (started, c1 attempted and completed), none after it.
	msgs := srv.Messages()
	if len(msgs) != 3 {
		t.Fatalf("while the big event is refused the stream holds %d messages, want 3: %q", len(msgs), types(msgs))
	}
	srv.ConfigureStream(func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1 << 20 })
	f.Close(s.Cursor(), "completed")
	want := 1 + 2*calls + 1
	msgs = srv.Wait(want)
	if len(msgs) != want {
		t.Fatalf("%d messages, want %d", len(msgs), want)
	}
	bustest.CheckOnceInOrder(t, msgs, "c%d")
	if last := msgs[len(msgs)-1].Event.Type(); last != eventbus.TypeSessionClosed {
		t.Errorf("last event %s, want %s", last, eventbus.TypeSessionClosed)
	}
}
