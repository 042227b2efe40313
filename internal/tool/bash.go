package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/sandbox"
)

// Limits of the Bash tool.
const (
	// BashDefaultTimeout is how long a command may run when the call does
	// not say.
	BashDefaultTimeout = 120 * time.Second
	// BashMaxTimeout is the largest timeout_seconds a call may ask for.
	BashMaxTimeout = 600 * time.Second
	// BashMaxOutputBytes caps the output in the result; beyond it the
	// beginning and the end are kept.
	BashMaxOutputBytes = 30_000
	// BashMaxStreamBytes caps the partial output streamed while the
	// command runs.
	BashMaxStreamBytes = 1 << 20
	// bashDrainDelay bounds the wait for the output pipe after the
	// command's process group is gone.
	bashDrainDelay = 500 * time.Millisecond
)

// BashInput is the input of the Bash tool.
type BashInput struct {
	Command        string `json:"command" jsonschema:"the command to run with bash in the workspace root"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"seconds before the command is killed; default 120, at most 600"`
}

// BashOptions configure one Bash tool instance.
type BashOptions struct {
	// AllowedCommands, when non-nil, replaces the sandbox's command
	// allowlist for this tool (a workflow movement's allowed_commands). An
	// explicit list is enforced in every sandbox mode.
	AllowedCommands []string
}

// NewBash returns the Bash tool: it runs commands through sb in workdir
// (the workspace root), streams their output as partial output and
// returns it capped. sb must not be nil.
func NewBash(sb *sandbox.Sandbox, workdir string, opts BashOptions) Tool {
	if sb == nil {
		panic("tool: NewBash needs a sandbox")
	}
	b := &bashTool{
		sb:      sb,
		workdir: workdir,
		opts:    sandbox.CommandOptions{AllowedCommands: slices.Clone(opts.AllowedCommands)},
	}
	return New("Bash", bashDescription(sb, b.opts), false, b.run)
}

func bashDescription(sb *sandbox.Sandbox, opts sandbox.CommandOptions) string {
	var b strings.Builder
	b.WriteString("Run a shell command with bash in the workspace root and return its combined stdout and stderr. " +
		"Default timeout 120 s (timeout_seconds, at most 600). Output over 30,000 characters keeps its beginning and end. ")
	switch sb.Kind() {
	case sandbox.KindBwrap:
		b.WriteString("Sandboxed (bubblewrap): only the workspace is writable and persists between calls (/tmp does not)")
		if !sb.Network() {
			b.WriteString(", there is no network")
		}
		b.WriteString(". ")
	case sandbox.KindLandlock:
		b.WriteString("Sandboxed (Landlock): only the workspace and $TMPDIR are writable, only the workspace persists between calls, files outside the workspace and the system directories cannot be read")
		if sb.TCPBlocked() {
			b.WriteString(", TCP connections are blocked")
		}
		b.WriteString(". ")
	case sandbox.KindUnavailable:
		b.WriteString("Unavailable: no sandbox can run on this host, so every command is refused. ")
	}
	b.WriteString("Package installs (pip, npm, apt, …) and sudo are rejected; if a package seems necessary, tell the user.")
	if list := sb.AllowedCommands(opts); list != nil {
		if len(list) == 0 {
			b.WriteString(" Allowed commands: only shell builtins.")
		} else {
			b.WriteString(" Allowed commands: " + strings.Join(list, ", ") + ".")
		}
	}
	return b.String()
}

type bashTool struct {
	sb      *sandbox.Sandbox
	workdir string
	opts    sandbox.CommandOptions
}

func (b *bashTool) run(ctx context.Context, in BashInput, call Call) (Result, error) {
	if strings.TrimSpace(in.Command) == "" {
		return Failf(CodeInvalidInput, "command is required"), nil
	}
	if in.TimeoutSeconds < 0 || time.Duration(in.TimeoutSeconds)*time.Second > BashMaxTimeout {
		return Failf(CodeInvalidInput, "timeout_seconds must be between 1 and %d (default %d)",
			int(BashMaxTimeout/time.Second), int(BashDefaultTimeout/time.Second)), nil
	}
	timeout := BashDefaultTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd, err := b.sb.Command(runCtx, b.workdir, in.Command, b.opts)
	if pe, ok := errors.AsType[*sandbox.PolicyError](err); ok {
		return Failf(CodeSandboxViolation, "%s", pe.Error()), nil
	}
	if ue, ok := errors.AsType[*sandbox.UnavailableError](err); ok {
		return Failf(CodeSandboxUnavailable, "%s", ue.Error()), nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("bash: preparing the command: %w", err)
	}
	out := newBashOutput(call.Emit)
	waitErr, err := runCommand(cmd, out)
	if err != nil {
		return Result{}, err
	}

	if ctx.Err() != nil {
		return Result{}, fmt.Errorf("bash: command interrupted: %w", ctx.Err())
	}
	var status, code string
	switch exitErr, isExit := errors.AsType[*exec.ExitError](waitErr); {
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		status, code = fmt.Sprintf("command timed out after %ds", int(timeout/time.Second)), CodeTimeout
	case waitErr == nil || errors.Is(waitErr, exec.ErrWaitDelay):
	case isExit:
		status = exitStatus(exitErr)
	default:
		return Result{}, fmt.Errorf("bash: waiting for the command: %w", waitErr)
	}

	text := out.String()
	if status == "" {
		if text == "" {
			text = "(no output)"
		}
		return Result{Content: text}, nil
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return Result{Content: text + status, IsError: true, Code: code}, nil
}

// runCommand starts cmd with stdout and stderr on one pipe read into out,
// waits for it, removes what is left of its process group and drains the
// pipe within bashDrainDelay. The first result is Wait's error; the second
// an error starting the command.
func runCommand(cmd *exec.Cmd, out *bashOutput) (waitErr, err error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("bash: creating the output pipe: %w", err)
	}
	defer pr.Close()
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("bash: starting the command: %w", err)
	}
	pw.Close()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(out, pr)
	}()

	waitErr = cmd.Wait()
	// Background processes the command left behind go with it: every call
	// gets a fresh sandbox.
	_ = sandbox.KillProcessGroup(cmd)
	timer := time.NewTimer(bashDrainDelay)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		// Something outside the group still holds the pipe; stop reading.
		pr.Close()
		<-drained
	}
	out.flush()
	return waitErr, nil
}

