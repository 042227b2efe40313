package host

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
// Before, the dead session stayed open on the bus for ever. Under a
// session id of the control plane's (MAESTRO_SESSION_ID), which the
// restarted container keeps, the new runner's events are not dropped as
// duplicates of the dead one's (both logs number their records from 1).
func TestHostedRunnerClosesTheSessionAKilledRunnerLeftOpen(t *testing.T) {
	t.Parallel()
	for _, busID := range []string{"", "sess_c"} {
		t.Run("session-id="+busID, func(t *testing.T) {
			t.Parallel()
			srv := bustest.Start(t)
			srv.CreateStream()
			state, ws := t.TempDir(), t.TempDir()

			// The killed runner: its session started on the bus, then the
			// process died (the kernel released the log's lock; no
			// metadata, no close mark written).
			dead, err := session.NewStore(filepath.Join(state, "sessions")).Create(session.Meta{Provider: "fixture", Model: "fixture"})
			if err != nil {
				t.Fatal(err)
			}
			b, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: srv.URL(), Source: "maestro-test"}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
			if err != nil {
				t.Fatal(err)
			}
			meta := dead.Meta()
			deadIDs := dead.ID() + "."
			if busID != "" {
				meta.ID, deadIDs = busID, busID+"."+dead.ID()+"."
			}
			b.FollowSession(dead.Dir(), meta)
			dead.Event(protocol.Ready{ProtocolVersion: "2026-04-02", SessionID: new(meta.ID)})
			srv.Wait(1)
			saved, err := os.ReadFile(filepath.Join(dead.Dir(), "session.json"))
			if err != nil {
				t.Fatal(err)
			}
			dead.Close()
			if err := os.WriteFile(filepath.Join(dead.Dir(), "session.json"), saved, 0o600); err != nil {
				t.Fatal(err)
			}
			b.Close()

			env := map[string]string{"MAESTRO_EVENT_BUS_URL": srv.URL()}
			h, err := New(Options{Home: t.TempDir(), Getenv: func(k string) string { return env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			defer h.EventBus().Close()
			r, err := h.HostedRunner(t.Context(), hostedrunner.Config{RunnerSessionID: "mrs_1", MaestroSessionID: busID,
				WorkspaceRoot: ws, StateDir: state, Fixture: true}, Spec{})
			if err != nil {
				t.Fatal(err)
			}
			if busID != "" && r.SessionID() != busID {
				t.Fatalf("the new runner's session id %s, want %s", r.SessionID(), busID)
			}
			// Closing the runner waits for its events to be published
			// (acknowledged, or dropped as duplicates).
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			msgs := srv.Messages()
			var got []string
			for _, m := range msgs {
				got = append(got, m.Event.Type()+" "+m.Event.ID())
			}
			want := []string{
				eventbus.TypeSessionStarted + " " + deadIDs + "1.0",
				eventbus.TypeSessionClosed + " " + deadIDs + "1.closed",
			}
			if len(got) != 4 || !slices.Equal(got[:2], want) ||
				!strings.HasPrefix(got[2], eventbus.TypeSessionStarted+" "+r.SessionID()+".") || strings.HasPrefix(got[2], eventbus.TypeSessionStarted+" "+deadIDs) ||
				!strings.HasPrefix(got[3], eventbus.TypeSessionClosed+" "+r.SessionID()+".") {
				t.Fatalf("published:\n got %q\nwant %q, then the new session's started and closed", got, want)
			}
			var d struct {
				Reason string `json:"close_reason"`
			}
			if err := json.Unmarshal(msgs[1].Event.Data(), &d); err != nil || d.Reason != "MAESTRO_CLOSE_REASON_ERROR" {
				t.Errorf("the dead session's close_reason %q (%v), want MAESTRO_CLOSE_REASON_ERROR", d.Reason, err)
			}
		})
	}
}
