package utility

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/sandbox"
)

// start starts the command's process in a new session (so a new process
// group whose id is its pid), on pipes or a pseudo-terminal.
func (c *command) start(spec commandSpec) error {
	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	if spec.pty {
		// The command is a session leader with the terminal as its
		// controlling terminal; Maestro keeps the master side only.
		ptmx, tty, err := pty.Open()
		if err != nil {
			return err
		}
		if err := pty.Setsize(ptmx, winsize(spec.columns, spec.rows)); err != nil {
			ptmx.Close()
			tty.Close()
			return err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		pid, err := c.launch(cmd, true)
		tty.Close()
		if err != nil {
			ptmx.Close()
			return err
		}
		var stdin *os.File
		if c.allowStdin {
			stdin = ptmx
		}
		c.started(cmd, pid, []*os.File{ptmx}, stdin, ptmx)
		return nil
	}

	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			childEnds = append(childEnds, w)
			parentEnds = append(parentEnds, r)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll(parentEnds)
		closeAll(childEnds)
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var stdinW *os.File
	if c.allowStdin {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return err
		}
		cmd.Stdin, stdinW = r, w
		childEnds = append(childEnds, r)
	}
	pid, err := c.launch(cmd, false)
	closeAll(childEnds)
	if err != nil {
		closeAll(parentEnds)
		if stdinW != nil {
			stdinW.Close()
		}
		return err
	}
	c.started(cmd, pid, []*os.File{outR, errR}, stdinW, nil)
	return nil
}

// launch starts cmd's program in a session of its own (so a new process
// group whose id is its pid), with the terminal on its stdin as
// controlling terminal when ctty, and returns its pid. The program runs
// under the supervisor (sandbox.SuperviseSession) when this binary can
// be its own: Maestro's death (SIGKILL, the OOM killer) then kills the
// program and every descendant instead of leaving them running.
func (c *command) launch(cmd *exec.Cmd, ctty bool) (int, error) {
	sess, err := sandbox.SuperviseSession(cmd, ctty)
	if err != nil {
		return 0, err
	}
	if sess != nil {
		pid, err := sess.Start(cmd)
		c.session = sess
		return pid, err
	}
	// Ctty 0: the child's stdin.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: ctty}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// started records a started process: cmd, and the pid of its program
// (which leads the process group; cmd is the supervisor when there is one).
func (c *command) started(cmd *exec.Cmd, pid int, readers []*os.File, stdin, tty *os.File) {
	c.mu.Lock()
	c.proc, c.pgid, c.readers, c.tty = cmd, pid, readers, tty
	c.mu.Unlock()
	c.stdinMu.Lock()
	c.stdin = stdin
	c.stdinMu.Unlock()
}

// run streams the command's output, waits for it to end and emits
// utility_command_exited.
func (c *command) run() {
	m := c.m
	var readers sync.WaitGroup
	streams := []protocol.Stream{protocol.StreamStdout, protocol.StreamStderr}
	for i, f := range c.readers {
		readers.Go(func() { c.stream(f, streams[i]) })
	}
	readersDone := make(chan struct{})
	go func() {
		readers.Wait()
		close(readersDone)
	}()

	waitErr := c.proc.Wait()
	c.mu.Lock()
	c.exited = true
	if c.killTimer != nil {
		c.killTimer.Stop()
	}
	terminating := c.terminating
	c.mu.Unlock()

	// Other processes of the group may still hold the output open: read
	// on for a while, then end them.
	drain := time.NewTimer(m.drainDelay)
	select {
	case <-readersDone:
	case <-drain.C:
		// Kill the group, then let the readers take what the pipes still
		// hold (EOF follows once the killed writers are gone); close them
		// only if something outside the group (a setsid daemon) keeps a
		// pipe open. Closing at once lost output a slow reader had not
		// taken yet.
		c.killGroup(syscall.SIGKILL)
		last := time.NewTimer(max(m.drainDelay, time.Second))
		select {
		case <-readersDone:
		case <-last.C:
			for _, f := range c.readers {
				f.Close()
			}
			<-readersDone
		}
		last.Stop()
	}
	drain.Stop()
	if terminating {
		// Terminate ends the whole group, stragglers included.
		c.killGroup(syscall.SIGKILL)
	}
	for _, f := range c.readers {
		f.Close()
	}
	c.stdinMu.Lock()
	if c.stdin != nil && !c.isPTY {
		c.stdin.Close()
	}
	c.stdinClosed = true
	c.stdinMu.Unlock()

	exited := protocol.UtilityCommandExited{CommandID: c.id}
	c.mu.Lock()
	exited.Reason = c.reason
	c.mu.Unlock()
	ws, ok := c.proc.ProcessState.Sys().(syscall.WaitStatus)
	if c.session != nil {
		// The supervisor's status is the program's only as far as an
		// exit code can say; its report is the program's own.
		ws, ok = c.session.Status()
	}
	switch {
	case ok && ws.Signaled():
		exited.ExitCode = protocol.Null[int]()
		exited.Signal = protocol.Some(signalName(ws.Signal()))
	case ok && ws.Exited():
		exited.ExitCode = protocol.Some(ws.ExitStatus())
		exited.Signal = protocol.Null[string]()
		exited.Success = ws.ExitStatus() == 0
	default:
		exited.ExitCode = protocol.Null[int]()
		exited.Signal = protocol.Null[string]()
		if exited.Reason == "" && waitErr != nil {
			exited.Reason = waitErr.Error()
		}
	}
	m.forget(c)
	m.emit(exited)
	close(c.done)
}

// stream reads one output stream and emits it as UTF-8 text.
func (c *command) stream(f *os.File, stream protocol.Stream) {
	var dec utf8Chunker
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			c.emitOutput(stream, dec.chunk(buf[:n]))
		}
		if err != nil {
			// EOF, or EIO from a pty whose other side is closed, or the
			// file closed by run.
			break
		}
	}
	c.emitOutput(stream, dec.flush())
}

