package utility

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/protocol"
)

// exitOf and stopOf find a command's exit and a watch's stop among msgs.
func exitOf(msgs []protocol.Message, id string) (protocol.UtilityCommandExited, bool) {
	return find(msgs, func(m protocol.UtilityCommandExited) bool { return m.CommandID == id })
}

func stopOf(msgs []protocol.Message, id string) (protocol.UtilityFileWatchStopped, bool) {
	return find(msgs, func(m protocol.UtilityFileWatchStopped) bool { return m.WatchID == id })
}

func TestStopAllAndCloseOwner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                  string
		reason                string
		wantCmd, wantWatchWhy string
	}{
		{"interrupt keyword", "interrupt", "Interrupted while utility command was still running", "Interrupted while file watch was still running"},
		{"cancel keyword", "cancel", "Cancelled while utility command was still running", "Cancelled while file watch was still running"},
		{"shutdown keyword", "shutdown", "Headless runtime shutdown while utility command was still running", "Headless runtime shutdown while file watch was still running"},
		{"sentence", ReasonInterrupted, "Interrupted while utility command was still running", "Interrupted while file watch was still running"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.start(t, "A", protocol.UtilityCommandStart{CommandID: "a", Command: "sleep 60"})
			f.start(t, "B", protocol.UtilityCommandStart{CommandID: "b", Command: "sleep 60", TerminalMode: protocol.TerminalPTY})
			f.startWatch(t, "A", protocol.UtilityFileWatchStart{WatchID: "wa"})
			f.startWatch(t, "B", protocol.UtilityFileWatchStart{WatchID: "wb"})

			// The owner A goes away. CloseOwner returns once A's command
			// has reported its exit.
			f.m.CloseOwner("A", "")
			msgs := f.rec.messages()
			ea, ok := exitOf(msgs, "a")
			if !ok {
				t.Fatal("no exit for A's command when CloseOwner returned")
			}
			if diff := cmp.Diff(signalled("a", "SIGTERM", ReasonOwnerClosed), ea); diff != "" {
				t.Errorf("exited mismatch (-want +got):\n%s", diff)
			}
			if sa, ok := stopOf(msgs, "wa"); !ok || sa.Reason != "Owning connection closed while file watch was still running" {
				t.Errorf("stopped for A's watch = %+v, %v", sa, ok)
			}
			if _, ok := exitOf(msgs, "b"); ok {
				t.Error("B's command ended with A's connection")
			}
			cmds, ws := f.m.Snapshot()
			if len(cmds) != 1 || cmds[0].CommandID != "b" || len(ws) != 1 || ws[0].WatchID != "wb" {
				t.Errorf("Snapshot = %+v %+v, want B's command and watch", cmds, ws)
			}

			f.m.StopAll(tc.reason)
			msgs = f.rec.messages()
			eb, ok := exitOf(msgs, "b")
			if !ok {
				t.Fatal("no exit for B's command when StopAll returned")
			}
			if eb.Reason != tc.wantCmd || eb.Success {
				t.Errorf("exited = %+v, want reason %q", eb, tc.wantCmd)
			}
			if sb, ok := stopOf(msgs, "wb"); !ok || sb.Reason != tc.wantWatchWhy {
				t.Errorf("stopped = %+v, %v, want reason %q", sb, ok, tc.wantWatchWhy)
			}
			if cmds, ws := f.m.Snapshot(); len(cmds)+len(ws) != 0 {
				t.Errorf("Snapshot after StopAll = %+v %+v", cmds, ws)
			}
		})
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start(t, "A", protocol.UtilityCommandStart{CommandID: "c", Command: "trap '' TERM; echo ready; sleep 60"})
	f.waitOutput(t, "c", "ready")
	f.startWatch(t, "A", protocol.UtilityFileWatchStart{WatchID: "w"})
	if err := f.m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	msgs := f.rec.messages()
	ec, ok := exitOf(msgs, "c")
	if !ok {
		t.Fatal("no exit when Close returned")
	}
	if diff := cmp.Diff(signalled("c", "SIGKILL", ReasonDisposed), ec); diff != "" {
		t.Errorf("exited mismatch (-want +got):\n%s", diff)
	}
	if sw, ok := stopOf(msgs, "w"); !ok || sw.Reason != ReasonDisposed {
		t.Errorf("stopped = %+v, %v", sw, ok)
	}
	wantError(t, f.m.CommandStart(t.Context(), "A", protocol.UtilityCommandStart{CommandID: "x", Command: "true"}), 400,
		"Headless utility operations are closed")
	wantError(t, f.m.WatchStart(t.Context(), "A", protocol.UtilityFileWatchStart{WatchID: "x"}), 400,
		"Headless utility operations are closed")
}

func TestWatchReason(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		ReasonOwnerClosed: "Owning connection closed while file watch was still running",
		ReasonDisposed:    ReasonDisposed,
	} {
		if got := WatchReason(in); got != want {
			t.Errorf("WatchReason(%q) = %q, want %q", in, got, want)
		}
	}
}
