package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/store"
)

// jobLog prints a job's event log, page after page or event after event as
// an SSE stream delivers them. With asJSON it writes every event as one
// line of JSON, exactly as the API sent it. Otherwise it renders the log
// for people, as `maestro run` renders a run: the job's own status changes
// and comments as time-stamped lines (`15:04:05 #3 status running`), the
// ▶ REPLAY badge, movements as headers, assistant text streamed as it
// came, thinking dimmed, one line per tool call with its outcome, the
// run's result and a usage line when the job finishes. Everything goes to
// one writer (a log is read as one stream); ANSI styles only when color is
// set (a terminal without NO_COLOR).
//
// A run event is rendered from its run_event. Logs written before the
// engine recorded each run event once also carry a protocol status line
// with the same text after it; that echo is skipped.
type jobLog struct {
	w      io.Writer
	st     styles
	loc    *time.Location
	asJSON bool

	inText   bool // the last write was assistant text without a final newline
	thinking bool // inside a run of thinking chunks
	tools    map[string]*loggedTool
	echo     string // the Describe text of the last run event, whose status echo is skipped
	replay   bool
	started  time.Time // the first `running` status

	modelCalls, toolCalls int
	usage                 protocol.Usage
	// result is the run result already printed (from the complete run
	// event), so the follower does not print it twice.
	result string
}

type loggedTool struct {
	name    string
	started time.Time
	output  strings.Builder
}

func newJobLog(ios *IOStreams, asJSON bool) *jobLog {
	color := ios.OutTTY && (ios.Getenv == nil || ios.Getenv("NO_COLOR") == "")
	return &jobLog{w: ios.Out, st: newStyles(color), loc: time.Local, asJSON: asJSON, tools: map[string]*loggedTool{}}
}

// add prints one event; raw is its JSON as the API sent it.
func (l *jobLog) add(raw []byte, e store.JobEvent) {
	if l.asJSON {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			buf.Reset()
			buf.Write(bytes.TrimSpace(raw))
		}
		buf.WriteByte('\n')
		l.w.Write(buf.Bytes())
		return
	}
	switch e.Type {
	case store.JobEventStatus:
		l.status(e)
	case store.JobEventComment:
		var c struct {
			AuthorKind string `json:"author_kind"`
			Author     string `json:"author"`
			Body       string `json:"body"`
		}
		json.Unmarshal(e.Data, &c)
		l.line(e, fmt.Sprintf("comment from %s: %s", c.AuthorKind, firstLine(c.Body, 200)))
	case store.JobEventRunEvent:
		var rec engine.Record
		if err := json.Unmarshal(e.Data, &rec); err != nil {
			l.raw(e)
			return
		}
		l.runEvent(rec.Event)
	case store.JobEventProtocol:
		m, err := protocol.DecodeServer(e.Data)
		if err != nil {
			l.raw(e)
			return
		}
		l.protocol(e, m)
	default:
		l.raw(e)
	}
}

// close ends a pending line of assistant text.
func (l *jobLog) close() {
	if !l.asJSON {
		l.endText()
	}
}

func (l *jobLog) prefix(e store.JobEvent) string {
	return fmt.Sprintf("%s%s #%d%s ", l.st.dim, e.CreatedAt.In(l.loc).Format("15:04:05"), e.Seq, l.st.reset)
}

// line prints a time-stamped line of the job itself.
func (l *jobLog) line(e store.JobEvent, text string) {
	l.endText()
	fmt.Fprintf(l.w, "%s%s\n", l.prefix(e), text)
}

// note prints a line of the run in a style.
func (l *jobLog) note(style, text string) {
	l.endText()
	fmt.Fprintf(l.w, "%s%s%s\n", style, text, l.st.reset)
}

func (l *jobLog) endText() {
	if l.thinking {
		fmt.Fprintf(l.w, "%s\n", l.st.reset)
		l.thinking, l.inText = false, false
	}
	if l.inText {
		fmt.Fprintln(l.w)
		l.inText = false
	}
}

func (l *jobLog) status(e store.JobEvent) {
	var s store.StatusEvent
	json.Unmarshal(e.Data, &s)
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
	st := l.st
	switch s.State {
	case store.StateSucceeded:
		text = st.green + text + st.reset
	case store.StateFailed, store.StateAborted, store.StateCancelled:
		text = st.red + text + st.reset
	case store.StateWaitingHuman:
		text = st.yellow + text + st.reset
	case store.StateRunning:
		if l.started.IsZero() {
			l.started = e.CreatedAt
		}
		// A new attempt: calls the previous one left open never end.
		clear(l.tools)
	}
	l.line(e, text)
	if s.State.Terminal() && l.modelCalls > 0 {
		cost := fmt.Sprintf("$%.4f", l.usage.TotalCostUSD)
		if l.replay {
			cost = "$0 (replay)"
		}
		sum := usageSummary(l.modelCalls, l.toolCalls, l.usage.InputTokens, l.usage.OutputTokens,
			l.usage.CacheReadTokens, l.usage.CacheWriteTokens, cost)
		if !l.started.IsZero() {
			sum += " · " + e.CreatedAt.Sub(l.started).Round(time.Millisecond).String()
		}
		l.note(st.dim, sum)
	}
}

