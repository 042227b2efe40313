package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// TestLazyToolsHonoursTheCaller: a caller waiting for the session's tools
// while an MCP server starts stops waiting when its context ends: Ctrl-C
// during a slow server's start was ignored until the start's 30 s
// timeout (the server, in a process group of its own, no longer gets the
// terminal's SIGINT).
func TestLazyToolsHonoursTheCaller(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := config.MCPServer{Command: "sh", Args: []string{"-c", `echo >"$STARTED"; exec sleep 60`}, Env: map[string]string{"STARTED": fifo}}
	m := mcp.NewManager(mcp.Options{Servers: map[string]config.MCPServer{"slow": srv}, StartTimeout: time.Minute})
	t.Cleanup(func() { m.Close() })
	root, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	tools := lazyTools(root, NewProbe(sandbox.Config{Mode: sandbox.ModeOff}), tool.FileLimits{}, m)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := tools(ctx)
		done <- err
	}()
	f, err := os.OpenFile(fifo, os.O_RDONLY, 0) // returns once the server runs
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("tools = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the caller still waits for the server's start 20 s after its context ended")
	}
}
