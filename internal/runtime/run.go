package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// activeRun is the prompt being run.
type activeRun struct {
	id     uint64
	cancel context.CancelCauseFunc
	conn   *Conn
	// done is closed when the run has ended, with res and err set: what
	// RunPrompt returns to a local client.
	done chan struct{}
	res  agent.Result
	err  error
	// last holds what a turn asked to publish once the run has ended
	// (Turn.PublishLast); only the run's goroutine touches it.
	last []protocol.Message
	// finished (under Runtime.mu) is set once the agent has returned,
	// before its last response_end is published: a prompt then waits for
	// the run to end instead of being refused as busy.
	finished bool
}

// prompt starts a run in the background (wire contract §8.8). One prompt at a
// time: a second one is refused.
func (r *Runtime) prompt(c *Conn, m protocol.Prompt) error {
	_, err := r.startPrompt(c, m)
	return err
}

// startPrompt starts a run of m for c and returns it.
func (r *Runtime) startPrompt(c *Conn, m protocol.Prompt) (*activeRun, error) {
	r.mu.Lock()
	for r.run != nil && r.run.finished {
		// The turn is over (its last response_end may be out): the
		// run only has its end to do.
		done := r.run.done
		r.mu.Unlock()
		<-done
		r.mu.Lock()
	}
	if r.run != nil {
		r.mu.Unlock()
		return nil, forbidden(msgBusy)
	}
	r.runSeq++
	ctx, cancel := context.WithCancelCause(r.ctx)
	run := &activeRun{id: r.runSeq, cancel: cancel, conn: c, done: make(chan struct{})}
	r.run = run
	r.beginLocked()
	cfg := runSettings{
		sysBase:   r.sysBase,
		sysAppend: slices.Clone(r.sysAppends),
		thinking:  r.thinking,
		autoStart: r.approval == protocol.ApprovalAuto,
		history:   slices.Clone(r.history),
		userInput: c.negotiated(protocol.RequestUserInput),
		clientTl:  c.negotiated(protocol.RequestClientTool),
		toolRetry: c.negotiated(protocol.RequestToolRetry),
	}
	r.mu.Unlock()
	r.applyClient(m)
	if t, ok := r.cfg.Log.(titled); ok {
		if err := t.SetTitle(m.Content); err != nil {
			r.cfg.Logger.Warn("set the session title", "err", err)
		}
	}
	go r.execute(ctx, run, cfg, m)
	return run, nil
}

// RunPrompt handles a prompt from c as Handle does, then waits for the run
// it started to end and returns the agent's result and error (a turn run
// without the agent returns a zero result and the turn's error). When ctx
// ends first, the run is interrupted as by an interrupt message (wire contract
// §8.9) and RunPrompt still waits for it to end. It is how a local client
// that renders the frames it subscribed to (maestro run) learns how the
// run ended: its exit status and usage line.
func (c *Conn) RunPrompt(ctx context.Context, m protocol.Prompt) (agent.Result, error) {
	if err := c.accept(m); err != nil {
		return agent.Result{}, err
	}
	r := c.r
	run, err := r.startPrompt(c, m)
	if err != nil {
		return agent.Result{}, err
	}
	select {
	case <-run.done:
	case <-ctx.Done():
		r.interrupt(protocol.Interrupt{}, reasonsInterrupt)
		<-run.done
	}
	return run.res, run.err
}

// titled is a Log that keeps a title (a *session.Session: its first
// prompt).
type titled interface{ SetTitle(string) error }

// runSettings are what a run takes from the runtime when it starts.
type runSettings struct {
	sysBase   *string
	sysAppend []string
	thinking  llm.ThinkingLevel
	autoStart bool
	history   []llm.Message
	userInput bool
	clientTl  bool
	toolRetry bool
}