func (l *jobLog) runEvent(ev engine.Event) {
	st := l.st
	desc := ev.Describe()
	l.echo = desc
	switch e := ev.(type) {
	case engine.MovementStarted:
		l.endText()
		fmt.Fprintf(l.w, "\n%s── %s ──%s\n", st.bold, desc, st.reset)
	case engine.Transition:
		l.note(st.cyan, "» "+desc)
	case engine.Waiting:
		if e.For == "user" {
			l.note(st.yellow, fmt.Sprintf("? movement %s asks:", e.Movement))
			fmt.Fprintln(l.w, indentLines(e.Question, "  "))
			return
		}
		l.note(st.yellow, "… "+desc)
	case engine.Pressure:
		l.note(st.yellow, "! "+desc)
	case engine.Complete:
		if e.Status == engine.StatusSucceeded {
			l.note(st.green, "✓ "+desc)
		} else {
			l.note(st.red, "✗ "+desc)
		}
		if e.Result != "" {
			fmt.Fprintln(l.w, strings.TrimRight(e.Result, "\n"))
			l.result = e.Result
		}
	default:
		l.note(st.dim, desc)
	}
}

func (l *jobLog) protocol(e store.JobEvent, m protocol.Message) {
	st := l.st
	switch m := m.(type) {
	case protocol.Ready:
		if m.ExecutorType == protocol.ExecutorReplay {
			l.replay = true
			l.line(e, fmt.Sprintf("%s%s▶ REPLAY%s scripted model turns (%s/%s), tools run for real", st.bold, st.yellow, st.reset, m.Provider, m.Model))
		} else {
			l.line(e, fmt.Sprintf("model %s/%s", m.Provider, m.Model))
		}
	case protocol.SessionInfo:
		l.note(st.dim, "workspace "+m.Cwd)
	case protocol.ResponseStart, protocol.ToolStart:
	case protocol.ResponseChunk:
		if m.IsThinking {
			if !l.thinking {
				l.endText()
				fmt.Fprintf(l.w, "%s∴ ", st.dim)
				l.thinking = true
			}
			fmt.Fprint(l.w, m.Content)
			l.inText = !strings.HasSuffix(m.Content, "\n")
			return
		}
		if l.thinking {
			fmt.Fprintf(l.w, "%s", st.reset)
			if l.inText {
				fmt.Fprintln(l.w)
			}
			l.thinking, l.inText = false, false
		}
		fmt.Fprint(l.w, m.Content)
		l.inText = !strings.HasSuffix(m.Content, "\n")
	case protocol.ResponseEnd:
		l.endText()
		l.modelCalls++
		u := m.Usage
		l.usage.InputTokens += u.InputTokens
		l.usage.OutputTokens += u.OutputTokens
		l.usage.CacheReadTokens += u.CacheReadTokens
		l.usage.CacheWriteTokens += u.CacheWriteTokens
		l.usage.TotalCostUSD += u.TotalCostUSD
	case protocol.ToolCall:
		l.endText()
		l.tools[m.CallID] = &loggedTool{name: m.Tool, started: e.CreatedAt}
		fmt.Fprintf(l.w, "%s●%s %s%s%s %s\n", st.cyan, st.reset, st.bold, m.Tool, st.reset, toolCallSummary(m.Tool, m.Args))
	case protocol.ToolOutput:
		if t := l.tools[m.CallID]; t != nil && t.output.Len() < 1<<16 {
			t.output.WriteString(m.Content)
		}
	case protocol.ToolEnd:
		l.endText()
		l.toolCalls++
		t := l.tools[m.CallID]
		if t == nil {
			t = &loggedTool{name: "tool call " + m.CallID, started: e.CreatedAt}
		}
		delete(l.tools, m.CallID)
		for _, line := range tailLines(t.output.String(), 8) {
			fmt.Fprintf(l.w, "  %s│ %s%s\n", st.dim, line, st.reset)
		}
		took := ""
		if d := e.CreatedAt.Sub(t.started).Round(time.Millisecond); d > 0 {
			took = fmt.Sprintf(" %s(%s)%s", st.dim, d, st.reset)
		}
		if m.Success {
			fmt.Fprintf(l.w, "  %s✓%s %s%s\n", st.green, st.reset, t.name, took)
		} else {
			failed := " failed"
			if m.ErrorCode != "" {
				failed += " (" + m.ErrorCode + ")"
			}
			fmt.Fprintf(l.w, "  %s✗%s %s%s%s\n", st.red, st.reset, t.name, failed, took)
		}
	case protocol.Status:
		if m.Message == l.echo {
			l.echo = ""
			return
		}
		l.note(st.dim, m.Message)
	case protocol.Error:
		l.note(st.red, fmt.Sprintf("✗ error (%s): %s", m.ErrorType, m.Message))
	case protocol.ServerRequest:
		l.note(st.yellow, fmt.Sprintf("? %s for %s: %s", m.RequestType, m.Tool, oneLine(m.Reason, 160)))
	case protocol.ServerRequestResolved:
		l.note(st.dim, fmt.Sprintf("request %s resolved", m.RequestID))
	default:
		l.raw(e)
	}
}

// raw prints an event this renderer has no view for: its type, inner
// kind and data, shortened.
func (l *jobLog) raw(e store.JobEvent) {
	label, body := string(e.Type), e.Data
	// Engine run events ({"kind", "data"}) and agent protocol messages
	// ({"type", …}) are labelled by their own kind.
	var inner struct {
		Kind string          `json:"kind"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(e.Data, &inner) == nil {
		switch {
		case inner.Kind != "":
			label += " " + inner.Kind
			if len(inner.Data) > 0 {
				body = inner.Data
			}
		case inner.Type != "":
			label += " " + inner.Type
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, body) != nil {
		buf.Reset()
		buf.Write(body)
	}
	data := buf.String()
	if len(data) > 300 {
		data = data[:300] + "…"
	}
	l.line(e, label+" "+data)
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
