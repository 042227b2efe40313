package sandbox

import (
	"encoding/json"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Supervision of the programs Maestro starts outside the Bash tool (agent
// CLIs, stdio MCP servers).
//
// Such a program runs in a process group of its own, out of reach of the
// terminal's Ctrl-C, and Maestro stops it by signalling that group. When
// Maestro dies without doing so (SIGKILL, the OOM killer, a crash) the
// group would run on unattended: a parent-death signal on the program
// reaches the program only, not the commands it started (a CLI's own
// shell commands, an MCP server's children). So the program runs under
// the helper in supervise mode:
//
//	<maestro> -test.run=^MaestroSandboxHelper$ {"supervise":true,"parent":<pid>} -- <program> <args>…
//
// The helper is started in a process group of its own (the caller's
// Setpgid), which the program joins: the group Maestro signals is led by
// the helper. The helper adopts orphaned descendants
// (child subreaper), and has SIGTERM as its parent-death signal. A
// SIGTERM (SIGINT, SIGHUP) that comes while Maestro still is its parent was sent to the
// group, which the program got as well: the helper ignores it and waits.
// One that comes after Maestro died (its parent is another process by
// then) makes it kill the program and every descendant. When the program
// exits the helper exits with its status, killing nothing: what the
// program left behind on purpose is left as without supervision. No
// limits, no confinement.

// helperInstalled is set when this binary handles the helper marker
// (RunHelperIfRequested was called), so that it can run as the supervisor.
var helperInstalled atomic.Bool

// selfExe runs this binary whatever became of its file (replaced by an
// upgrade, removed): the helper is always the very executable running.
const selfExe = "/proc/self/exe"

// Supervise makes cmd, not yet started, run under the helper in supervise
// mode (see above) when this binary can be its own helper (its main or
// TestMain calls RunHelperIfRequested); otherwise it leaves cmd as it is.
// Call it last, once cmd's path, arguments and SysProcAttr are set: it
// keeps SysProcAttr and sets its parent-death signal. The process cmd
// starts is the helper: its pid leads the program's process group.
func Supervise(cmd *exec.Cmd) {
	if !helperInstalled.Load() || cmd.Process != nil {
		return
	}
	spec, err := json.Marshal(helperSpec{Supervise: true, Parent: os.Getpid()})
	if err != nil {
		return
	}
	prog := cmd.Path
	if prog == "" && len(cmd.Args) > 0 {
		prog = cmd.Args[0]
	}
	args := []string{os.Args[0], helperArg, string(spec), "--", prog}
	if len(cmd.Args) > 1 {
		args = append(args, cmd.Args[1:]...)
	}
	cmd.Path, cmd.Args = selfExe, args
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}

// runSupervisor is the helper in supervise mode; it returns the exit code.
// parent is Maestro's pid: a helper whose parent is another process
// already (Maestro died while it started) starts nothing.
func runSupervisor(argv []string, parent int, sigs chan os.Signal) int {
	if os.Getppid() != parent {
		return helperFail("Maestro (pid %d) has gone", parent)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return helperFail("becoming a child subreaper: %v", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return helperFail("starting %s: %v", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			return exitLike(err)
		case <-sigs:
			if os.Getppid() == parent {
				continue // sent to the group: the program has it too
			}
			_ = cmd.Process.Kill()
			err := <-done
			killDescendants()
			return exitLike(err)
		}
	}
}
