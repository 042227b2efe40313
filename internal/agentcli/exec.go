package agentcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/sandbox"
)

// Executor runs prompts on one agent CLI.
type Executor struct {
	Def *Definition
	// Path is the resolved binary; when empty it is looked up on the PATH
	// of Env (else the process PATH).
	Path string
	// Env is the base environment (default os.Environ()).
	Env []string
	// MaxAttempts bounds the runs of one prompt when the CLI fails with a
	// rate limit or network error (default 3).
	MaxAttempts int
	// Backoff is the wait before retry n (1-based); default 30 s, 1 m,
	// 2 m … capped at 30 m, or the reset time a plan-quota message gives.
	Backoff func(attempt int, err *AgentError) time.Duration
	// KillGrace is how long an interrupted CLI gets between SIGTERM and
	// SIGKILL of its process group (default 1 s).
	KillGrace time.Duration
	// SlashCommandsDir, when set, keeps the slash commands a run publishes
	// (Claude's init event) for maestro agents show (slash.go).
	SlashCommandsDir string
	// Permission, when set and the definition supports it (RelaySupported),
	// receives the CLI's tool permission prompts over stdio (relay.go);
	// otherwise the CLI decides alone, per its permission arguments.
	Permission PermissionFunc

	// maxLine, when set, is the stream's line limit (tests; default 64 MiB).
	maxLine int
}

// RunResult is the outcome of Executor.Run.
type RunResult struct {
	// SessionID is the CLI session to resume next time.
	SessionID string
	Result    *Result
	// Err is the classified failure, nil on success.
	Err      *AgentError
	ExitCode int
	Stats    Stats
	// Attempts is how many times the CLI was started.
	Attempts int
	// Reseeded is true when the requested session was gone and a fresh
	// one was started with the transcript.
	Reseeded bool
	// Warning is the argv builder's warning (e.g. read-only not enforced).
	Warning string
	// Denials are the tool calls the CLI refused under its permission
	// mode (the definition's denied patterns), in order.
	Denials []Denial
}

// Denial is a tool call the CLI refused under its permission mode.
type Denial struct {
	CallID, Tool string
	// Reason is the CLI's own message (first line).
	Reason string
	// Permission is the run's level.
	Permission Permission
}

// DeniedCode is the tool_end error_code of a call the CLI's permission
// mode refused.
const DeniedCode = "permission_denied"

// denials watches a run's tool events for calls the CLI's permission mode
// refused (the output of the call matches the definition's denied
// patterns): their tool_end fails with DeniedCode and a status line
// follows it.
type denials struct {
	def     *Definition
	level   Permission
	res     *RunResult
	names   map[string]string
	outputs map[string]string
}

func (d *denials) watch(ev Event) Event {
	if len(d.def.Denied) == 0 {
		return ev
	}
	var out []protocol.Message
	for _, m := range ev.Messages {
		switch m := m.(type) {
		case protocol.ToolCall:
			d.names[m.CallID] = m.Tool
		case protocol.ToolOutput:
			if len(d.outputs[m.CallID]) < 4<<10 {
				d.outputs[m.CallID] += m.Content
			}
		case protocol.ToolEnd:
			reason := d.outputs[m.CallID]
			delete(d.outputs, m.CallID)
			if !matchAny(d.def.Denied, reason) {
				break
			}
			// Some CLIs report the refusal as a call that succeeded
			// (OpenCode's "invalid" tool): the call itself did not run.
			m.Success = false
			den := Denial{CallID: m.CallID, Tool: d.names[m.CallID], Reason: firstLine(reason), Permission: d.level}
			d.res.Denials = append(d.res.Denials, den)
			m.ErrorCode = DeniedCode
			out = append(out, m, protocol.Status{Message: fmt.Sprintf("%s refused the %s call under --permission %s: %s",
				d.def.Name, den.Tool, d.level, den.Reason)})
			continue
		}
		out = append(out, m)
	}
	ev.Messages = out
	return ev
}

