package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/oneline"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/tool"
)

// jsonlSink prints every protocol event as one JSON line.
type jsonlSink struct {
	mu     sync.Mutex
	w      io.Writer
	errOut io.Writer
}

func (s *jsonlSink) Event(m protocol.Message) {
	data, err := protocol.Marshal(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		fmt.Fprintf(s.errOut, "maestro: %v\n", err)
		return
	}
	s.w.Write(append(data, '\n'))
}

func (s *jsonlSink) Message(llm.Message) {}

// ANSI styles, used only on terminals.
type styles struct{ dim, bold, green, red, yellow, cyan, reset string }

func newStyles(color bool) styles {
	if !color {
		return styles{}
	}
	return styles{dim: "\x1b[2m", bold: "\x1b[1m", green: "\x1b[32m", red: "\x1b[31m", yellow: "\x1b[33m", cyan: "\x1b[36m", reset: "\x1b[0m"}
}

// renderer is the one terminal view of an agent's events: `maestro run`
// draws a run with it as the events come, and `maestro tasks logs` draws a
// job's log with it (jobLog feeds it the log's events). The same event is
// drawn the same way on both: assistant text as it streams, thinking
// dimmed, one line per tool call with the tail of its output and its
// outcome, status and error lines, approval requests, the model badge of
// `ready` (▶ REPLAY for scripted turns), the piece run's events (movement
// headers, transitions, questions, completion), and the job's own status
// changes and comments.
//
// Assistant text goes to the text writer and everything else to the info
// writer: for `maestro run` they are Out and ErrOut (so that `maestro run
// … > answer.txt` captures the answer alone), for a job log both are Out
// (a log is read as one stream). ANSI styles only on a terminal without
// NO_COLOR.
type renderer struct {
	text, info io.Writer
	st         styles
	// loc is the zone of the job log's time stamps.
	loc *time.Location
	// spin animates what is running (a run on a terminal); nil for none.
	spin *spinner
	// ownFailure: the command reports a run's fatal error itself, as its
	// one-line reason (maestro run), so the stream only tidies up.
	ownFailure bool
	// ownResult: the command prints a piece run's result itself (maestro
	// run prints it alone on stdout).
	ownResult bool

	mu       sync.Mutex
	tools    map[string]*toolView
	textOpen bool // the text writer's last line is unfinished
	thinking bool // inside a run of thinking chunks
	// thinkOpen: the info writer's last thinking line is unfinished.
	thinkOpen bool
	// lastRun is the description of the run event drawn last, while no
	// other event followed it: logs recorded before run events were sent
	// once carry a status line repeating it right after, which is not
	// drawn again (legacyEcho).
	lastRun string
	replay  bool
	// agentsOnly: every movement of the piece runs on an agent CLI, so
	// the replay demo the session holds (no model is configured) is never
	// called: no replay badge, and the CLIs' cost.
	agentsOnly bool
	// cwd is the workspace drawn last: an agent CLI's session sends
	// session_info again once the CLI names its session.
	cwd     string
	started time.Time // the first `running` status of a job

	modelCalls, toolCalls int
	usage                 protocol.Usage
	// result is a piece run's result as drawn from its completion, so that
	// a follower does not print it twice.
	result string
}

type toolView struct {
	name    string
	summary string
	started time.Time
	output  strings.Builder
	// chunks counts the tool_output messages of the call; a failed call's
	// only chunk without a final newline is its reason (the agent loop
	// sends it so, see agent's endTool) and is drawn on the ✗ line instead
	// of in the output tail.
	chunks int
}

// add appends a chunk of output.
func (v *toolView) add(chunk string) {
	v.chunks++
	if v.output.Len() < 1<<16 {
		v.output.WriteString(chunk)
	}
}

// finish returns the output to show and, for a failed call, its reason.
func (v *toolView) finish(success bool) (output, reason string) {
	out := v.output.String()
	if success || v.chunks != 1 || out == "" || strings.HasSuffix(out, "\n") {
		return out, ""
	}
	reason, _, _ = strings.Cut(out, "\n")
	return "", reason
}