func (r *Runtime) execute(ctx context.Context, run *activeRun, s runSettings, m protocol.Prompt) {
	defer r.endRun(run)
	if r.cfg.Turn != nil {
		run.err = r.runTurn(ctx, run, m)
		return
	}
	input := llm.UserText(m.Content)
	if len(m.Attachments) > 0 {
		parts := r.loadAttachments(m.Attachments)
		if len(parts) > 0 {
			r.publish(protocol.Status{Message: fmt.Sprintf("Loaded %d attachment(s)", len(parts))}, "")
			input.Parts = append(input.Parts, parts...)
		}
	}
	builtin, err := r.cfg.Tools(ctx)
	if err != nil && ctx.Err() != nil {
		// Interrupted while the tools were being set up (an MCP
		// server starting): said as the loop says it.
		r.finish(run)
		r.publish(protocol.Error{Message: "Operation aborted: the run was interrupted", ErrorType: protocol.ErrorCancelled}, "")
		run.err = fmt.Errorf("%w: %w", agent.ErrCancelled, context.Cause(ctx))
		return
	}
	if err != nil {
		msg := "Tools are unavailable: " + err.Error()
		r.finish(run)
		r.publish(protocol.Error{Message: msg, ErrorType: Classify(msg, false)}, "")
		run.err = errors.New(msg)
		return
	}
	set := builtin.Filter(func(tool.Tool) bool { return true })
	if s.userInput {
		set.Add(r.askUserTool(run))
	}
	if s.clientTl {
		for _, ct := range r.cfg.ClientTools {
			if _, taken := set.Get(ct.Name); taken {
				// A tool of the session (built-in or MCP) has the name: the
				// model would see two tools of one name, which the APIs
				// refuse, and the set cannot hold both.
				msg := fmt.Sprintf("Client tool %s is left out: a tool of this session has that name; rename it in --client-tools", ct.Name)
				r.publish(protocol.Error{Message: msg, ErrorType: protocol.ErrorTool}, "")
				continue
			}
			set.Add(&clientTool{r: r, run: run, spec: ct})
		}
	}
	provider := r.cfg.Provider
	if r.cfg.Retry != nil {
		pol := *r.cfg.Retry
		pol.OnRetry = func(attempt int, wait time.Duration, e *llm.Error) {
			r.publish(protocol.Status{Message: fmt.Sprintf("Model call failed (%s); retrying in %s (attempt %d)", e.Error(), wait.Round(100*time.Millisecond), attempt+1)}, "")
			r.publishRaw("retry", struct {
				Attempt int    `json:"attempt"`
				WaitMS  int64  `json:"wait_ms"`
				Error   string `json:"error"`
			}{attempt + 1, wait.Milliseconds(), e.Error()})
		}
		provider = llm.WithRetry(provider, pol)
	}
	acfg := agent.Config{
		Provider:      provider,
		Tools:         set,
		System:        r.systemPrompt(ctx, s.sysBase, s.sysAppend),
		MaxIterations: r.cfg.MaxIterations,
		CompactAt:     r.cfg.CompactAt,
		Thinking:      s.thinking,
		NeedsApproval: func(t tool.Tool, _ llm.ToolCall) bool { return !t.ReadOnly() && !isClientSide(t) },
		Now:           r.cfg.Now,
	}
	if !s.autoStart {
		acfg.Approve = r.approver(run)
	}
	if s.toolRetry {
		acfg.OnToolFailure = r.toolRetry(run)
	}
	sink := &runSink{r: r, holdEnd: true}
	res, err := agent.New(acfg).Run(ctx, s.history, input, sink)
	r.finish(run)
	sink.flush()
	run.res, run.err = res, err
	r.mu.Lock()
	r.history = llm.AppendHistory(r.history, res.Messages...)
	r.mu.Unlock()
	if errors.Is(err, agent.ErrAborted) {
		msg := "Run aborted: " + err.Error()
		r.publish(protocol.Error{Message: msg, ErrorType: Classify(msg, false)}, "")
	}
	if err != nil {
		r.cfg.Logger.Debug("headless run ended with an error", "err", err)
	}
}

// finish marks run as finished: what it publishes from now on ends it,
// and a prompt waits for its end rather than being refused as busy.
func (r *Runtime) finish(run *activeRun) {
	r.mu.Lock()
	run.finished = true
	r.mu.Unlock()
}

// endRun cancels what the run left pending and marks the runtime idle.
func (r *Runtime) endRun(run *activeRun) {
	left := r.cancelRequests(func(p *pendingRequest) bool { return p.run == run.id }, reasonRunEnded)
	deliverCancelled(left)
	run.cancel(nil)
	r.mu.Lock()
	r.run = nil
	r.mu.Unlock()
	for _, m := range run.last {
		r.publish(m, "")
	}
	r.end()
	close(run.done)
}

