package utility

import (
	"fmt"
	"os"
	"strings"
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
	for _, mode := range []protocol.TerminalMode{protocol.TerminalPipe, protocol.TerminalPTY} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ws, err := os.MkdirTemp("", "utility-parent-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(ws) })
			left := proctest.KillParent(t, "TestParentKilledLeavesNoUtilityCommand", ws, 4, parentModeVar+"="+string(mode), parentWorkspaceVar+"="+ws)
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
func processesIn(t *testing.T, dir string) []int { return proctest.ProcessesIn(t, dir) }

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