func exitStatus(e *exec.ExitError) string {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("command killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	code := e.ExitCode()
	if code > 128 && code <= 128+64 {
		// A shell's status for a command killed by signal code-128 (and
		// bwrap's for its shell): say which, as it may be a limit's.
		sig := syscall.Signal(code - 128)
		return fmt.Sprintf("exit code %d (a command killed by signal %d: %s)", code, int(sig), sig)
	}
	return fmt.Sprintf("exit code %d", code)
}

// bashOutput receives the command's output: it streams it (UTF-8 safe, up
// to BashMaxStreamBytes) and keeps the first and last BashMaxOutputBytes/2
// bytes for the result. It is written by one goroutine and read after that
// goroutine is done.
type bashOutput struct {
	emit     func(string)
	pending  []byte // an incomplete UTF-8 sequence held back from emit
	streamed int
	stopped  bool // streaming reached its cap

	head  []byte
	tail  []byte // ring buffer of the last bytes after head, bashHalf long once full
	pos   int    // where the next tail byte goes when tail is full
	total int
}

const bashHalf = BashMaxOutputBytes / 2

func newBashOutput(emit func(string)) *bashOutput {
	return &bashOutput{emit: emit}
}

func (o *bashOutput) Write(p []byte) (int, error) {
	n := len(p)
	o.total += n
	o.stream(p)
	if room := bashHalf - len(o.head); room > 0 {
		k := min(room, len(p))
		o.head = append(o.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > bashHalf {
		p = p[len(p)-bashHalf:]
	}
	if room := bashHalf - len(o.tail); room > 0 {
		k := min(room, len(p))
		o.tail = append(o.tail, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // the ring is full: overwrite the oldest bytes
		k := copy(o.tail[o.pos:], p)
		p = p[k:]
		o.pos = (o.pos + k) % bashHalf
	}
	return n, nil
}

// tailBytes returns the ring buffer in order.
func (o *bashOutput) tailBytes() []byte {
	if o.pos == 0 {
		return o.tail
	}
	return append(o.tail[o.pos:len(o.tail):len(o.tail)], o.tail[:o.pos]...)
}

// stream emits a chunk, holding back a trailing incomplete rune.
func (o *bashOutput) stream(p []byte) {
	if o.emit == nil || o.stopped {
		return
	}
	buf := p
	if len(o.pending) > 0 {
		buf = append(o.pending, p...)
	}
	cut := len(buf)
	// Hold back at most utf8.UTFMax-1 bytes of an unfinished rune.
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	chunk := buf[:cut]
	o.pending = append(o.pending[:0:0], buf[cut:]...)
	if o.streamed+len(chunk) > BashMaxStreamBytes {
		chunk = chunk[:max(0, BashMaxStreamBytes-o.streamed)]
		o.stopped = true
	}
	o.streamed += len(chunk)
	if len(chunk) > 0 {
		o.emit(validUTF8(chunk))
	}
	if o.stopped {
		o.pending = nil
		o.emit(fmt.Sprintf("\n[partial output stopped after %d bytes; the result keeps the beginning and the end]\n", BashMaxStreamBytes))
	}
}

// flush emits what was held back.
func (o *bashOutput) flush() {
	if o.emit != nil && !o.stopped && len(o.pending) > 0 {
		o.emit(validUTF8(o.pending))
	}
	o.pending = nil
}

// validUTF8 converts b to a string, replacing invalid sequences.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// String returns the output for the result: whole when it fits, else the
// beginning and the end around a truncation notice.
func (o *bashOutput) String() string {
	if o.total <= BashMaxOutputBytes {
		return validUTF8(append(o.head[:len(o.head):len(o.head)], o.tail...)) // nothing was dropped
	}
	head := o.head
	// Cut on rune boundaries.
	for i := len(head) - 1; i >= 0 && i >= len(head)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(head[i]) {
			if !utf8.FullRune(head[i:]) {
				head = head[:i]
			}
			break
		}
	}
	tail := o.tailBytes()
	for k := 0; k < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); k++ {
		tail = tail[1:]
	}
	omitted := o.total - len(head) - len(tail)
	return validUTF8(head) + fmt.Sprintf("\n[output truncated: %d bytes omitted]\n", omitted) + validUTF8(tail)
}