// runSink is the agent's sink: every event through the publish path, every
// conversation message to the log (and, for connections that negotiated
// it, as a raw_agent_event).
//
// With holdEnd (a prompt's run), a response_end or an error, and what
// follows it up to the next event, is held back: the next event publishes
// it first, and the run's last one goes out once the agent has returned
// and the run is finished. A response_end that no tool_call follows ends
// the turn, and so does the error of a failed model call
// (docs/protocol.md); a client that sent its next prompt on seeing it
// raced the run's end and was refused as busy (about one time in three
// after a response_end, one in two thousand after an error).
type runSink struct {
	r       *Runtime
	holdEnd bool
	// plain publishes the events only, with no raw_agent_event, and
	// holds a response_end but not an error (a turn's: it publishes its
	// own raw events, and an agent CLI's failure may come while the CLI
	// runs on).
	plain bool
	mu    sync.Mutex // orders the held work before the next event
	held  []func()
}

func (s *runSink) Event(m protocol.Message) {
	if !s.holdEnd {
		s.out(m)
		return
	}
	_, end := m.(protocol.ResponseEnd)
	_, failed := m.(protocol.Error)
	s.publish(m, end || failed && !s.plain)
}

// publish publishes m after the held work, or holds it in its place.
func (s *runSink) publish(m protocol.Message, hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runHeld()
	if hold {
		s.held = []func(){func() { s.out(m) }}
		return
	}
	s.out(m)
}

// out publishes m and, for the connections that asked, its raw event.
func (s *runSink) out(m protocol.Message) {
	s.r.publish(m, "")
	if s.plain {
		return
	}
	if t, ok := m.(interface{ MessageType() string }); ok {
		s.r.publishRaw(t.MessageType(), m)
	}
}

// runHeld does the held work; s.mu is held.
func (s *runSink) runHeld() {
	for _, f := range s.held {
		f()
	}
	s.held = nil
}

// flush does the held work.
func (s *runSink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runHeld()
}

// publishRaw publishes a raw_agent_event{event_type, event} of the agent's
// internal event stream (model stream deltas, tool lifecycle, retries,
// conversation messages) when a connection negotiated raw_agent_events;
// only those connections receive it.
func (r *Runtime) publishRaw(eventType string, event any) {
	if !r.anyRawEvents() {
		return
	}
	data, err := json.Marshal(event)
	if err != nil {
		return
	}
	r.publish(protocol.RawAgentEvent{EventType: eventType, Event: data}, "")
}

// Sink is the publish path as an agent sink, for a caller that runs an
// agent of this session itself (maestro run's piece runs): events are
// published to every subscription and logged, conversation messages
// logged.
func (r *Runtime) Sink() agent.Sink { return &runSink{r: r} }

func (s *runSink) Message(m llm.Message) {
	if s.holdEnd {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.held != nil {
			s.held = append(s.held, func() { s.message(m) }) // after the response_end it follows
			return
		}
	}
	s.message(m)
}

func (s *runSink) message(m llm.Message) {
	s.r.logMessage(m)
	s.r.publishRaw("message", m)
}

func (r *Runtime) anyRawEvents() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.connOrder {
		if c.prefs.Load().rawEvents {
			return true
		}
	}
	return false
}

// approver decides on tool calls per the current approval mode (wire contract
// §8.10): auto approves, fail denies, prompt raises an approval request
// whose ids are the tool call's id.
func (r *Runtime) approver(run *activeRun) agent.Approver {
	return func(ctx context.Context, req agent.ApprovalRequest) (agent.Approval, error) {
		switch r.approvalMode() {
		case protocol.ApprovalAuto:
			return agent.Approval{Approved: true, Reason: "Auto-approved by policy"}, nil
		case protocol.ApprovalFail:
			return agent.Approval{Approved: false, Reason: "Denied by approval policy"}, nil
		}
		d := agent.Describe(req.Tool, req.Args)
		o, err := r.raise(ctx, run.id, protocol.ServerRequest{
			RequestID: req.CallID, RequestType: protocol.RequestApproval, CallID: req.CallID, Tool: req.Tool,
			DisplayName: d.Name, SummaryLabel: d.Summary, ActionDescription: d.Action,
			Args: req.Args, Reason: "Requires approval",
		})
		if err != nil {
			return agent.Approval{RequestID: req.CallID}, err
		}
		return agent.Approval{Approved: o.approved, Reason: o.reason, RequestID: req.CallID}, nil
	}
}

