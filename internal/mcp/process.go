package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/sandbox"
)

// commandTransport runs a stdio server in a process group of its own
// and speaks MCP over its stdin and stdout, as the go-sdk's
// CommandTransport does, but stopping it stops everything the server
// started: the SDK signalled the server's process only, so a child of
// it (a wrapper's real server, a helper it spawned) ran on after the
// session, Maestro's Ctrl-C and Maestro's exit; and a child holding the
// server's stderr kept the SDK waiting for the pipe past the kill.
//
// It keeps the end of the server's stderr and how the server ended, for
// the error that says why a server did not start.
type commandTransport struct {
	cmd *exec.Cmd
	// stderr receives the server's stderr (nil: discarded).
	stderr io.Writer
	// grace is how long Close waits after closing stdin before it
	// SIGTERMs the group, and after that before it SIGKILLs it.
	grace time.Duration
	// maxLine bounds a message the server sends.
	maxLine int

	proc atomic.Pointer[process]
}

// process is a started server.
type process struct {
	cmd    *exec.Cmd
	grace  time.Duration
	stdin  io.WriteCloser
	stdout *os.File
	tail   *tail

	exited     chan struct{} // closed once the server's process is reaped
	waitErr    error         // set before exited closes
	stderrDone chan struct{} // closed once its stderr is drained
	signalled  atomic.Bool   // Close had to signal the group
	closeOnce  sync.Once

	// log is where the server's stderr goes (nil: nowhere), shared
	// with the notes on what it wrote on stdout that was skipped.
	log *syncWriter
	// skips counts the lines of its stdout that were not messages;
	// firstSkip is the first of them.
	skips     atomic.Int64
	firstSkip atomic.Pointer[string]
}

// Connect implements sdk.Transport.
func (t *commandTransport) Connect(context.Context) (sdk.Connection, error) {
	cmd := t.cmd
	// Its own group, out of reach of the terminal's Ctrl-C and of a
	// supervisor killing Maestro's group: if Maestro dies without
	// stopping it, the kernel kills it, and the supervising helper what
	// it started (without a helper, the server only).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	sandbox.Supervise(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Plain pipes, not cmd's: Wait then returns when the server exits,
	// whoever else holds them.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		stdin.Close()
		return nil, err
	}
	p := &process{cmd: cmd, grace: t.grace, stdin: stdin, stdout: outR, tail: &tail{max: 4 << 10},
		exited: make(chan struct{}), stderrDone: make(chan struct{})}
	if t.stderr != nil {
		p.log = &syncWriter{w: t.stderr}
	}
	go func() {
		w := io.Writer(p.tail)
		if p.log != nil {
			w = io.MultiWriter(p.log, p.tail)
		}
		_, _ = io.Copy(w, errR)
		errR.Close()
		close(p.stderrDone)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.proc.Store(p)
	// Closing the reader closes the whole: stdin first, as the MCP
	// specification says.
	r := readCloser{newStdoutFilter(outR, t.maxLine, p.skip), p}
	return (&sdk.IOTransport{Reader: r, Writer: writeOnly{stdin}, MaxLineLength: t.maxLine}).Connect(context.Background())
}

// readCloser is the server's stdout, filtered, which the process's
// Close closes.
type readCloser struct {
	io.Reader
	io.Closer
}

// skip records a line of the server's stdout that is not a JSON-RPC
// message and was skipped, and notes it in the server's log: the first
// few, then one note per 100.
func (p *process) skip(line []byte) {
	n := p.skips.Add(1)
	if n == 1 {
		s := strings.ToValidUTF8(string(line), "\uFFFD")
		p.firstSkip.Store(&s)
	}
	if p.log == nil {
		return
	}
	switch {
	case n <= 3:
		fmt.Fprintf(p.log, "[maestro] skipped a line the server wrote on its stdout, not a JSON-RPC message (a stdio server writes its logs on stderr): %q\n", line)
	case n%100 == 0:
		fmt.Fprintf(p.log, "[maestro] skipped %d lines the server wrote on its stdout so far, not JSON-RPC messages\n", n)
	}
}

// skipNote says what was skipped of the server's stdout; "" if nothing.
func (p *process) skipNote() string {
	n := p.skips.Load()
	if n == 0 {
		return ""
	}
	first := ""
	if s := p.firstSkip.Load(); s != nil {
		first = *s
	}
	what := "a line on its stdout that is not a JSON-RPC message"
	if n > 1 {
		what = fmt.Sprintf("%d lines on its stdout that are not JSON-RPC messages", n)
	}
	return fmt.Sprintf("; it wrote %s, skipped (the first: %q)", what, first)
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *syncWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// writeOnly is the server's stdin, which the process's Close closes.
type writeOnly struct{ w io.Writer }

func (w writeOnly) Write(b []byte) (int, error) { return w.w.Write(b) }
func (writeOnly) Close() error                  { return nil }

// Close ends the server as the MCP specification says (stdin closed,
// then SIGTERM, then SIGKILL, grace apart), to its whole process group,
// and kills what is left of the group once the server is gone.
func (p *process) Close() error {
	p.closeOnce.Do(func() {
		p.stdin.Close()
		if !p.waitExit(p.grace) {
			p.signalled.Store(true)
			p.kill(syscall.SIGTERM)
			if !p.waitExit(p.grace) {
				p.kill(syscall.SIGKILL)
				p.waitExit(p.grace)
			}
		}
		// What the server left behind in its group: it has no one to
		// serve any more.
		p.kill(syscall.SIGKILL)
		p.stdout.Close()
		select {
		case <-p.stderrDone:
		case <-time.After(p.grace):
			// A process outside the group holds stderr: the log
			// ends here.
		}
	})
	return nil
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

func (p *process) kill(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// ended says how the server ended when it did so by itself (not
// stopped by Close's signals): "exit status 3", "signal: killed"; "" if
// it has not ended yet or was stopped.
func (p *process) ended() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	if p.signalled.Load() {
		return ""
	}
	if p.waitErr == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ProcessState.String()
	}
	return p.waitErr.Error()
}

// stderrEnd is the last lines of the server's stderr, at most 3 lines
// and 400 bytes, quoted; "" when it wrote nothing.
func (p *process) stderrEnd() string {
	select {
	case <-p.stderrDone:
	case <-time.After(100 * time.Millisecond):
	}
	b := bytes.TrimSpace(p.tail.bytes())
	if len(b) == 0 {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	s := strings.Join(lines, "\n")
	if len(s) > 400 {
		s = "…" + strings.ToValidUTF8(s[len(s)-400:], "")
	}
	return fmt.Sprintf("%q", s)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.b)
}

// sizeText is n bytes in KiB or MiB when whole.
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
