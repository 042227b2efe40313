package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
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

// renderer draws a run on a terminal: assistant text on Out; tool
// activity, notices, a spinner and the final usage line on ErrOut (so
// that `maestro run … > answer.txt` captures the answer alone).
type renderer struct {
	io *IOStreams
	st styles

	mu       sync.Mutex
	tools    map[string]*toolView
	inText   bool // the last thing written to Out was assistant text without a newline
	thinking bool
	spin     *spinner
	replay   bool
}

type toolView struct {
	name    string
	summary string
	started time.Time
	output  strings.Builder
}

func newRenderer(io *IOStreams, replay bool) *renderer {
	r := &renderer{io: io, st: newStyles(io.ErrTTY && io.Getenv("NO_COLOR") == ""), tools: map[string]*toolView{}, replay: replay}
	if io.ErrTTY {
		r.spin = newSpinner(io.ErrOut)
	}
	return r
}

func (r *renderer) header(id string, c *providers.Choice, sandboxKind, dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	if c.Executor == protocol.ExecutorReplay {
		fmt.Fprintf(r.io.ErrOut, "%s%s▶ REPLAY%s scripted model turns from %s — tools run for real\n", st.bold, st.yellow, st.reset, replayName(c.Replay))
	}
	fmt.Fprintf(r.io.ErrOut, "%smaestro · %s/%s · sandbox %s · %s · session %s%s\n", st.dim, c.Provider.Name(), c.Provider.Model(), sandboxKind, dir, id, st.reset)
}

func replayName(s string) string {
	if s == providers.DemoScenario {
		return "the bundled demo"
	}
	return s
}

func (r *renderer) Message(llm.Message) {}

func (r *renderer) Event(m protocol.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	switch e := m.(type) {
	case protocol.ResponseStart:
		r.spinStart("thinking")
	case protocol.ResponseChunk:
		r.spinStop()
		if e.IsThinking {
			if !r.thinking {
				r.endText()
				fmt.Fprintf(r.io.ErrOut, "%s∴ ", st.dim)
				r.thinking = true
			}
			fmt.Fprint(r.io.ErrOut, e.Content)
			return
		}
		if r.thinking {
			fmt.Fprintf(r.io.ErrOut, "%s\n", st.reset)
			r.thinking = false
		}
		fmt.Fprint(r.io.Out, e.Content)
		r.inText = !strings.HasSuffix(e.Content, "\n")
	case protocol.ResponseEnd:
		r.spinStop()
		if r.thinking {
			fmt.Fprintf(r.io.ErrOut, "%s\n", st.reset)
			r.thinking = false
		}
		r.endText()
	case protocol.ToolCall:
		r.spinStop()
		r.endText()
		v := &toolView{name: e.Tool, summary: summarizeArgs(e.Tool, e.Args), started: time.Now()}
		r.tools[e.CallID] = v
		fmt.Fprintf(r.io.ErrOut, "%s●%s %s%s%s %s\n", st.cyan, st.reset, st.bold, e.Tool, st.reset, v.summary)
		r.spinStart("running " + e.Tool)
	case protocol.ToolOutput:
		if v := r.tools[e.CallID]; v != nil && v.output.Len() < 1<<16 {
			v.output.WriteString(e.Content)
		}
	case protocol.ToolEnd:
		r.spinStop()
		v := r.tools[e.CallID]
		if v == nil {
			return
		}
		delete(r.tools, e.CallID)
		for _, line := range tailLines(v.output.String(), 8) {
			fmt.Fprintf(r.io.ErrOut, "  %s│ %s%s\n", st.dim, line, st.reset)
		}
		took := time.Since(v.started).Round(10 * time.Millisecond)
		if e.Success {
			fmt.Fprintf(r.io.ErrOut, "  %s✓%s %s %s(%s)%s\n", st.green, st.reset, v.name, st.dim, took, st.reset)
		} else {
			fmt.Fprintf(r.io.ErrOut, "  %s✗%s %s failed %s(%s)%s\n", st.red, st.reset, v.name, st.dim, took, st.reset)
		}
		if len(r.tools) > 0 {
			r.spinStart("running tools")
		}
	case protocol.Status:
		r.spinStop()
		r.endText()
		fmt.Fprintf(r.io.ErrOut, "%s%s%s\n", st.dim, e.Message, st.reset)
	case protocol.Error:
		// The run's failure is reported once, as the command's one-line
		// reason; here only the stream is tidied up.
		r.spinStop()
		r.endText()
	}
}

func (r *renderer) endText() {
	if r.inText {
		fmt.Fprintln(r.io.Out)
		r.inText = false
	}
}

func (r *renderer) spinStart(label string) {
	if r.spin != nil {
		r.spin.start(label)
	}
}

func (r *renderer) spinStop() {
	if r.spin != nil {
		r.spin.stop()
	}
}

// finish prints the usage line.
func (r *renderer) finish(res agent.Result, took time.Duration, replay bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spinStop()
	r.endText()
	st := r.st
	u := res.Usage
	cost := fmt.Sprintf("$%.4f", res.CostUSD)
	if !res.CostKnown {
		cost += " (pricing unknown)"
	}
	if replay {
		cost = "$0 (replay)"
	}
	fmt.Fprintf(r.io.ErrOut, "%s%s · %s%s\n", st.dim,
		usageSummary(res.Iterations, res.Tools.CallsSucceeded+res.Tools.CallsFailed,
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

// summarizeArgs renders a tool call's arguments in one short line.
func summarizeArgs(tool string, args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, key := range []string{"command", "path", "pattern"} {
		if v, ok := m[key].(string); ok {
			s := oneLine(v, 100)
			if key == "pattern" {
				if p, ok := m["path"].(string); ok && p != "" {
					s += " in " + p
				}
			}
			return s
		}
	}
	return oneLine(string(args), 100)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
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
		lines[i] = oneLine(l, 160)
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