// newRenderer is the view of `maestro run`: text on io.Out, the rest on
// io.ErrOut with a spinner when it is a terminal. What the model, a tool
// or a file says is shown with its control characters as text
// (termSafe); only the renderer's own styles and spinner reach the
// terminal as escape sequences.
func newRenderer(io *IOStreams, replay bool) *renderer {
	styled := io.ErrTTY && io.Getenv("NO_COLOR") == ""
	r := &renderer{text: termSafe(io.Out, false), info: termSafe(io.ErrOut, styled), st: newStyles(styled), loc: time.Local,
		tools: map[string]*toolView{}, replay: replay, ownFailure: true, ownResult: true}
	if io.ErrTTY {
		r.spin = newSpinner(io.ErrOut)
	}
	return r
}

// header prints what the run's events do not say: where the scripted
// turns come from, the sandbox and the session (ready and session_info
// draw the model and the workspace).
func (r *renderer) header(id string, c *providers.Choice, sandboxKind, dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endText()
	from := ""
	if c.Executor == protocol.ExecutorReplay && !r.agentsOnly {
		from = " · scripted turns from " + replayName(c.Replay)
	}
	fmt.Fprintf(r.info, "%smaestro%s · sandbox %s · session %s%s\n", r.st.dim, from, sandboxKind, id, r.st.reset)
}

func replayName(s string) string {
	if s == providers.DemoScenario {
		return "the bundled demo"
	}
	return s
}

func (r *renderer) Message(llm.Message) {}

// Event implements agent.Sink: one protocol message of a run, as it
// happens.
func (r *renderer) Event(m protocol.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.protocol(m, time.Now(), "")
}

// RunEvent implements engine.EventSink: one event of a piece run, as it
// happens.
func (r *renderer) RunEvent(rec engine.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runEvent(rec.Event)
}

