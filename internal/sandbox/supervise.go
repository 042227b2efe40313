package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

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
	underHelper(cmd, spec)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}

// underHelper makes cmd run this binary as the helper with spec, the
// helper then running cmd's program with its arguments.
func underHelper(cmd *exec.Cmd, spec []byte) {
	prog := cmd.Path
	if prog == "" && len(cmd.Args) > 0 {
		prog = cmd.Args[0]
	}
	args := []string{os.Args[0], helperArg, string(spec), "--", prog}
	if len(cmd.Args) > 1 {
		args = append(args, cmd.Args[1:]...)
	}
	cmd.Path, cmd.Args = selfExe, args
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
	return exitLike(waitSupervised(cmd, parent, sigs))
}

// waitSupervised waits for the supervised program cmd to end and returns
// its Wait error. A signal while Maestro (pid parent) lives is left to
// the program (sent to its group, or by Maestro to the program's group
// itself); one after Maestro died (the parent-death signal) kills the
// program and every descendant, and so does the program's end while
// Maestro is exiting: it may end first (an MCP server at its input's
// end, a pty's hang-up, as Maestro's files close), and what it left has
// no one else to end it.
func waitSupervised(cmd *exec.Cmd, parent int, sigs chan os.Signal) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			if parentExiting(parent) {
				killDescendants()
			}
			return err
		case <-sigs:
			if os.Getppid() == parent {
				continue
			}
			_ = cmd.Process.Kill()
			err := <-done
			killDescendants()
			return err
		}
	}
}

// Supervision of a program in a session of its own (utility commands).
//
// A utility command runs as a session leader, on pipes or as the
// controlling process of a pseudo-terminal, and Maestro signals its
// process group (a stop, the terminal's Ctrl-C, Ctrl-\ and Ctrl-Z
// reach that group). A helper leading the group, as Supervise does,
// would receive all of these as well (a Go program dies of SIGQUIT and
// SIGUSR1, stops on SIGTSTP) and would hold the terminal in the
// program's place. So here the helper stays outside: Maestro starts it
// in a process group of its own, and the helper starts the program with
// setsid (and the terminal on its stdin as controlling terminal):
//
//	<maestro> -test.run=^MaestroSandboxHelper$ {"supervise":true,"parent":<pid>,"session":true,"ctty":…} -- <program> <args>…
//
// The program's session, process group, terminal and signals are those
// it had when Maestro started it itself; only its parent differs. The
// helper is a child subreaper with SIGTERM as its parent-death signal,
// as in Supervise: a SIGTERM (SIGINT, SIGHUP) after Maestro died kills
// the program and every descendant (the program's group, and what left
// it), and so does the program's end after Maestro died (a pty's
// hang-up may end it first); a signal while Maestro lives is ignored. On fd 3 the helper writes
// "pid <pid>" once the program runs (or "error <why>" when it cannot
// start it), then "status <wait status>" when the program has ended,
// so that Maestro signals the program's group and reports its very exit
// status or signal; the helper then exits killing nothing, like the
// program's status as far as an exit code can say.

// sessionReportTimeout bounds the wait for the helper's first report.
const sessionReportTimeout = 30 * time.Second

// Session is a program started under the helper by SuperviseSession.
type Session struct {
	r, w *os.File
	rd   *bufio.Reader
	// status is the program's wait status, once reported.
	status    syscall.WaitStatus
	hasStatus bool
}

// SuperviseSession makes cmd, not yet started, run its program in a
// session of its own under the helper (see above), with the terminal on
// its stdin as controlling terminal when ctty. It returns nil, and
// leaves cmd as it is, when this binary cannot be its own helper: the
// caller then starts the program itself. Call it last, once cmd's path,
// arguments, directory, environment and standard files are set; it sets
// SysProcAttr (the helper's own process group and parent-death signal)
// and ExtraFiles, which must be empty. Start the command with
// Session.Start.
func SuperviseSession(cmd *exec.Cmd, ctty bool) (*Session, error) {
	if !helperInstalled.Load() || cmd.Process != nil || len(cmd.ExtraFiles) > 0 {
		return nil, nil
	}
	spec, err := json.Marshal(helperSpec{Supervise: true, Parent: os.Getpid(), Session: true, Ctty: ctty})
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	underHelper(cmd, spec)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.ExtraFiles = []*os.File{w}
	return &Session{r: r, w: w, rd: bufio.NewReader(r)}, nil
}

