package main

import (
	"bufio"
	"context"
	"fmt"
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
// a CLI slow to stop does; its pid is its process group. It waits for
// its sleep with the wait builtin, which a trapped signal interrupts at
// once: a foreground sleep defers the trap until it ends, and a SIGTERM
// that came while the shell was starting it (before the exec, the
// child still a shell, which took the signal for itself) left the trap
// a whole second late. The test's first Ctrl-C comes right after "pid",
// as the first sleep starts: now and then, under load, the executor's
// kill grace (1 s) ran out first and SIGKILLed the CLI before it noted
// the SIGTERM, and the test failed ("the CLI never got SIGTERM").
const stubbornCLI = `#!/bin/sh
[ "$1" = --version ] && { echo "stubborn 1"; exit 0; }
trap 'echo term > "$MARK"' TERM
echo "pid $$"
while :; do sleep 1 & wait $!; done
`

// TestAgentCLISecondCtrlC: a second Ctrl-C while the executor waits for
// the CLI to stop (its kill grace) ends maestro at once with 130 and
// takes the CLI's process group with it. Maestro died by the signal's
// default action, and the CLI, in a group of its own that the terminal's
// Ctrl-C does not reach, ran on.
func TestAgentCLISecondCtrlC(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "term")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cli := startStubbornCLI(ctx, t, stubbornCLI, "MARK="+mark)
	cmd := cli.cmd
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
	for cli.lines.Scan() {
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit: %v, want 130", err)
	}
	groupsGone(t, []int{cli.pgid}, at, 500*time.Millisecond)
}

// detachingCLI is stubbornCLI with a background child in its group and
// one in a session of its own.
const detachingCLI = `#!/bin/sh
[ "$1" = --version ] && { echo "detaching 1"; exit 0; }
sleep 300 &
setsid sleep "$NAP" &
echo "pid $$"
while :; do sleep 1; done
`

// TestAgentCLIDiesWithMaestro: maestro run --agent killed outright
// (SIGKILL, the OOM killer) leaves neither the CLI nor what it started
// running, a child that left the CLI's group included. The CLI used to
// run on unattended: nothing stopped its group.
func TestAgentCLIDiesWithMaestro(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// The detached sleep's command line is unique to this test run.
	nap := fmt.Sprintf("300.%06d", time.Now().UnixNano()%1e6)
	cli := startStubbornCLI(ctx, t, detachingCLI, "NAP="+nap)
	// The CLI's descendants: its group, and the detached sleep.
	var tree []int
	for range 100 {
		tree = proctest.Processes(t, func(p proctest.Process) bool {
			return p.PID != cli.cmd.Process.Pid && (p.Pgrp == cli.pgid || proctest.CommandLineHas(p.PID, "sleep\x00"+nap))
		})
		if len(tree) >= 4 { // supervisor, shell, both sleeps
			break
		}
		proctest.Alive(os.Getpid(), 20*time.Millisecond) // a bounded pause between looks
	}
	t.Cleanup(func() {
		for _, pid := range tree {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if len(tree) < 4 {
		t.Fatalf("the CLI's processes %v: want at least 4 (its shell, both sleeps, the loop's sleep or the supervisor)", tree)
	}
	if err := cli.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cli.cmd.Wait()
	for _, pid := range tree {
		if proctest.Alive(pid, 10*time.Second) {
			t.Errorf("process %d of the CLI (of %v) still runs 10 s after maestro was SIGKILLed", pid, tree)
		}
	}
}

// stubbornCLIRun is a maestro run --agent started by startStubbornCLI.
type stubbornCLIRun struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner // maestro's stdout, past the CLI's "pid N"
	pgid  int            // the CLI's process group
}

// startStubbornCLI starts maestro run --agent on a CLI made of script,
// which must print "pid $$" first, and waits for that line; env is added
// to maestro's (and the CLI's) environment.
func startStubbornCLI(ctx context.Context, t *testing.T, script string, env ...string) stubbornCLIRun {
	t.Helper()
	home, bin := t.TempDir(), t.TempDir()
	agentclitest.WriteFile(t, filepath.Join(home, "agents", "stubborn.yaml"), "id: stubborn\nname: Stubborn\nbinary: stubborn\nparser: text\ncapabilities: {batch_mode: true, streaming: true}\n")
	if err := os.WriteFile(filepath.Join(bin, "stubborn"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, binary, "run", "--agent", "stubborn", "wait")
	// On the test's timeout, one Ctrl-C: maestro stops the CLI's group
	// itself.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(append(proctest.NoModelEnv(home), "PATH="+bin+string(os.PathListSeparator)+"/usr/bin:/bin"), env...)
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
	// The group's leader is the CLI, or its supervisor (Maestro's helper).
	p, ok := proctest.Stat(pid)
	if !ok {
		t.Fatalf("the CLI (pid %d) has gone", pid)
	}
	t.Cleanup(func() { _ = syscall.Kill(-p.Pgrp, syscall.SIGKILL) })
	return stubbornCLIRun{cmd: cmd, lines: lines, pgid: p.Pgrp}
}