// protocol draws one protocol message that happened at `at`; stamp, when
// not empty, prefixes the lines that stand for a fact of the log (a job's
// event number and time).
func (r *renderer) protocol(m protocol.Message, at time.Time, stamp string) {
	st := r.st
	if s, ok := m.(protocol.Status); ok && r.legacyEcho(s) {
		return
	}
	r.lastRun = ""
	switch m := m.(type) {
	case protocol.Ready:
		switch {
		case m.ExecutorType == protocol.ExecutorReplay && r.agentsOnly:
			r.line(stamp, "model: none configured, and none needed: every movement runs on an agent CLI, which calls its own")
		case m.ExecutorType == protocol.ExecutorReplay:
			r.replay = true
			r.line(stamp, fmt.Sprintf("%s%s▶ REPLAY%s scripted model turns (%s/%s), tools run for real", st.bold, st.yellow, st.reset, m.Provider, m.Model))
		default:
			r.line(stamp, fmt.Sprintf("model %s/%s", m.Provider, m.Model))
		}
	case protocol.SessionInfo:
		if m.Cwd != r.cwd {
			r.cwd = m.Cwd
			r.note(st.dim, "workspace "+m.Cwd)
		}
	case protocol.HelloOK, protocol.ConnectionInfo, protocol.ToolStart:
		// Connection plumbing, and a start the tool call line showed.
	case protocol.ResponseStart:
		r.spinStart("thinking")
	case protocol.ResponseChunk:
		r.spinStop()
		if m.IsThinking {
			if !r.thinking {
				r.endText()
				fmt.Fprintf(r.info, "%s∴ ", st.dim)
				r.thinking = true
			}
			fmt.Fprint(r.info, m.Content)
			r.thinkOpen = !strings.HasSuffix(m.Content, "\n")
			return
		}
		if r.thinking {
			fmt.Fprint(r.info, st.reset)
			if r.thinkOpen {
				fmt.Fprintln(r.info)
			}
			r.thinking, r.thinkOpen = false, false
		}
		fmt.Fprint(r.text, m.Content)
		r.textOpen = !strings.HasSuffix(m.Content, "\n")
	case protocol.ResponseEnd:
		r.endText()
		r.modelCalls++
		u := m.Usage
		r.usage.InputTokens += u.InputTokens
		r.usage.OutputTokens += u.OutputTokens
		r.usage.CacheReadTokens += u.CacheReadTokens
		r.usage.CacheWriteTokens += u.CacheWriteTokens
		r.usage.TotalCostUSD += u.TotalCostUSD
	case protocol.ToolCall:
		r.endText()
		v := &toolView{name: m.Tool, summary: toolCallSummary(m.Tool, m.Args), started: at}
		r.tools[m.CallID] = v
		fmt.Fprintf(r.info, "%s●%s %s%s%s %s\n", st.cyan, st.reset, st.bold, m.Tool, st.reset, v.summary)
		r.spinStart("running " + m.Tool)
	case protocol.ToolOutput:
		if v := r.tools[m.CallID]; v != nil {
			v.add(m.Content)
		}
	case protocol.ToolEnd:
		r.endText()
		r.toolCalls++
		v := r.tools[m.CallID]
		if v == nil {
			v = &toolView{name: "tool call " + m.CallID, started: at}
		}
		delete(r.tools, m.CallID)
		output, reason := v.finish(m.Success)
		for _, line := range tailLines(output, 8) {
			fmt.Fprintf(r.info, "  %s│ %s%s\n", st.dim, line, st.reset)
		}
		took := ""
		if d := at.Sub(v.started).Round(time.Millisecond); d > 0 {
			took = fmt.Sprintf(" %s(%s)%s", st.dim, d, st.reset)
		}
		if m.Success {
			fmt.Fprintf(r.info, "  %s✓%s %s%s\n", st.green, st.reset, v.name, took)
		} else {
			failed := " failed"
			if m.ErrorCode != "" && m.ErrorCode != tool.CodeFailed {
				failed += " (" + m.ErrorCode + ")"
			}
			if reason != "" {
				took += ": " + oneline.Cut(reason, 160)
			}
			fmt.Fprintf(r.info, "  %s✗%s %s%s%s\n", st.red, st.reset, v.name, failed, took)
		}
		if len(r.tools) > 0 {
			r.spinStart("running tools")
		}
	case protocol.Status:
		r.note(st.dim, m.Message)
	case protocol.Error:
		if r.ownFailure && m.Fatal {
			// Reported once, as the command's one-line reason; here only
			// the stream is tidied up.
			r.endText()
			return
		}
		r.note(st.red, fmt.Sprintf("✗ error (%s): %s", m.ErrorType, m.Message))
	case protocol.ServerRequest:
		r.note(st.yellow, fmt.Sprintf("? %s for %s: %s", m.RequestType, m.Tool, oneline.Cut(m.Reason, 160)))
	case protocol.ServerRequestResolved:
		r.note(st.dim, fmt.Sprintf("request %s resolved", m.RequestID))
	case protocol.Compaction:
		// Between the statuses that announce and measure it: what the
		// conversation now starts from, on one line.
		r.note(st.dim, "Summary of the earlier conversation: "+oneline.Cut(m.Summary, 160))
	default:
		data, _ := protocol.Marshal(m)
		r.raw(stamp, "protocol "+m.MessageType(), data)
	}
}

// legacyEcho reports whether s repeats the run event drawn just before it:
// job logs recorded before run events were sent once hold each run event
// twice, as the event and as a status line right after it. Run events are
// drawn from the events themselves; this only keeps such recorded logs
// from showing them twice.
func (r *renderer) legacyEcho(s protocol.Status) bool {
	echo := r.lastRun != "" && s.Message == r.lastRun
	r.lastRun = ""
	return echo
}