// matchAny reports whether text matches one of the patterns (compiled as
// error patterns are).
func matchAny(patterns []string, text string) bool {
	for _, p := range patterns {
		if re, err := compilePattern(p); err == nil && re.MatchString(text) {
			return true
		}
	}
	return false
}

// ErrInterrupted is returned when ctx ends the run.
var ErrInterrupted = errors.New("agent run interrupted")

// Request is one prompt for Executor.Run.
type Request struct {
	Invocation
	// Transcript, when the requested session no longer exists or the CLI
	// cannot resume, seeds a fresh session so the conversation continues.
	Transcript string
}

func (x *Executor) backoff(attempt int, e *AgentError) time.Duration {
	if x.Backoff != nil {
		return x.Backoff(attempt, e)
	}
	if !e.RetryAt.IsZero() {
		return time.Until(e.RetryAt) + 5*time.Second
	}
	d := 30 * time.Second << (attempt - 1)
	return min(d, 30*time.Minute)
}

// Run runs req, calling sink for every parsed line in order. A rate-limit
// or network failure is retried after a backoff (announced as a status
// event); a missing session is replaced by a fresh one seeded with
// req.Transcript, when there is one (else the failure stands), and so is
// a session of a CLI that cannot resume. When ctx ends, the CLI's process
// group gets SIGTERM and, after KillGrace, SIGKILL; Run then returns
// ErrInterrupted.
func (x *Executor) Run(ctx context.Context, req Request, sink func(Event)) (*RunResult, error) {
	maxAttempts := x.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 3
	}
	inv := req.Invocation
	var res *RunResult
	reseeded := false
	if inv.SessionID != "" && !x.Def.Capabilities.Resume && req.Transcript != "" {
		// The gate would start a new session with nothing of the
		// conversation: carry it in the prompt instead.
		reseeded = true
		sink(Event{Messages: []protocol.Message{protocol.Status{Message: fmt.Sprintf(
			"%s cannot resume a session; starting a new one instead of %s, seeded with the transcript", x.Def.Name, inv.SessionID)}}})
		inv.SessionID, inv.Prompt = "", seededPrompt(req)
	}
	for attempt := 1; ; attempt++ {
		attemptSink := sink
		if inv.SessionID != "" && !reseeded && req.Transcript != "" {
			attemptSink = lostSessionTransient(sink)
		}
		r, err := x.runOnce(ctx, inv, attemptSink)
		if err != nil {
			return r, err
		}
		r.Attempts, r.Reseeded = attempt, reseeded
		res = r
		if r.Err == nil {
			return r, nil
		}
		switch {
		case r.Err.Category == SessionNotFound && inv.SessionID != "" && !reseeded && req.Transcript != "":
			// Without a transcript (a CLI session id given as is, never
			// run through Maestro) a fresh session would continue
			// nothing: the failure stands.
			reseeded = true
			sink(Event{Messages: []protocol.Message{protocol.Status{Message: fmt.Sprintf(
				"%s session %s no longer exists; starting a fresh session seeded with the transcript", x.Def.Name, inv.SessionID)}}})
			inv.SessionID, inv.Prompt = "", seededPrompt(req)
			continue
		case r.Err.Category.Retryable() && attempt < maxAttempts:
			wait := x.backoff(attempt, r.Err)
			sink(Event{Messages: []protocol.Message{protocol.Status{Message: fmt.Sprintf(
				"%s failed (%s); retrying in %s (attempt %d)", x.Def.Name, r.Err.Category, wait.Round(time.Millisecond), attempt+1)}}})
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				// The failed attempt's (error) result is no answer: the
				// turn was interrupted.
				res.Result = nil
				return res, ErrInterrupted
			case <-t.C:
			}
			if r.SessionID != "" && inv.SessionID == "" && x.Def.Capabilities.Resume {
				// Keep the conversation the failed attempt started.
				inv.SessionID = r.SessionID
			}
			continue
		}
		return res, nil
	}
}

