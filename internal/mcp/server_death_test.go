package mcp

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpParentEnv makes the test binary a `maestro mcp` on stdin/stdout whose
// tasks are fake runs (fakeRunEnv) writing "interrupted" to the file the
// variable names.
const mcpParentEnv = "MAESTRO_MCPTEST_PARENT"

func runMCPParentIfRequested() {
	marker := os.Getenv(mcpParentEnv)
	if marker == "" {
		return
	}
	env := append(os.Environ(), fakeRunEnv+"="+marker)
	srv := NewServer(ServerOptions{Exe: os.Args[0], Env: env, Dir: filepath.Dir(marker)})
	_ = srv.Run(context.Background(), &sdk.StdioTransport{})
	os.Exit(0)
}

// TestKilledServerInterruptsItsRuns: a `maestro mcp` killed outright
// (SIGKILL, the OOM killer) while a run_task runs leaves no run behind:
// the child maestro run is interrupted as Ctrl-C would (it stops its
// commands and records the interruption). It ran on, a quiet Bash
// command to its end, until it next wrote to its dead stdout.
func TestKilledServerInterruptsItsRuns(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "interrupted")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mcpParentEnv+"="+marker)
	started := make(chan struct{})
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
			select {
			case <-started:
			default:
				close(started)
			}
		},
	})
	cs, err := c.Connect(testCtx(t), &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	go func() {
		params := &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "work"}}
		params.SetProgressToken("p")
		_, _ = cs.CallTool(testCtx(t), params)
	}()
	select {
	case <-started:
	case <-testCtx(t).Done():
		t.Fatal("the task's run did not start")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// The run, the server's child, writes the marker once interrupted;
	// it is no child of this test, so its end is watched through the file.
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		data, err := os.ReadFile(marker)
		if err == nil && string(data) == "interrupted" {
			return
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			if pid, err := os.ReadFile(marker + ".pid"); err == nil {
				if n, err := strconv.Atoi(string(pid)); err == nil {
					_ = syscall.Kill(n, syscall.SIGKILL) // the run left behind
				}
			}
			t.Fatal("the run of a killed maestro mcp was not interrupted within 20 s")
		}
		<-tick.C
	}
}