// runEvent draws one event of a piece run.
func (r *renderer) runEvent(ev engine.Event) {
	st := r.st
	desc := ev.Describe()
	switch e := ev.(type) {
	case engine.MovementStarted:
		r.endText()
		fmt.Fprintf(r.info, "\n%s── %s ──%s\n", st.bold, desc, st.reset)
	case engine.Transition:
		r.note(st.cyan, "» "+desc)
	case engine.Waiting:
		if e.For == "user" {
			r.note(st.yellow, fmt.Sprintf("? movement %s asks:", e.Movement))
			fmt.Fprintln(r.info, indentLines(e.Question, "  "))
			break
		}
		r.note(st.yellow, "… "+desc)
	case engine.Pressure:
		r.note(st.yellow, "! "+desc)
	case engine.Complete:
		if e.Status == engine.StatusSucceeded {
			r.note(st.green, "✓ "+desc)
		} else {
			r.note(st.red, "✗ "+desc)
		}
		if e.Result != "" && !r.ownResult {
			fmt.Fprintln(r.info, strings.TrimRight(e.Result, "\n"))
			r.result = e.Result
		}
	default:
		r.note(st.dim, desc)
	}
	r.lastRun = desc
}

// jobStatus draws a change of a job's state; when the job is finished, the
// usage line of what its log showed follows.
func (r *renderer) jobStatus(s store.StatusEvent, at time.Time, stamp string) {
	r.lastRun = ""
	text := "status " + string(s.State)
	if s.Attempt > 0 {
		text += fmt.Sprintf(" (attempt %d)", s.Attempt)
	}
	if s.Reason != "" {
		text += " " + s.Reason
	}
	if s.Error != "" {
		text += ": " + s.Error
	}
	st := r.st
	switch s.State {
	case store.StateSucceeded:
		text = st.green + text + st.reset
	case store.StateFailed, store.StateAborted, store.StateCancelled:
		text = st.red + text + st.reset
	case store.StateWaitingHuman:
		text = st.yellow + text + st.reset
	case store.StateRunning:
		if r.started.IsZero() {
			r.started = at
		}
		// A new attempt: calls the previous one left open never end.
		clear(r.tools)
	}
	r.line(stamp, text)
	if s.State.Terminal() && r.modelCalls > 0 {
		cost := fmt.Sprintf("$%.4f", r.usage.TotalCostUSD)
		if r.replay {
			cost = "$0 (replay)"
		}
		sum := usageSummary(r.modelCalls, r.toolCalls, r.usage.InputTokens, r.usage.OutputTokens,
			r.usage.CacheReadTokens, r.usage.CacheWriteTokens, cost)
		if !r.started.IsZero() {
			sum += " · " + at.Sub(r.started).Round(time.Millisecond).String()
		}
		r.note(st.dim, sum)
	}
}

// comment draws a comment on the job's task.
func (r *renderer) comment(c api.CommentEvent, stamp string) {
	r.lastRun = ""
	r.line(stamp, fmt.Sprintf("comment from %s: %s", c.AuthorKind, firstLine(c.Body, 200)))
}

// raw draws an event this view has no picture for: its label and its
// data, compacted and shortened.
func (r *renderer) raw(stamp, label string, data []byte) {
	r.lastRun = ""
	var buf bytes.Buffer
	if json.Compact(&buf, data) != nil {
		buf.Reset()
		buf.Write(data)
	}
	s := buf.String()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	r.line(stamp, label+" "+s)
}

// line draws a fact of the log: prefixed by its stamp.
func (r *renderer) line(stamp, text string) {
	r.endText()
	fmt.Fprintf(r.info, "%s%s\n", stamp, text)
}

// note draws a line in a style.
func (r *renderer) note(style, text string) {
	r.endText()
	fmt.Fprintf(r.info, "%s%s%s\n", style, text, r.st.reset)
}

