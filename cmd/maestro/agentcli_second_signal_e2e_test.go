package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli/agentclitest"
	"github.com/maestro-run/maestro/internal/proctest"
)

// stubbornCLI outlives a SIGTERM (it notes it in $MARK and goes on), as
// a CLI slow to stop does; its pid is its process group.
const stubbornCLI = `#!/bin/sh
[ "$1" = --version ] && { echo "stubborn 1"; exit 0; }
trap 'echo term > "$MARK"' TERM
echo "pid $$"
while :; do sleep 1; done
`

// TestAgentCLISecondCtrlC: a second Ctrl-C while the executor waits for
// the CLI to stop (its kill grace) ends maestro at once with 130 and
// takes the CLI's process group with it. Maestro died by the signal's
// default action, and the CLI, in a group of its own that the terminal's
// Ctrl-C does not reach, ran on.
func TestAgentCLISecondCtrlC(t *testing.T) {
	t.Parallel()
	home, bin := t.TempDir(), t.TempDir()
	mark := filepath.Join(t.TempDir(), "term")
	agentclitest.WriteFile(t, filepath.Join(home, "agents", "stubborn.yaml"), "id: stubborn\nname: Stubborn\nbinary: stubborn\nparser: text\ncapabilities: {batch_mode: true, streaming: true}\n")
	if err := os.WriteFile(filepath.Join(bin, "stubborn"), []byte(stubbornCLI), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--agent", "stubborn", "wait")
	// On the test's timeout, one Ctrl-C: maestro stops the CLI's group
	// itself (a SIGKILL to maestro would leave the CLI behind).
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(proctest.NoModelEnv(home), "PATH="+bin+string(os.PathListSeparator)+"/usr/bin:/bin", "MARK="+mark)
	cmd.Dir = t.TempDir()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	pid := 0
	for pid == 0 && lines.Scan() {
		if n, ok := strings.CutPrefix(lines.Text(), "pid "); ok {
			pid, _ = strconv.Atoi(n)
		}
	}
	if pid == 0 {
		t.Fatal("the CLI never said its pid")
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The executor has sent the group SIGTERM: the kill grace runs.
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the CLI never got SIGTERM")
		}
		proctest.Alive(os.Getpid(), 20*time.Millisecond) // a bounded pause between looks
	}
	at := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit: %v, want 130", err)
	}
	groupsGone(t, []int{pid}, at, 500*time.Millisecond)
}
