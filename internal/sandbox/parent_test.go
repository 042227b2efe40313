package sandbox_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/sandbox"
)

// parentModeVar, when set in a re-executed test binary, makes
// TestParentKilledLeavesNoCommand play Maestro: it runs a command in the
// sandbox kind named by the variable, in the workspace parentWorkspaceVar
// names, says "ready" once the command runs, and waits to be killed.
const (
	parentModeVar      = "MAESTRO_SANDBOX_TEST_PARENT"
	parentWorkspaceVar = "MAESTRO_SANDBOX_TEST_PARENT_WS"
)

// TestParentKilledLeavesNoCommand: when Maestro is SIGKILLed (the OOM
// killer, a supervisor, a crash of the worker) while a command runs, none
// of the command's processes keeps running: a worker restarted under the
// same name re-runs the step in the same scratch directory at once, beside
// what the old command would otherwise still be doing there. The parent is
// a real process (this binary re-executed), killed for real; the command
// leaves a background process and a foreground one, in a pipeline, so that
// neither the shell's own death nor a process group kill is enough.
func TestParentKilledLeavesNoCommand(t *testing.T) {
	if mode := os.Getenv(parentModeVar); mode != "" {
		playParent(t, mode)
		return
	}
	modes := []string{"supervised", "supervised-stdin"}
	for _, m := range limitedModes(sandbox.Config{}) {
		modes = append(modes, m.name)
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			ws := t.TempDir()
			left := proctest.KillParent(t, "TestParentKilledLeavesNoCommand", ws, 3, parentModeVar+"="+mode, parentWorkspaceVar+"="+ws)
			if len(left) > 0 {
				t.Errorf("%s: processes %s of the command outlived their SIGKILLed parent", mode, strings.Join(left, ", "))
			}
		})
	}
}

// parentCommand is the command a parent of TestParentKilledLeavesNoCommand
// runs: a background process and a pipeline.
const parentCommand = "sleep 300 & sleep 301 | cat; echo done"

// playParent is the parent process of TestParentKilledLeavesNoCommand.
// Mode "supervised" starts the command as agent CLIs and MCP servers are
// started (its own process group, sandbox.Supervise); the others run it
// in that sandbox kind.
func playParent(t *testing.T, mode string) {
	ws := os.Getenv(parentWorkspaceVar)
	// The test kills this process long before; the bound keeps a parent
	// that was not killed from running on.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	switch mode {
	case "supervised":
		cmd = exec.CommandContext(ctx, "/bin/bash", "-c", parentCommand)
		cmd.Dir = ws
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		sandbox.Supervise(cmd)
	case "supervised-stdin":
		// An MCP server ends at its input's end, which comes as this
		// process's files close, before the supervisor's parent-death
		// signal: what it started must not outlive it either.
		cmd = exec.CommandContext(ctx, "/bin/bash", "-c", "sleep 300 & sleep 301 & read x; echo done")
		cmd.Dir = ws
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if _, err := cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		sandbox.Supervise(cmd)
	default:
		cmd = sandboxCommand(ctx, t, mode, ws)
	}
	cmd.Stdout = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The command's processes appear in the workspace shortly after the
	// start; the test lists them after "ready", so wait for all of them.
	for len(processesIn(t, ws)) < 4 && ctx.Err() == nil {
		waitABit()
	}
	fmt.Println("ready")
	_ = cmd.Wait()
}

// sandboxCommand is parentCommand in the sandbox kind mode.
func sandboxCommand(ctx context.Context, t *testing.T, mode, ws string) *exec.Cmd {
	var m sandboxMode
	for _, c := range limitedModes(sandbox.Config{}) {
		if c.name == mode {
			m = c
		}
	}
	if m.new == nil {
		t.Fatalf("no sandbox mode %q", mode)
	}
	cmd, err := m.new(t).Command(ctx, ws, parentCommand, sandbox.CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// TestSupervisedGroupSignal: a SIGTERM sent to a supervised program's
// process group while Maestro lives (how agent CLIs and MCP servers are
// stopped) is the program's to handle: the helper leading the group lets
// it finish as it chooses and exits with its status.
func TestSupervisedGroupSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", `trap 'kill $!; exit 7' TERM; sleep 100 & echo ready; wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sandbox.Supervise(cmd)
	if cmd.Path != "/proc/self/exe" {
		t.Fatalf("Supervise left the command as it was (%s): the test binary installs the helper", cmd.Path)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("first line %q", line)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 7 {
		t.Fatalf("the supervised program's status after its group's SIGTERM: %v, want exit status 7", err)
	}
}
