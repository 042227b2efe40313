package replay

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/llm"
)

// Provider plays a scenario as an llm.Provider. It keeps no state between
// calls: each call plays frame k, where k is the number of assistant
// messages in the request, so a resumed session continues at the right
// frame and a retried call replays the same one. It is safe for
// concurrent use.
type Provider struct {
	s *Scenario
}

// New returns a provider playing s, which must be valid (from [Parse],
// [Load], [Demo], or checked with [Scenario.Validate]).
func New(s *Scenario) *Provider { return &Provider{s: s} }

// Name returns "replay".
func (p *Provider) Name() string { return ProviderName }

// Model returns "maestro-replay-v1".
func (p *Provider) Model() string { return Model }

// Scenario returns the scenario being played.
func (p *Provider) Scenario() *Scenario { return p.s }

// Stream plays the frame the request is at. Deltas are yielded as the
// frame's statements play; the call ends with EventDone carrying the whole
// message, or with an *llm.Error: the frame's error statement, a tool
// result that does not match the previous frame's expectedResult, or a
// call past the last frame (all KindScript, except transient error
// statements, which are KindStream).
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(llm.Event{}, p.cancelled(ctx))
			return
		}
		k := 0
		for _, m := range req.Messages {
			if m.Role == llm.RoleAssistant {
				k++
			}
		}
		if k >= len(p.s.Frames) && p.s.bundled {
			yield(llm.Event{}, p.scriptError(fmt.Sprintf("the replay demo has ended: its %d scripted model turns were played, and it calls no model. %s.",
				len(p.s.Frames), demoGoOn)))
			return
		}
		if k >= len(p.s.Frames) {
			yield(llm.Event{}, p.scriptError(fmt.Sprintf("scripted scenario %s complete: the model was called for frame %d but the scenario has %d frames",
				p.s.ID, k, len(p.s.Frames))))
			return
		}
		if k > 0 {
			if err := p.checkResults(k, req.Messages); err != nil {
				yield(llm.Event{}, err)
				return
			}
		}
		pl := &player{p: p, ctx: ctx, yield: yield, frame: k, parts: []llm.Part{}}
		pl.play()
	}
}

func (p *Provider) scriptError(msg string) *llm.Error {
	return &llm.Error{Kind: llm.KindScript, Provider: ProviderName, Message: msg}
}

func (p *Provider) cancelled(ctx context.Context) *llm.Error {
	return &llm.Error{Kind: llm.KindCancelled, Provider: ProviderName, Message: "the scripted model call was cancelled", Err: context.Cause(ctx)}
}

