package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// TestHostedRunnerDrainFIFOThenSIGTERM (issue 14): with a FIFO planted
// where the drain writes — the snapshot root itself, or the session file's
// name — the drain over HTTP answers within 2 s, and SIGTERM afterwards
// still ends the process within 2 s. Nothing blocks on the FIFO.
func TestHostedRunnerDrainFIFOThenSIGTERM(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		fifo     func(ws string) string
		wantCode int
	}{
		{"snapshot root is a FIFO", func(ws string) string {
			return filepath.Join(ws, ".maestro", "runner-snapshots")
		}, 500},
		{"a FIFO beside the manifest", func(ws string) string {
			return filepath.Join(ws, ".maestro", "runner-snapshots", "pipe")
		}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			p := startPrompted(t, ws, "mrs_fifo", "hello")
			wstest.MakeFIFO(t, tt.fifo(ws))
			start := time.Now()
			var body []byte
			code := p.call("POST", "/.well-known/evalops/remote-runner/drain", map[string]any{"reason": "fifo"}, nil, &body)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("drain took %s", d)
			}
			if code != tt.wantCode {
				t.Errorf("drain: %d %s, want %d", code, body, tt.wantCode)
			}
			start = time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.exited:
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("exit %s after SIGTERM", d)
				}
			case <-time.After(10 * time.Second):
				p.cmd.Process.Kill()
				t.Fatalf("no exit within 10 s of SIGTERM; stderr:\n%s", p.stderr)
			}
			p.stdin.Close()
			p.stdin = nil
		})
	}
}
