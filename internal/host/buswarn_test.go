package host

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestBusSettingWarnedAtStart: a MAESTRO_EVENT_BUS value that is neither
// way is warned about as the host is made, before a command prints its
// header; it was said only when the bus opened (with the session, or
// after serve's banner), where it was easy to miss. Said once.
func TestBusSettingWarnedAtStart(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://127.0.0.1:1", "MAESTRO_EVENT_BUS": "maybe"}
	var logs bytes.Buffer
	h, err := New(Options{Home: t.TempDir(), Getenv: func(k string) string { return env[k] }, BusLogger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); strings.Count(got, "MAESTRO_EVENT_BUS=maybe") != 1 {
		t.Fatalf("after New, logs %q, want the ignored setting once", got)
	}
	_ = h
}