// checkResults compares frame k-1's tool calls that carry an
// expectedResult with the results in the request's last user message.
func (p *Provider) checkResults(k int, msgs []llm.Message) error {
	prev := p.s.Frames[k-1]
	for _, st := range prev.Statements {
		if st.Kind == KindError {
			return nil // the frame failed before its tool calls were made
		}
	}
	var results map[string]*llm.ToolResult
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			results = map[string]*llm.ToolResult{}
			for _, part := range msgs[i].Parts {
				if part.Type == llm.PartToolResult && part.ToolResult != nil {
					results[part.ToolResult.CallID] = part.ToolResult
				}
			}
			break
		}
	}
	var problems, demo []string
	for i, st := range prev.Statements {
		if st.Kind != KindToolCall || (st.ExpectedResult != ExpectSuccess && st.ExpectedResult != ExpectError) {
			continue
		}
		id := p.s.callID(k-1, i)
		r, ok := results[id]
		if !ok {
			problems = append(problems, fmt.Sprintf("frame %d's %s call %s was expected to end with %s, but the request carries no result for it",
				k-1, st.Tool, id, st.ExpectedResult))
			demo = append(demo, fmt.Sprintf("its %s call did not finish (the turn was interrupted)", st.Tool))
			continue
		}
		actual := ExpectSuccess
		if r.IsError {
			actual = ExpectError
		}
		if actual != st.ExpectedResult {
			problems = append(problems, fmt.Sprintf("frame %d's %s call %s was expected to end with %s, but it ended with %s: %s",
				k-1, st.Tool, id, st.ExpectedResult, actual, excerpt(r.Content, 200)))
			demo = append(demo, fmt.Sprintf("its %s call ended with %s, not %s: %s", st.Tool, actual, st.ExpectedResult, excerpt(r.Content, 80)))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if p.s.bundled {
		// The demo's user did not write the script: say that the
		// demo cannot go on and what to do, not which frame it is at.
		return p.scriptError(fmt.Sprintf("the replay demo cannot go on: it is a fixed script, and %s. %s.", demo[0], demoGoOn))
	}
	return p.scriptError(fmt.Sprintf("scripted scenario %s cannot play frame %d: %s", p.s.ID, k, strings.Join(problems, "; ")))
}

// excerpt shortens s to at most n runes on one line.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "(no output)"
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// player plays one frame.
type player struct {
	p     *Provider
	ctx   context.Context
	yield func(llm.Event, error) bool
	frame int

	parts []llm.Part
	usage llm.Usage
	calls bool
	stop  llm.StopReason
}

// play runs the frame's statements and ends the stream.
func (pl *player) play() {
	for i, st := range pl.p.s.Frames[pl.frame].Statements {
		if pl.ctx.Err() != nil {
			pl.yield(llm.Event{}, pl.p.cancelled(pl.ctx))
			return
		}
		if !pl.statement(i, st) {
			return
		}
	}
	stop := pl.stop
	if stop == "" {
		stop = llm.StopEndTurn
		if pl.calls {
			stop = llm.StopToolUse
		}
	}
	pl.yield(llm.Event{Type: llm.EventDone, Response: &llm.Response{
		Message:    llm.Message{Role: llm.RoleAssistant, Parts: pl.parts},
		Usage:      pl.usage,
		StopReason: stop,
		Model:      Model,
	}}, nil)
}

// statement plays one statement; false means the stream has ended.
func (pl *player) statement(i int, st Statement) bool {
	switch st.Kind {
	case KindText:
		units := st.Chunks
		if st.StreamMS > 0 && units == nil {
			units = strings.Split(st.Text, "") // one rune each
		}
		if units == nil {
			units = []string{st.Text}
		}
		if !pl.stream(llm.EventTextDelta, units, time.Duration(st.StreamMS)*time.Millisecond) {
			return false
		}
		pl.appendText(llm.PartText, st.Text)
	case KindThinking:
		if !pl.stream(llm.EventThinkingDelta, []string{st.Text}, 0) {
			return false
		}
		pl.appendText(llm.PartThinking, st.Text)
	case KindDelay:
		if err := sleep(pl.ctx, time.Duration(st.MS)*time.Millisecond); err != nil {
			pl.yield(llm.Event{}, pl.p.cancelled(pl.ctx))
			return false
		}
	case KindToolCall:
		input := st.Input
		if len(input) == 0 {
			input = []byte("{}")
		}
		pl.parts = append(pl.parts, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{
			ID:    pl.p.s.callID(pl.frame, i),
			Name:  st.Tool,
			Input: append([]byte(nil), input...),
		}})
		pl.calls = true
	case KindUsage:
		pl.usage.Add(st.Usage)
	case KindError:
		e := pl.p.scriptError(st.Message)
		if st.ErrorType == ErrorTransient {
			e.Kind, e.Message = llm.KindStream, st.Message+" Try again."
		}
		pl.yield(llm.Event{}, e)
		return false
	case KindWaitForUser:
		pl.stop = llm.StopEndTurn
	case KindEnd:
		switch st.Reason {
		case EndAborted:
			pl.stop = llm.StopAborted
		case EndLimitExceeded:
			pl.stop = llm.StopMaxTokens
		default:
			pl.stop = llm.StopEndTurn
		}
	}
	return true
}

// stream yields one delta per unit, spreading total over them (each
// delta waits its share first).
func (pl *player) stream(typ llm.EventType, units []string, total time.Duration) bool {
	var waited time.Duration
	for i, u := range units {
		if total > 0 {
			next := time.Duration(float64(total) * float64(i+1) / float64(len(units)))
			if err := sleep(pl.ctx, next-waited); err != nil {
				pl.yield(llm.Event{}, pl.p.cancelled(pl.ctx))
				return false
			}
			waited = next
		}
		if u == "" {
			continue
		}
		if !pl.yield(llm.Event{Type: typ, Delta: u}, nil) {
			return false
		}
	}
	return true
}

// appendText adds text to the message, merging with a preceding part of
// the same type.
func (pl *player) appendText(typ llm.PartType, s string) {
	if s == "" {
		return
	}
	if n := len(pl.parts); n > 0 && pl.parts[n-1].Type == typ {
		pl.parts[n-1].Text += s
		return
	}
	pl.parts = append(pl.parts, llm.Part{Type: typ, Text: s})
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
