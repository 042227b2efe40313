package cli

import (
	"strings"
	"testing"
)

// --event-bus-create-stream is a flag of the commands that publish
// platform events only (docs/events.md, "Turning it on").
func TestEventBusFlagOnPublishingCommands(t *testing.T) {
	root := NewRoot(&IOStreams{Getenv: func(string) string { return "" }})
	tests := []struct {
		path []string
		want bool
	}{
		{[]string{"run"}, true},
		{[]string{"headless"}, true},
		{[]string{"serve"}, true},
		{[]string{"events", "smoke"}, true},
		{[]string{"tasks"}, false},
		{[]string{"sessions"}, false},
		{[]string{"pieces"}, false},
		{[]string{"version"}, false},
	}
	for _, tt := range tests {
		cmd, _, err := root.Find(tt.path)
		if err != nil {
			t.Fatalf("%v: %v", tt.path, err)
		}
		if got := cmd.Flags().Lookup(eventBusFlag) != nil; got != tt.want {
			t.Errorf("maestro %v has --%s: %v, want %v", tt.path, eventBusFlag, got, tt.want)
		}
	}
}

// maestro events smoke without a bus says why: no URL anywhere, or a URL
// turned off by MAESTRO_EVENT_BUS (before, both said "no event bus
// configured: set MAESTRO_EVENT_BUS_URL", to a user who had set it).
func TestEventsSmokeWithoutBus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "no event bus configured: set MAESTRO_EVENT_BUS_URL (or EVALOPS_NATS_URL, NATS_URL,"},
		{map[string]string{"NATS_URL": "nats://127.0.0.1:1", "MAESTRO_EVENT_BUS": "0"}, "the event bus nats://127.0.0.1:1 is turned off by MAESTRO_EVENT_BUS"},
		{map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://127.0.0.1:1", "MAESTRO_AUDIT_BUS": "false"}, "the event bus nats://127.0.0.1:1 is turned off by MAESTRO_EVENT_BUS (or MAESTRO_AUDIT_BUS)"},
	} {
		r := runCLI(t, tt.env, "events", "smoke")
		if r.code != ExitError || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("env %v: exit %d, stderr %q; want %d and %q", tt.env, r.code, r.stderr, ExitError, tt.want)
		}
	}
}

// A value of MAESTRO_EVENT_BUS_CREATE_STREAM (or MAESTRO_EVENT_BUS)
// that is neither way is said before the smoke's outcome: before, "y"
// was taken silently for "no", and the smoke failed with "no JetStream
// stream takes the subject (create it, or pass
// --event-bus-create-stream)" to a user who had asked for it.
func TestEventsSmokeSaysAnIgnoredSetting(t *testing.T) {
	t.Parallel()
	r := runCLI(t, map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://127.0.0.1:1", "MAESTRO_EVENT_BUS_CREATE_STREAM": "y"}, "events", "smoke", "--timeout", "2s")
	if want := "maestro: warning: MAESTRO_EVENT_BUS_CREATE_STREAM=y: not one of 1, true, yes, on"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}
