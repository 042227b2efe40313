package queue

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestOutageLogsOnceThenReminds: a store call failing every second during
// an outage is logged once with its error, reminded every 30 s with the
// count, and its recovery said once; a call that keeps working logs
// nothing. Before, each failed poll logged a warning (two a second per
// process with a pool and a maintenance loop).
func TestOutageLogsOnceThenReminds(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	o := &Outage{What: "claim", Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})), Now: func() time.Time { return now }}
	o.OK()
	down := errors.New("connection refused")
	for range 65 { // 65 s of failures, one a second
		o.Failed(down)
		now = now.Add(time.Second)
	}
	o.OK()
	o.OK()
	want := []string{
		`level=WARN msg="claim failed" err="connection refused"`,
		`level=WARN msg="claim still failing" failures=31 for=30s err="connection refused"`,
		`level=WARN msg="claim still failing" failures=61 for=1m0s err="connection refused"`,
		`level=INFO msg="claim works again" failures=65 after=1m5s`,
	}
	if got := strings.Split(strings.TrimSpace(buf.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