// lostSessionTransient is sink with the session_not_found errors marked
// transient: Run recovers from them (a fresh session seeded with the
// transcript), and "error (fatal)" before the answer said the turn had
// failed.
func lostSessionTransient(sink func(Event)) func(Event) {
	return func(ev Event) {
		if ev.Error != nil && ev.Error.Category == SessionNotFound {
			msgs := slices.Clone(ev.Messages)
			for i, m := range msgs {
				if e, ok := m.(protocol.Error); ok {
					e.ErrorType = protocol.ErrorTransient
					msgs[i] = e
				}
			}
			ev.Messages = msgs
		}
		sink(ev)
	}
}

// seededPrompt is req's prompt for a fresh session that continues the
// conversation of req.Transcript.
func seededPrompt(req Request) string {
	return "Earlier conversation (the previous agent session was lost):\n\n" + req.Transcript + "\n\n---\n\n" + req.Prompt
}

// tail keeps the last n bytes written.
type tail struct {
	mu  sync.Mutex
	buf []byte
	n   int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// runOnce starts the CLI once and reads its stream to the end. In batch
// mode the prompt is on the command line and stdin is closed at once; with
// the permission relay (relay.go) the prompt goes on stdin, which stays
// open until the turn's result so that permission requests are answered
// through x.Permission.
func (x *Executor) runOnce(ctx context.Context, inv Invocation, sink func(Event)) (*RunResult, error) {
	def, inv, notes, err := x.Def.gate(inv) // capability gates (gate.go)
	if err != nil {
		return &RunResult{}, err
	}
	for _, n := range notes {
		sink(Event{Messages: []protocol.Message{protocol.Status{Message: n}}})
	}
	relay := x.Permission != nil && RelaySupported(def)
	var args, input []string
	var warning, stdinPrompt string
	if relay {
		var prompt string
		args, prompt, warning = def.relayArgv(inv)
		msg, err := userMessage(prompt, inv.Images)
		if err != nil {
			return &RunResult{}, fmt.Errorf("start %s: %w", def.ID, err)
		}
		input = []string{relayInit, string(msg)}
	} else {
		args, stdinPrompt, warning = def.argvStdin(inv)
	}
	opt := x.parserOptions(ctx, inv, x.environ(inv))
	opt.MaxLine = x.maxLine
	p, err := NewParser(def.Parser, opt)
	if err != nil {
		return &RunResult{}, fmt.Errorf("start %s: %w", def.ID, err)
	}
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	proc, err := x.start(runCtx, inv, args)
	if err != nil {
		return &RunResult{}, err
	}
	// A CLI that dies at once closes its stdin: the write errors surface
	// as its exit status and stderr below. Batch mode writes nothing.
	for _, l := range input {
		_ = proc.stdin.line([]byte(l))
	}
	switch {
	case stdinPrompt != "":
		// The CLI reads all of stdin before it starts; written aside so
		// that a prompt larger than the pipe cannot block the reading
		// of its output.
		go func() {
			_ = proc.stdin.write([]byte(stdinPrompt))
			proc.stdin.close()
		}()
	case !relay:
		proc.stdin.close() // the prompt is on the command line
	}

	var answers sync.WaitGroup
	res := &RunResult{Warning: warning}
	level := inv.Permission.Level()
	if level == permissionRelay {
		level = PermissionEdit
	}
	denied := &denials{def: def, level: level, res: res, names: map[string]string{}, outputs: map[string]string{}}
	var streamErr, readErr *AgentError
	lastLines := &tail{n: 4 << 10}
	for ev, err := range Parse(proc.stdout, p) {
		if err != nil {
			// Its output can no longer be followed: stop the CLI rather
			// than let it work on unseen, and say why (it read "exited
			// without a result").
			readErr = &AgentError{Category: AgentCrashed, Message: "Maestro stopped the agent: " + err.Error(), Source: "stdout"}
			if tl := (*LineTooLongError)(nil); errors.As(err, &tl) {
				readErr.Message = fmt.Sprintf("Maestro stopped the agent: a line of its %s output is longer than the %s limit, so the rest of its stream could not be read", tl.Parser, byteSize(tl.Limit))
			}
			cancelRun()
			break
		}
		if ev.Raw != nil {
			_, _ = lastLines.Write(append(ev.Raw, '\n'))
			if relay && bytes.Contains(ev.Raw, []byte(`"control_request"`)) {
				x.answerControl(runCtx, ev.Raw, proc.stdin, &answers)
			}
		}
		if ev.Error != nil && streamErr == nil {
			streamErr = ev.Error
		}
		if ev.Error != nil && ev.Error.Category == SessionNotFound && ev.SessionID == inv.SessionID {
			// The id is the one asked for, in the CLI's answer that it
			// has no such session (Claude Code's error result): not a
			// session to announce.
			ev.SessionID = ""
		}
		// Retrying an authentication failure cannot succeed: stop now.
		if r := ev.Retry; r != nil && (r.Status == 401 || r.Status == 403) && streamErr == nil {
			streamErr = NewClassifier(def).Classify(r.Message, r.Status)
			ev.Error = streamErr
			ev.Messages = append(ev.Messages, protocol.Error{Message: streamErr.Error(), ErrorType: streamErr.Category.ErrorType()})
			sink(ev)
			cancelRun()
			continue
		}
		sink(denied.watch(ev))
		if ev.Result != nil && relay {
			// One prompt per process: end of input ends the CLI.
			proc.stdin.close()
		}
	}
	waitErr := proc.wait()
	cancelRun()
	answers.Wait()

	res.SessionID, res.Result, res.Stats = p.SessionID(), p.Result(), p.Stats()
	x.saveSlashCommands(p)
	if res.SessionID == "" {
		res.SessionID = inv.SessionID
	}
	res.ExitCode = proc.cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		if p.ResultInferred() {
			// The stream ended because the CLI was stopped: no answer.
			res.Result = nil
		}
		res.Err = &AgentError{Category: Unknown, Message: "interrupted", Source: "exit", ExitCode: res.ExitCode}
		return res, ErrInterrupted
	}
	stderr := proc.stderr.String()
	switch {
	case readErr != nil:
		readErr.ExitCode = res.ExitCode
		res.Err = readErr
	case streamErr != nil:
		streamErr.ExitCode = res.ExitCode
		res.Err = streamErr
	case waitErr != nil || res.ExitCode != 0:
		res.Err = NewClassifier(def).ClassifyExit(res.ExitCode, stderr, lastLines.String())
		if ws, ok := proc.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && res.Err.Category == AgentCrashed {
			// ExitCode is -1: "exited with code -1" said nothing.
			res.Err.Message = strings.Replace(res.Err.Message, "exited with code -1", "was killed by a signal ("+ws.Signal().String()+")", 1)
		}
	case res.Result == nil:
		// Exit 0 without a result: only stderr (OpenCode does this on a
		// bad provider), nothing at all, or lines none of which the
		// parser read (a CLI version speaking another format). Its
		// stdout is classified only when no line was an event (never
		// the assistant's prose).
		out := ""
		if p.Stats().Events == 0 {
			out = lastLines.String()
		}
		res.Err = NewClassifier(def).ClassifyExit(0, stderr, out)
		if res.Err.Category == AgentCrashed {
			res.Err.Message = noResult(p, stderr, lastLines.String())
		}
	}
	if res.Err != nil && res.Err.Source != "stream" {
		sink(Event{Error: res.Err, Messages: []protocol.Message{protocol.Error{Message: res.Err.Error(), ErrorType: res.Err.Category.ErrorType()}}})
	}
	return res, nil
}