// Start starts cmd (prepared by SuperviseSession) and returns the
// program's pid, which is also its process group and session id. When
// the helper could not start the program, Start waits for the helper and
// returns why.
func (s *Session) Start(cmd *exec.Cmd) (int, error) {
	err := cmd.Start()
	s.w.Close()
	if err != nil {
		s.r.Close()
		return 0, err
	}
	line, err := s.line(sessionReportTimeout)
	if pid, ok := strings.CutPrefix(line, "pid "); ok && err == nil {
		if n, err := strconv.Atoi(pid); err == nil && n > 1 {
			return n, nil
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	s.r.Close()
	if why, ok := strings.CutPrefix(line, "error "); ok {
		return 0, errors.New(why)
	}
	if err == nil {
		err = fmt.Errorf("unexpected report %q", line)
	}
	return 0, fmt.Errorf("starting the program under the supervisor: %w", err)
}

// Status returns the program's wait status; call it once the helper has
// been waited for. ok is false when the helper did not report one (it
// was killed).
func (s *Session) Status() (ws syscall.WaitStatus, ok bool) {
	if !s.hasStatus {
		line, err := s.line(time.Second)
		if st, found := strings.CutPrefix(line, "status "); found && err == nil {
			if n, err := strconv.ParseUint(st, 10, 32); err == nil {
				s.status, s.hasStatus = syscall.WaitStatus(n), true
			}
		}
		s.r.Close()
	}
	return s.status, s.hasStatus
}

// line reads the helper's next report line, without its newline.
func (s *Session) line(timeout time.Duration) (string, error) {
	_ = s.r.SetReadDeadline(time.Now().Add(timeout))
	line, err := s.rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// runSessionSupervisor is the helper in session mode; it returns the
// exit code.
func runSessionSupervisor(argv []string, parent int, ctty bool, sigs chan os.Signal) int {
	report := os.NewFile(3, "report")
	syscall.CloseOnExec(3) // the program's descendants must not hold it
	fail := func(format string, args ...any) int {
		fmt.Fprintf(report, "error "+format+"\n", args...)
		return helperFailure
	}
	if os.Getppid() != parent {
		return fail("Maestro (pid %d) has gone", parent)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("becoming a child subreaper: %v", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Ctty 0: the child's stdin.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: ctty}
	if err := cmd.Start(); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(report, "pid %d\n", cmd.Process.Pid)
	return sessionExit(report, cmd, waitSupervised(cmd, parent, sigs))
}

// sessionExit reports the program's wait status and returns an exit code
// like it (a signal as 128+n: the helper does not kill itself, which
// would make a Go program dump its goroutines on SIGQUIT).
func sessionExit(report *os.File, cmd *exec.Cmd, err error) int {
	var ws syscall.WaitStatus
	ok := false
	if cmd.ProcessState != nil {
		ws, ok = cmd.ProcessState.Sys().(syscall.WaitStatus)
	}
	if !ok {
		fmt.Fprintf(report, "error waiting for the program: %v\n", err)
		return helperFailure
	}
	fmt.Fprintf(report, "status %d\n", uint32(ws))
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// pfExiting is the kernel's PF_EXITING task flag, set as a process starts
// to exit (before its files are closed).
const pfExiting = 0x4

// parentExiting reports whether Maestro (pid parent) has died or is
// dying: the helper has another parent, or Maestro is exiting. A program
// that ends because Maestro's files closed (its pty's master, its
// stdin) ends while Maestro is still the helper's parent, but already
// exiting.
func parentExiting(parent int) bool {
	if os.Getppid() != parent {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(parent) + "/stat")
	i := bytes.LastIndexByte(stat, ')')
	if err != nil || i < 0 {
		return true
	}
	// After the command name: state ppid pgrp session tty_nr tpgid flags.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 7 {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err != nil || f[0] == "Z" || f[0] == "X" || flags&pfExiting != 0
}
