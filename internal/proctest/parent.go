package proctest

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
)

// ProcessesIn lists the processes (other than this one) whose working
// directory is dir or below it: a command started in a test's workspace.
func ProcessesIn(tb testing.TB, dir string) []int {
	tb.Helper()
	return Processes(tb, func(p Process) bool {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/cwd")
		return p.PID != os.Getpid() && err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
	})
}

// KillParent plays a parent killed outright: it re-runs this test binary
// as test (its -test.run), with env added, which is to start a command in
// ws and print "ready" on its stdout once the command's processes run;
// it checks that at least atLeast processes run in ws, SIGKILLs the
// parent and returns those of them still alive 10 s later, described
// (pid, command line, state). Whatever the outcome, what runs in ws is
// killed when the test ends.
func KillParent(t *testing.T, test, ws string, atLeast int, env ...string) (left []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	parent := exec.CommandContext(ctx, exe, "-test.run=^"+test+"$", "-test.v")
	parent.Env = append(os.Environ(), env...)
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range ProcessesIn(t, ws) {
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
	before := ProcessesIn(t, ws)
	if len(before) < atLeast {
		t.Fatalf("%d processes of the command run before the kill, want at least %d", len(before), atLeast)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for _, pid := range before {
		if Alive(pid, 10*time.Second) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			p, _ := Stat(pid)
			left = append(left, fmt.Sprintf("%d (%q, %+v)", pid, cmdline, p))
		}
	}
	return left
}
