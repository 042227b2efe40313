package cli

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
)

// Closing the terminal (SIGHUP) during `maestro run --agent` interrupts
// the run like Ctrl-C: the CLI's process group, which the hangup does not
// reach, is killed, and the exit status is 130. SIGHUP killed Maestro
// outright and left the CLI working in the workspace, unattended.
func TestRunAgentHangupStopsTheCLI(t *testing.T) {
	t.Parallel()
	ae := newAgentEnv(t)
	exe, err := maestroBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if signal.Ignored(syscall.SIGHUP) {
		// Under nohup this process ignores SIGHUP, and so would the
		// maestro it starts, which then rightly runs on. With a handler
		// here, the exec'd child starts with the default disposition.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	cmd := exec.CommandContext(ctx, exe, "run", "--agent", "fake-agent", "--workspace", t.TempDir(), "-o", "jsonl", "hang")
	cmd.Env = append(headlessEnv(ae.home), "PATH="+ae.path)
	stdin, out := proctest.StartPiped(t, cmd)
	defer stdin.Close()
	frames, done := readFrames(t, out)
	// The CLI has started once it named its session.
	for f := range frames {
		if f["type"] == "session_info" && f["agent_session_id"] != nil {
			break
		}
	}
	leader := ae.firstStart(t)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for range frames {
	}
	<-done
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != ExitInterrupted {
		t.Errorf("exit %d (%v), want %d", code, cmd.ProcessState, ExitInterrupted)
	}
	if proctest.Alive(leader, 2*time.Second) {
		syscall.Kill(-leader, syscall.SIGKILL)
		t.Errorf("the agent CLI (pid %d) outlived the hangup", leader)
	}
}
