package agentcli

import (
	"encoding/json"

	"github.com/maestro-run/maestro/internal/protocol"
)

// opencodeParser reads `opencode run --format json --thinking` (without
// --thinking, OpenCode leaves reasoning parts off the stream).
//
// Mapping: step_start → session id and response_start (one step = one
// model call); text → chunk (emitted once, complete); reasoning → thinking
// chunk; tool_use (only at completion) → tool_call, tool_start,
// tool_output, tool_end, held until the step's response_end; step_finish →
// response_end with the step's tokens and cost; error → structured error
// (message from error.data.message); done → end marker. The Result's text
// is the last text part.
type opencodeParser struct {
	lastText string
	costSum  float64
	usageSum protocol.Usage
	failed   bool
	// done: the last step finished the turn (a reason other than
	// tool-calls) and no step started after it.
	done bool
}

type opencodeTokens struct {
	Input     int64         `json:"input"`
	Output    int64         `json:"output"`
	Reasoning int64         `json:"reasoning"`
	Cache     opencodeCache `json:"cache"`
}

type opencodeCache struct {
	Read  int64 `json:"read"`
	Write int64 `json:"write"`
}

type opencodePart struct {
	Type   string          `json:"type"`
	Text   string          `json:"text"`
	Tool   string          `json:"tool"`
	CallID string          `json:"callID"`
	Reason string          `json:"reason"`
	Cost   float64         `json:"cost"`
	State  json.RawMessage `json:"state"`
	Tokens *opencodeTokens `json:"tokens"`
}

type opencodeError struct {
	Name    string            `json:"name"`
	Message string            `json:"message"`
	Data    opencodeErrorData `json:"data"`
}

type opencodeErrorData struct {
	Message    string `json:"message"`
	StatusCode int    `json:"statusCode"`
}

type opencodeLine struct {
	envelope
	SessionID string         `json:"sessionID"`
	Part      opencodePart   `json:"part"`
	Error     *opencodeError `json:"error"`
}

// opencodeState is a tool part's state.
type opencodeState struct {
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
	Output string          `json:"output"`
	Error  string          `json:"error"`
}

// newOpencodeFormat reads `opencode run --format json`.
func newOpencodeFormat() format[opencodeLine, *opencodeLine] {
	p := &opencodeParser{}
	m := map[string]handler[*opencodeLine]{
		"step_start": func(st *state, _ *opencodeLine, _ []byte) bool {
			p.done = false
			st.closeResponse(protocol.Usage{}, 0)
			st.openResponse()
			return true
		},
		"text": func(st *state, l *opencodeLine, _ []byte) bool {
			st.chunk(l.Part.Text, false)
			p.lastText = l.Part.Text
			return true
		},
		"reasoning": func(st *state, l *opencodeLine, _ []byte) bool {
			st.chunk(l.Part.Text, true)
			return true
		},
		"tool_use":    p.toolUse,
		"step_finish": p.stepFinish,
		"error":       p.error,
		"done":        ignore[*opencodeLine],
	}
	return format[opencodeLine, *opencodeLine]{
		each: func(st *state, l *opencodeLine) { st.setSession(l.SessionID) },
		on:   m, finish: p.finish,
	}
}

// toolUse: a tool part, only at completion; its events are held until the
// step's response ends.
func (p *opencodeParser) toolUse(st *state, l *opencodeLine, _ []byte) bool {
	// encoding/json fills what it can of a state of the wrong shape.
	var s opencodeState
	_ = json.Unmarshal(l.Part.State, &s)
	const hold = true
	st.toolCall(l.Part.CallID, l.Part.Tool, s.Input, hold)
	out := s.Output
	if s.Error != "" {
		out = s.Error
	}
	st.toolOutput(l.Part.CallID, out, hold)
	code := ""
	if s.Status != "completed" {
		code = "tool_error"
	}
	st.toolEnd(l.Part.CallID, s.Status == "completed", code, hold)
	return true
}

func (p *opencodeParser) stepFinish(st *state, l *opencodeLine, _ []byte) bool {
	var u protocol.Usage
	if t := l.Part.Tokens; t != nil {
		u = protocol.Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning,
			CacheReadTokens: t.Cache.Read, CacheWriteTokens: t.Cache.Write, ModelID: st.model}
	}
	st.closeResponse(u, l.Part.Cost)
	p.done = l.Part.Reason != "tool-calls"
	p.costSum += l.Part.Cost
	p.usageSum = addUsage(p.usageSum, u)
	return true
}

func (p *opencodeParser) error(st *state, l *opencodeLine, _ []byte) bool {
	msg, status := "the agent reported an error", 0
	if e := l.Error; e != nil {
		status = e.Data.StatusCode
		switch {
		case e.Data.Message != "":
			msg = e.Data.Message
		case e.Message != "":
			msg = e.Message
		default:
			msg = e.Name
		}
	}
	st.closeResponse(protocol.Usage{}, 0)
	st.fail(msg, status)
	p.failed = true
	return true
}

func (p *opencodeParser) finish(st *state) {
	st.closeResponse(protocol.Usage{}, 0)
	if st.sessionID == "" && !p.failed {
		return
	}
	u := p.usageSum
	u.TotalTokens = u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
	u.TotalCostUSD = p.costSum
	u.Provider = st.opt.Provider
	subtype := "success"
	if p.failed {
		subtype = "error"
	}
	st.finishResult(&Result{Text: p.lastText, IsError: p.failed, Subtype: subtype, Usage: u, CostUSD: p.costSum})
	st.inferred = !p.done && !p.failed
}