// noResult is the message of a CLI that exited 0 without a result.
func noResult(p *Parser, stderr, stdout string) string {
	msg := "Agent exited with code 0 without a result"
	st := p.Stats()
	switch {
	case firstLine(stderr) != "":
		return msg + ": " + firstLine(stderr)
	case st.Lines == 0:
		return msg + ": it printed nothing"
	case st.Events == 0:
		return fmt.Sprintf("%s: none of its %d line(s) of output is a %s event (the first: %q)", msg, st.Lines, p.Name(), firstLine(stdout))
	}
	return msg
}

// process is one started CLI: its own process group, stdin kept as a
// pipe (a file makes Claude print nothing), the last 64 KiB of stderr,
// and a watcher that stops the group when the run's context ends.
type process struct {
	cmd    *exec.Cmd
	stdin  *stdinWriter
	stdout io.ReadCloser
	stderr *tail
	done   chan struct{}
	killed *sync.WaitGroup
	// sigkilled is set once the watcher has SIGKILLed the group: from
	// then on the pipes are drained for at most killDrain (see wait).
	sigkilled atomic.Bool
}

// killDrain bounds how long an interrupted run still reads the CLI's
// pipes once its process group has been SIGKILLed. A descendant that left
// the group (a new session or process group, as detached children of
// Node CLIs do) keeps the pipes open and is not reached by the group
// kill: without this bound, an interrupted Run would wait for it to end.
const killDrain = 500 * time.Millisecond

