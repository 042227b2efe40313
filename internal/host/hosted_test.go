package host

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// A hosted runner killed (SIGKILL, the pod's OOM) left its session open
// on the bus: its log is in the runner's state directory, which nothing
// caught up on. A runner started again on that state directory now
// publishes the dead session's closed (ERROR) before its own started.
// Before, the dead session stayed open on the bus for ever.
func TestHostedRunnerClosesTheSessionAKilledRunnerLeftOpen(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	srv.CreateStream()
	state, ws := t.TempDir(), t.TempDir()

	// The killed runner: its session started on the bus, then the
	// process died (the kernel released the log's lock; no metadata, no
	// close mark written).
	dead, err := session.NewStore(filepath.Join(state, "sessions")).Create(session.Meta{Provider: "fixture", Model: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: srv.URL(), Source: "maestro-test"}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	b.FollowSession(dead.Dir(), dead.Meta())
	dead.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: new(dead.ID())})
	srv.Wait(1)
	meta, err := os.ReadFile(filepath.Join(dead.Dir(), "session.json"))
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	if err := os.WriteFile(filepath.Join(dead.Dir(), "session.json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	b.Close()

	env := map[string]string{"MAESTRO_EVENT_BUS_URL": srv.URL()}
	h, err := New(Options{Home: t.TempDir(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.EventBus().Close()
	r, err := h.HostedRunner(t.Context(), hostedrunner.Config{RunnerSessionID: "mrs_1", WorkspaceRoot: ws, StateDir: state, Fixture: true}, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	// Wait for the new session's started; the dead one's closed must be
	// there already, before it.
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var got []string
	var msgs []bustest.Message
	for {
		msgs, got = srv.Messages(), got[:0]
		for _, m := range msgs {
			got = append(got, m.Event.Type()+" "+m.Event.ID())
		}
		if len(got) > 0 && strings.HasPrefix(got[len(got)-1], eventbus.TypeSessionStarted+" "+r.SessionID()+".") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new runner's started was not published in 20 s; the stream holds %q", got)
		}
		<-tick.C
	}
	want := []string{
		eventbus.TypeSessionStarted + " " + dead.ID() + ".1.0",
		eventbus.TypeSessionClosed + " " + dead.ID() + ".1.closed",
		eventbus.TypeSessionStarted,
	}
	if len(got) != 3 || !slices.Equal(got[:2], want[:2]) {
		t.Fatalf("published:\n got %q\nwant %q, then the new session's started", got, want[:2])
	}
	var d struct {
		Reason string `json:"close_reason"`
	}
	if err := json.Unmarshal(msgs[1].Event.Data(), &d); err != nil || d.Reason != "MAESTRO_CLOSE_REASON_ERROR" {
		t.Errorf("the dead session's close_reason %q (%v), want MAESTRO_CLOSE_REASON_ERROR", d.Reason, err)
	}
}