// toolRetry asks the controller what to do after a failed tool call
// (only when it negotiated tool_retry; otherwise the agent skips).
func (r *Runtime) toolRetry(run *activeRun) func(context.Context, agent.ToolFailure) (agent.RetryAction, error) {
	return func(ctx context.Context, f agent.ToolFailure) (agent.RetryAction, error) {
		args, err := json.Marshal(struct {
			ToolCallID   string          `json:"tool_call_id"`
			Args         json.RawMessage `json:"args"`
			ErrorMessage string          `json:"error_message"`
			Attempt      int             `json:"attempt"`
		}{f.CallID, f.Args, f.Error, f.Attempt})
		if err != nil {
			return agent.RetryAbort, fmt.Errorf("encode tool retry request: %w", err)
		}
		o, err := r.raise(ctx, run.id, protocol.ServerRequest{
			RequestID:   fmt.Sprintf("retry_%s_%d", f.CallID, f.Attempt),
			RequestType: protocol.RequestToolRetry, CallID: f.CallID, Tool: f.Tool,
			Args: args, Reason: "Tool retry decision required",
		})
		if err != nil {
			return agent.RetryAbort, err
		}
		switch o.action {
		case protocol.DecisionRetry:
			return agent.RetryRetry, nil
		case protocol.DecisionSkip:
			return agent.RetrySkip, nil
		}
		return agent.RetryAbort, nil
	}
}

// loadAttachments reads prompt attachments (wire contract §8.11): host paths,
// "~" expanded, relative to the runtime's cwd; at most MaxAttachmentBytes
// each; images become image parts, UTF-8 text without NUL becomes a text
// part cut to MaxAttachmentChars. Each failure is a non-fatal error.
func (r *Runtime) loadAttachments(paths []string) []llm.Part {
	var parts []llm.Part
	fail := func(msg string) {
		r.publish(protocol.Error{Message: msg, ErrorType: Classify(msg, false)}, "")
	}
	for _, raw := range paths {
		p := raw
		if p == "~" || strings.HasPrefix(p, "~/") {
			p = filepath.Join(r.cfg.Home, p[1:])
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.cfg.Cwd, p)
		}
		data, err := readAttachment(p, r.cfg.MaxAttachmentBytes)
		var tooLarge *workspace.TooLargeError
		switch {
		case errors.Is(err, os.ErrNotExist):
			fail("Attachment not found: " + raw)
			continue
		case errors.As(err, &tooLarge):
			fail(fmt.Sprintf("Attachment too large (%dMB): %s", int64(math.Round(float64(tooLarge.Size)/(1<<20))), raw))
			continue
		case err != nil:
			fail("Attachment not readable: " + raw)
			continue
		}
		mt := mime.TypeByExtension(strings.ToLower(filepath.Ext(p)))
		if i := strings.IndexByte(mt, ';'); i >= 0 {
			mt = mt[:i]
		}
		if strings.HasPrefix(mt, "image/") {
			parts = append(parts, llm.Part{Type: llm.PartImage, Image: &llm.Image{MediaType: mt, Data: data}})
			continue
		}
		if len(data) == 0 || !utf8.Valid(data) || slices.Contains(data, 0) {
			fail("Unsupported attachment (not image/text): " + raw)
			continue
		}
		text := string(data)
		if utf8.RuneCountInString(text) > r.cfg.MaxAttachmentChars {
			text = string([]rune(text)[:r.cfg.MaxAttachmentChars])
		}
		if mt == "" {
			mt = "text/plain"
		}
		parts = append(parts, llm.Text(fmt.Sprintf("<attachment name=%q type=%q>\n%s\n</attachment>", filepath.Base(p), mt, text)))
	}
	return parts
}

// readAttachment reads the regular file p whole if it holds at most max
// bytes. It opens p without blocking and takes the kind of file from the
// opened descriptor, so a FIFO (which would block the run, and shutdown
// with it, for ever) or a device such as /dev/zero (which would be read
// until memory runs out) is refused at once.
func readAttachment(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return workspace.ReadRegular(f, p, max)
}
