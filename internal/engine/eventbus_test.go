package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/session"
)

// TestSubtaskLogsArePublished: with Config.FollowLog set to the event
// bus's follower (as `maestro run` sets it), each subtask's session log
// is published like any session's: its tool call attempted and
// completed, then its close (docs/events.md, "Platform events").
func TestSubtaskLogsArePublished(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	bus, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: srv.URL(), CreateStream: true, Source: "test"}, CloseWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	h := newHarness(t, "fanout", func(c *Config) {
		c.Provider = replay.New(scriptedFanout(t))
		c.FollowLog = func(dir string, meta session.Meta) func(int64, string) { return bus.FollowSession(dir, meta).Close }
	})
	out, err := h.start("fanout", "Count the letters.")
	if err != nil || out.Status != StatusSucceeded {
		t.Fatalf("outcome = %+v, %v", out, err)
	}
	// Three subtasks, each: attempted, completed, closed (the subtasks
	// run in parallel: count per session).
	per := map[string][]string{}
	for _, m := range srv.Wait(9) {
		sid, _, _ := strings.Cut(m.Event.ID(), ".") // <session id>.<cursor>.<i>
		per[sid] = append(per[sid], strings.TrimPrefix(strings.TrimPrefix(m.Event.Type(), "maestro.events."), "maestro.sessions.session."))
	}
	if len(per) != 3 {
		t.Fatalf("events of %d sessions, want the 3 subtasks': %v", len(per), per)
	}
	for sid, types := range per {
		if got, want := strings.Join(types, " "), "tool_call.attempted tool_call.completed closed"; got != want {
			t.Errorf("subtask session %s published %s, want %s", sid, got, want)
		}
	}
}

// TestSubtaskClosedSaysWhy: a subtask whose run failed (its replay
// script ends before the complete call) closes its session with
// close_reason ERROR, the others COMPLETED (before: all COMPLETED).
func TestSubtaskClosedSaysWhy(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	bus, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: srv.URL(), CreateStream: true, Source: "test"}, CloseWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	sc := scriptedFanout(t)
	for i := range sc.Subtasks {
		if sc.Subtasks[i].ID == "leaf-beta" {
			sc.Subtasks[i].Frames[0].Statements = []replay.Statement{{Kind: replay.KindText, Text: "no complete call"}}
		}
	}
	h := newHarness(t, "fanout", func(c *Config) {
		c.Provider = replay.New(sc)
		c.FollowLog = func(dir string, meta session.Meta) func(int64, string) { return bus.FollowSession(dir, meta).Close }
	})
	if _, err := h.start("fanout", "Count the letters."); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, m := range srv.Messages() {
		if m.Event.Type() == eventbus.TypeSessionClosed {
			var d struct {
				Reason string `json:"close_reason"`
			}
			json.Unmarshal(m.Event.Data(), &d)
			reasons = append(reasons, d.Reason)
		}
	}
	slices.Sort(reasons)
	if got, want := strings.Join(reasons, " "), "MAESTRO_CLOSE_REASON_COMPLETED MAESTRO_CLOSE_REASON_COMPLETED MAESTRO_CLOSE_REASON_ERROR"; got != want {
		t.Errorf("the subtasks' sessions closed %s, want %s", got, want)
	}
}