func (c *command) emitOutput(stream protocol.Stream, text string) {
	if text == "" {
		return
	}
	c.mu.Lock()
	c.output.add(text)
	c.mu.Unlock()
	c.m.emit(protocol.UtilityCommandOutput{CommandID: c.id, Stream: stream, Content: text})
}

// terminate signals the command's process group: SIGKILL when force,
// else SIGTERM and SIGKILL after the grace period. The first reason
// given is kept, except that an explicit reason from the runtime (stop
// all, owner closed) replaces a controller's.
func (c *command) terminate(force bool, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exited {
		return
	}
	if c.reason == "" || !isControllerReason(reason) {
		c.reason = reason
	}
	c.terminating = true
	if c.proc == nil {
		return // still starting: CommandStart kills it once started
	}
	if force {
		c.killGroup(syscall.SIGKILL)
		return
	}
	c.killGroup(syscall.SIGTERM)
	if c.killTimer == nil {
		c.killTimer = time.AfterFunc(c.m.killGrace, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.exited {
				c.killGroup(syscall.SIGKILL)
			}
		})
	}
}

func isControllerReason(r string) bool {
	return r == ReasonTerminated || r == ReasonForceTerminated
}

// killGroup sends sig to the command's process group.
func (c *command) killGroup(sig syscall.Signal) {
	if c.pgid > 1 {
		if err := syscall.Kill(-c.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			c.m.log.Warn("signal utility command", "command_id", c.id, "signal", signalName(sig), "err", err)
		}
	}
}

// writeStdin writes content to the command's stdin and, with eof, ends it.
func (c *command) writeStdin(content string, eof bool) *Error {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdinClosed || c.stdin == nil {
		if content == "" && eof {
			return nil
		}
		return errorf(400, "Utility command stdin is not writable: %s", c.id)
	}
	data := content
	if eof && c.isPTY {
		// The terminal's end-of-file character ends a read; at the start
		// of a line it reads as end of file, so a partial line needs two.
		if content != "" && !strings.HasSuffix(content, "\n") {
			data += "\x04"
		}
		data += "\x04"
	}
	if data != "" {
		_ = c.stdin.SetWriteDeadline(time.Now().Add(stdinTimeout))
		_, err := io.WriteString(c.stdin, data)
		_ = c.stdin.SetWriteDeadline(time.Time{})
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return errorf(400, "Utility command stdin write timed out: %s", c.id)
			}
			return errorf(400, "Utility command stdin is not writable: %s", c.id)
		}
	}
	if eof && !c.isPTY {
		c.stdin.Close()
		c.stdinClosed = true
	}
	return nil
}

// resize sets the pty's window size (the kernel signals SIGWINCH to the
// terminal's foreground process group).
func (c *command) resize(columns, rows int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exited {
		return os.ErrClosed
	}
	if err := pty.Setsize(c.tty, winsize(columns, rows)); err != nil {
		return fmt.Errorf("set window size: %w", err)
	}
	c.info.Columns, c.info.Rows = &columns, &rows
	return nil
}

// signalName returns a signal's name, such as SIGTERM.
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// winsize converts a size to the kernel's 16-bit fields.
func winsize(columns, rows int) *pty.Winsize {
	return &pty.Winsize{Cols: uint16(min(columns, 0xFFFF)), Rows: uint16(min(rows, 0xFFFF))}
}