// start starts the CLI with args in inv.Dir; ctx ending stops it (SIGTERM
// to the group, SIGKILL after x.KillGrace).
func (x *Executor) start(ctx context.Context, inv Invocation, args []string) (*process, error) {
	def := x.Def
	env := x.Env
	if env == nil {
		env = os.Environ()
	}
	env = def.Environ(env, inv)
	if inv.Dir != "" {
		// Go sets PWD only for a nil Env: without this the CLI inherits
		// Maestro's PWD, and OpenCode works there instead of in Dir.
		if dir, err := filepath.Abs(inv.Dir); err == nil {
			env = append(env, "PWD="+dir)
		}
	}
	bin := x.Path
	if bin == "" {
		var err error
		if bin, err = lookPath(def.Binary, envValue(env, "PATH")); err != nil {
			return nil, fmt.Errorf("start %s: %w", def.ID, err)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = inv.Dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Should Maestro die without stopping it, the CLI and what it started
	// are killed (the group's leader is then Maestro's helper).
	sandbox.Supervise(cmd)
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", def.ID, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", def.ID, err)
	}
	stderr := &tail{n: 64 << 10}
	cmd.Stderr = stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", def.ID, err)
	}
	p := &process{cmd: cmd, stdin: &stdinWriter{w: pipe}, stdout: stdout, stderr: stderr, done: make(chan struct{})}
	running.Store(cmd.Process.Pid, struct{}{})
	p.killed = x.killOnCancel(ctx, p)
	return p, nil
}

// running holds the process groups (their leaders' pids) of the CLIs
// started and not yet waited for.
var running sync.Map

// KillRunning SIGKILLs the process group of every CLI running now. A
// process about to end at once (a second Ctrl-C) calls it last: each CLI
// runs in a group of its own, which the terminal's signal does not reach,
// so with Maestro gone it would run on unattended.
func KillRunning() {
	running.Range(func(pgid, _ any) bool {
		_ = syscall.Kill(-pgid.(int), syscall.SIGKILL)
		return true
	})
}

// wait closes stdin, drains stdout (so the CLI never blocks on a full
// pipe), waits for the CLI and then for its watcher.
func (p *process) wait() error {
	p.stdin.close()
	_, _ = io.Copy(io.Discard, p.stdout)
	if p.sigkilled.Load() {
		// The group is dead: what still holds stderr left it.
		p.cmd.WaitDelay = killDrain
	}
	err := p.cmd.Wait()
	running.Delete(p.cmd.Process.Pid)
	close(p.done)
	p.killed.Wait()
	return err
}

// killOnCancel SIGTERMs p's process group when ctx ends and SIGKILLs it
// after the grace period, unless p.done closes first. When stdout is
// still open killDrain after the SIGKILL (a descendant outside the group
// holds it), it closes the read end so that the run ends now. Wait on
// the result after closing p.done.
func (x *Executor) killOnCancel(ctx context.Context, p *process) *sync.WaitGroup {
	grace := x.KillGrace
	if grace <= 0 {
		grace = time.Second
	}
	pgid := p.cmd.Process.Pid
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-p.done:
			return
		case <-ctx.Done():
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		p.sigkilled.Store(true)
		t.Reset(killDrain)
		select {
		case <-p.done:
		case <-t.C:
			_ = p.stdout.Close()
		}
	})
	return &wg
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
