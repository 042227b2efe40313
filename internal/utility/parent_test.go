package utility

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// parentModeVar, when set in a re-executed test binary, makes
// TestParentKilledLeavesNoUtilityCommand play Maestro: it starts
// parentCommand as a utility command in the terminal mode the variable
// names, in the workspace parentWorkspaceVar names, says "ready" once the
// command's processes run, and waits to be killed.
const (
	parentModeVar      = "MAESTRO_UTILITY_TEST_PARENT"
	parentWorkspaceVar = "MAESTRO_UTILITY_TEST_PARENT_WS"
)

// parentCommand leaves a background process, one that ignores the
// terminal's hang-up, and a pipeline, so that neither the shell's death,
// a process group kill nor a pty's hang-up is enough.
const parentCommand = "sleep 300 & (trap '' HUP; exec sleep 302) & sleep 301 | cat; echo done"

// TestParentKilledLeavesNoUtilityCommand: when maestro headless (or a
// serve session) is SIGKILLed while a utility command runs, on pipes or
// on a pty, none of the command's processes keeps running. The parent is
// a real process (this binary re-executed), killed for real.
func TestParentKilledLeavesNoUtilityCommand(t *testing.T) {
	if mode := os.Getenv(parentModeVar); mode != "" {
		playParent(t, protocol.TerminalMode(mode))
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []protocol.TerminalMode{protocol.TerminalPipe, protocol.TerminalPTY} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ws, err := os.MkdirTemp("", "utility-parent-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(ws) })
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			parent := exec.CommandContext(ctx, exe, "-test.run=^TestParentKilledLeavesNoUtilityCommand$", "-test.v")
			parent.Env = append(os.Environ(), parentModeVar+"="+string(mode), parentWorkspaceVar+"="+ws)
			parent.Stderr = os.Stderr
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// Whatever the outcome, nothing of the command outlives the test.
				for _, pid := range processesIn(t, ws) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			ready := false
			for sc := bufio.NewScanner(out); sc.Scan(); {
				if sc.Text() == "ready" {
					ready = true
					break
				}
			}
			if !ready {
				_ = parent.Process.Kill()
				_ = parent.Wait()
				t.Fatal("the parent never ran the command")
			}
			before := processesIn(t, ws)
			if len(before) < 4 {
				t.Fatalf("%d processes of the command run before the kill, want at least 4 (shell, background jobs, pipeline)", len(before))
			}
			if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = parent.Wait()
			var left []string
			for _, pid := range before {
				if proctest.Alive(pid, 10*time.Second) {
					cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
					p, _ := proctest.Stat(pid)
					left = append(left, fmt.Sprintf("%d (%q, %+v)", pid, cmdline, p))
				}
			}
			if len(left) > 0 {
				t.Errorf("%s: processes %s of the utility command outlived their SIGKILLed parent", mode, strings.Join(left, ", "))
			}
		})
	}
}

// playParent is the parent process of TestParentKilledLeavesNoUtilityCommand.
func playParent(t *testing.T, mode protocol.TerminalMode) {
	ws := os.Getenv(parentWorkspaceVar)
	f := newFixtureIn(t, ws)
	req := protocol.UtilityCommandStart{CommandID: "c", Command: parentCommand, TerminalMode: mode}
	if mode == protocol.TerminalPTY {
		req.Columns, req.Rows = ptr(80), ptr(24)
	}
	f.start(t, "A", req)
	// The test kills this process long before; the bound keeps a parent
	// that was not killed from running on.
	deadline := time.Now().Add(50 * time.Second)
	for len(processesIn(t, ws)) < 6 && time.Now().Before(deadline) {
		waitABit()
	}
	fmt.Println("ready")
	f.finish(t, "c")
}

// processesIn lists the processes, other than this one, whose working
// directory is dir or below.
func processesIn(t *testing.T, dir string) []int {
	t.Helper()
	return proctest.Processes(t, func(p proctest.Process) bool {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/cwd")
		return p.PID != os.Getpid() && err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
	})
}

// waitABit paces a poll of /proc while the command starts.
func waitABit() { <-time.After(20 * time.Millisecond) }

// TestCommandPTYControlCharacters: the terminal's Ctrl-C reaches the
// program (the terminal's foreground process group) and its end is
// reported with the signal: the supervisor, outside that group, does not
// hide the program's status. (Ctrl-\ is left out: bash died of it only
// most of the time, with or without the supervisor.)
func TestCommandPTYControlCharacters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, signal string }{{"\x03", "SIGINT"}} {
		t.Run(tc.signal, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.start(t, "A", protocol.UtilityCommandStart{
				CommandID: "k", Command: "echo ready; exec sleep 60", TerminalMode: protocol.TerminalPTY,
				AllowStdin: ptr(true),
			})
			f.waitOutput(t, "k", "ready")
			if err := f.m.CommandStdin("A", protocol.UtilityCommandStdin{CommandID: "k", Content: tc.key}); err != nil {
				t.Fatalf("CommandStdin: %v", err)
			}
			r := f.finish(t, "k")
			if diff := cmp.Diff(signalled("k", tc.signal, ""), r.exited); diff != "" {
				t.Errorf("exited mismatch (-want +got):\n%s", diff)
			}
			if strings.Contains(r.stdout, "goroutine") {
				t.Errorf("the output holds a Go stack dump: %q", r.stdout)
			}
		})
	}
}