// endText finishes a pending line of thinking or assistant text, and
// stops the spinner: something else is drawn next.
func (r *renderer) endText() {
	r.spinStop()
	if r.thinking {
		fmt.Fprintf(r.info, "%s\n", r.st.reset)
		r.thinking, r.thinkOpen = false, false
	}
	if r.textOpen {
		fmt.Fprintln(r.text)
		r.textOpen = false
	}
}

func (r *renderer) spinStart(label string) {
	if r.spin != nil {
		r.spin.start(termSafeString(label))
	}
}

func (r *renderer) spinStop() {
	if r.spin != nil {
		r.spin.stop()
	}
}

// finish prints the usage line of a run.
func (r *renderer) finish(res agent.Result, took time.Duration, replay bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endText()
	st := r.st
	u := res.Usage
	cost := fmt.Sprintf("$%.4f", res.CostUSD)
	if !res.CostKnown {
		cost += " (pricing unknown)"
	}
	if replay && !r.agentsOnly {
		cost = "$0 (replay)"
	}
	fmt.Fprintf(r.info, "%s%s · %s%s\n", st.dim,
		usageSummary(res.ModelCalls(), res.Tools.CallsSucceeded+res.Tools.CallsFailed,
			u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, cost),
		took.Round(time.Millisecond), st.reset)
}

// usageSummary is the usage line of a run (`maestro run`) or a job's log
// (`maestro tasks logs`): model and tool calls, tokens and the cost as
// already formatted.
func usageSummary(modelCalls, toolCalls int, in, out, cacheRead, cacheWrite int64, cost string) string {
	return fmt.Sprintf("%d model call(s) · %d tool call(s) · tokens in %d out %d cache r/w %d/%d · %s",
		modelCalls, toolCalls, in, out, cacheRead, cacheWrite, cost)
}

// toolCallSummary is the one-line view of a tool call's arguments; the
// piece control tools say where they lead.
func toolCallSummary(tool string, args json.RawMessage) string {
	var ctl struct {
		Next   string `json:"next"`
		Status string `json:"status"`
	}
	switch {
	case tool == "transition" && json.Unmarshal(args, &ctl) == nil && ctl.Next != "":
		return "→ " + ctl.Next
	case tool == "complete" && json.Unmarshal(args, &ctl) == nil && ctl.Status != "":
		return ctl.Status
	}
	return summarizeArgs(tool, args)
}

// summarizeArgs renders a tool call's arguments in one short line.
func summarizeArgs(tool string, args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, key := range []string{"command", "path", "pattern"} {
		if v, ok := m[key].(string); ok {
			s := oneline.Cut(v, 100)
			if key == "pattern" {
				if p, ok := m["path"].(string); ok && p != "" {
					s += " in " + p
				}
			}
			return s
		}
	}
	return oneline.Cut(string(args), 100)
}

func tailLines(s string, n int) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		omitted := len(lines) - n
		lines = append([]string{fmt.Sprintf("… %d more line(s)", omitted)}, lines[len(lines)-n:]...)
	}
	for i, l := range lines {
		lines[i] = oneline.Cut(l, 160)
	}
	return lines
}

// spinner animates a status line on a terminal.
type spinner struct {
	w     io.Writer
	mu    sync.Mutex
	stopC chan struct{}
	done  chan struct{}
}

func newSpinner(w io.Writer) *spinner { return &spinner{w: w} }

func (s *spinner) start(label string) {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopC, s.done = make(chan struct{}), make(chan struct{})
	stopC, done := s.stopC, s.done
	go func() {
		defer close(done)
		frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
		began := time.Now()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(s.w, "\r\x1b[2K%c %s %.1fs", frames[i%len(frames)], label, time.Since(began).Seconds())
			select {
			case <-stopC:
				fmt.Fprint(s.w, "\r\x1b[2K")
				return
			case <-t.C:
			}
		}
	}()
}

func (s *spinner) stop() {
	s.mu.Lock()
	stopC, done := s.stopC, s.done
	s.stopC, s.done = nil, nil
	s.mu.Unlock()
	if stopC != nil {
		close(stopC)
		<-done
	}
}
