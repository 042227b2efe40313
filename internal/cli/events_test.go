package cli

import "testing"

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
