package agentcli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

// claudeParser reads Claude Code's --output-format stream-json (and Qwen
// Code's, which uses the same envelopes).
//
// Mapping: system/init → session id and model; system/api_retry → a status
// and a Retry; assistant text/thinking blocks → response_start/chunk (one
// response per model message id; Qwen's thinking-only message, which has
// an id of its own and no usage, shares the next message's response);
// tool_use blocks → the response ends, then tool_call + tool_start; user
// tool_result blocks → tool_output + tool_end; result → the open response
// ends with the turn's usage minus what earlier responses reported (so the
// response_end usages sum to the CLI's total) and total_cost_usd, and the
// Result. A result with is_error (or Qwen's "[API Error: …]" text) is a
// structured error.
type claudeParser struct {
	qwen bool
	// msgID is the model message the open (or last) response belongs to.
	msgID string
	// msgUsage is the usage of the current model message.
	msgUsage protocol.Usage
	// lastText accumulates non-thinking text for a missing result.
	lastText strings.Builder
	// synthetic holds the text of a <synthetic> assistant message (Claude
	// writes API errors that way).
	synthetic string
	// streamed is the message id whose text came as partial deltas.
	streamed string
	// closed is the message id whose response already ended at a tool_use.
	closed string
	// turnBase is the usage reported when the current turn began;
	// costSoFar the total_cost_usd of the stream's last result.
	turnBase  protocol.Usage
	costSoFar float64
	// thinkingOnly is set while the current message has had only thinking
	// blocks (Qwen sends a model call's reasoning as its own assistant
	// message, with a new id and no usage, before the answer's message).
	thinkingOnly bool
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (u claudeUsage) protocol(model string) protocol.Usage {
	return protocol.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens, ModelID: model}
}

// claudeBlock is one content block of a message, on the stream and in
// Claude Code's stored session files alike.
type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type claudeMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *claudeUsage    `json:"usage"`
}

// claudeStreamEvent is the API streaming event of a stream_event line.
type claudeStreamEvent struct {
	Type    string `json:"type"`
	Message struct {
		ID string `json:"id"`
	} `json:"message"`
	Delta struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"delta"`
}

type claudeLine struct {
	envelope
	Subtype   string        `json:"subtype"`
	SessionID string        `json:"session_id"`
	Model     string        `json:"model"`
	Message   claudeMessage `json:"message"`
	// system/init
	SlashCommands []string `json:"slash_commands"`
	// system/api_retry
	Attempt     int    `json:"attempt"`
	MaxRetries  int    `json:"max_retries"`
	ErrorStatus int    `json:"error_status"`
	ErrorText   any    `json:"error"`
	Status      string `json:"status"`
	// result
	IsError           bool            `json:"is_error"`
	Result            string          `json:"result"`
	APIErrorStatus    int             `json:"api_error_status"`
	Usage             *claudeUsage    `json:"usage"`
	TotalCostUSD      float64         `json:"total_cost_usd"`
	NumTurns          int             `json:"num_turns"`
	DurationMS        int64           `json:"duration_ms"`
	PermissionDenials json.RawMessage `json:"permission_denials"`
	// ModelUsageSinceLastResult is the per-model usage and cost of this
	// turn (Claude Code 2.1; total_cost_usd is the session's running
	// total, earlier turns and resumed processes included).
	ModelUsageSinceLastResult map[string]struct {
		CostUSD float64 `json:"costUSD"`
	} `json:"model_usage_since_last_result"`
	// Event is a stream_event's API event (partial messages).
	Event *claudeStreamEvent `json:"event"`
	// Errors explain an is_error result with no result text (Claude Code
	// 2.1: "No conversation found with session ID: …" on a bad resume).
	Errors json.RawMessage `json:"errors"`
}

// newClaudeFormat reads Claude Code's stream (Qwen Code's when qwen).
func newClaudeFormat(qwen bool) format[claudeLine, *claudeLine] {
	p := &claudeParser{qwen: qwen}
	m := map[string]handler[*claudeLine]{
		"system": p.system, "assistant": p.assistant, "user": p.user, "result": p.result,
	}
	// Partial-message events (--include-partial-messages) carry the
	// token-level deltas of the assistant lines that follow; Qwen also
	// reports goal state there.
	m["stream_event"] = p.streamEvent
	on(m, ignore, "control_request", "control_response", "keep_alive", "rate_limit_event")
	return format[claudeLine, *claudeLine]{each: p.each, on: m, finish: p.finish}
}

// blocks decodes message content: a list of blocks, or a string (one text
// block).
func blocks(raw json.RawMessage) []claudeBlock {
	var bl []claudeBlock
	if json.Unmarshal(raw, &bl) == nil {
		return bl
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return []claudeBlock{{Type: "text", Text: s}}
	}
	return nil
}

// endMessage closes the open response with the current message's usage.
func (p *claudeParser) endMessage(st *state) {
	if st.respID != "" {
		st.closeResponse(p.msgUsage, 0)
	}
	p.msgUsage = protocol.Usage{}
}

// each: every line may carry the session id.
func (p *claudeParser) each(st *state, l *claudeLine) { st.setSession(l.SessionID) }

// system: init → session id and model; api_retry → a status and a Retry.
func (p *claudeParser) system(st *state, l *claudeLine, _ []byte) bool {
	switch l.Subtype {
	case "init", "session_start":
		if l.Model != "" {
			st.model = strings.TrimSuffix(l.Model, "[1m]")
		}
		if len(l.SlashCommands) > 0 {
			st.slashCommands = l.SlashCommands
		}
	case "api_retry":
		msg := fmt.Sprint(l.ErrorText)
		st.ev.Retry = &Retry{Attempt: l.Attempt, Max: l.MaxRetries, Status: l.ErrorStatus, Message: msg}
		st.status(fmt.Sprintf("Model call failed (%s, HTTP %d); the agent retries (attempt %d of %d)", msg, l.ErrorStatus, l.Attempt, l.MaxRetries))
	}
	return true
}

// assistant: one model message's blocks.
func (p *claudeParser) assistant(st *state, l *claudeLine, _ []byte) bool {
	m := l.Message
	if m.Model == "<synthetic>" {
		for _, b := range blocks(m.Content) {
			p.synthetic += b.Text
		}
		return true
	}
	if m.Model != "" {
		st.model = m.Model
	}
	p.newMessage(st, m.ID)
	if m.Usage != nil {
		p.msgUsage = m.Usage.protocol(st.model)
	}
	// Text already streamed as deltas is not sent again.
	streamed := p.streamed == m.ID
	for _, b := range blocks(m.Content) {
		switch b.Type {
		case "text":
			if p.qwen && strings.HasPrefix(b.Text, "[API Error:") {
				p.synthetic += b.Text
				continue
			}
			if !streamed {
				st.chunk(b.Text, false)
			}
			p.lastText.WriteString(b.Text)
		case "thinking":
			if !streamed {
				st.chunk(b.Thinking, true)
			}
			continue
		case "tool_use":
			// The model call is over: its response ends, the tool runs.
			if p.closed != p.msgID {
				st.openResponse()
				p.endMessage(st)
				p.closed = p.msgID
			}
			st.toolCall(b.ID, b.Name, b.Input, false)
		}
		p.thinkingOnly = false
	}
	return true
}

// newMessage starts model message id (a no-op for the current one).
func (p *claudeParser) newMessage(st *state, id string) {
	if id == p.msgID {
		return
	}
	// Qwen's reasoning message and the answer that follows are one model
	// call: one response.
	u := p.msgUsage
	if !p.qwen || !p.thinkingOnly || st.respID == "" || u.InputTokens+u.OutputTokens+u.CacheReadTokens+u.CacheWriteTokens > 0 {
		p.endMessage(st)
	}
	p.msgID = id
	p.thinkingOnly = true
}

// streamEvent: a partial-message event. message_start starts the model
// message; text and thinking deltas are chunks (token-level streaming).
func (p *claudeParser) streamEvent(st *state, l *claudeLine, _ []byte) bool {
	e := l.Event
	if e == nil {
		return true
	}
	switch e.Type {
	case "message_start":
		if e.Message.ID != "" {
			p.newMessage(st, e.Message.ID)
		}
	case "content_block_delta":
		switch e.Delta.Type {
		case "text_delta":
			p.streamed = p.msgID
			st.chunk(e.Delta.Text, false)
			p.thinkingOnly = false
		case "thinking_delta":
			p.streamed = p.msgID
			st.chunk(e.Delta.Thinking, true)
		}
	}
	return true
}

// user: tool results.
func (p *claudeParser) user(st *state, l *claudeLine, _ []byte) bool {
	p.endMessage(st)
	for _, b := range blocks(l.Message.Content) {
		if b.Type != "tool_result" {
			continue
		}
		st.toolOutput(b.ToolUseID, textOf(b.Content), false)
		code := ""
		if b.IsError {
			code = "tool_error"
		}
		st.toolEnd(b.ToolUseID, !b.IsError, code, false)
	}
	return true
}

// result: the turn's end.
func (p *claudeParser) result(st *state, l *claudeLine, raw []byte) bool {
	cost := p.turnCost(l)
	r := &Result{SessionID: l.SessionID, Text: l.Result, IsError: l.IsError, Subtype: l.Subtype,
		CostUSD: cost, NumTurns: l.NumTurns, DurationMS: l.DurationMS}
	var denials []json.RawMessage
	if json.Unmarshal(l.PermissionDenials, &denials) == nil {
		r.PermissionDenials = len(denials)
	}
	// What earlier responses of this turn reported (a stream may hold
	// several turns: stream-json input).
	turnReported := subUsage(st.reported, p.turnBase)
	if l.Usage != nil {
		r.Usage = l.Usage.protocol(st.model)
		if p.qwen {
			// Qwen's result usage is a running total of the session (a
			// resumed turn includes the earlier ones, and 0.24 counts each
			// call twice): the turn's usage is that of its messages.
			r.Usage = addUsage(turnReported, p.msgUsage)
			r.Usage.ModelID = st.model
		}
		r.Usage.TotalTokens = r.Usage.InputTokens + r.Usage.OutputTokens + r.Usage.CacheReadTokens + r.Usage.CacheWriteTokens
		r.Usage.TotalCostUSD = cost
		r.Usage.Provider = st.opt.Provider
	}
	if r.Text == "" && !l.IsError {
		r.Text = p.lastText.String()
	}
	// The last response gets what the turn total says was not yet
	// reported (Claude's per-message stream usage is a snapshot).
	if st.respID != "" {
		u := p.msgUsage
		if l.Usage != nil {
			rest := subUsage(r.Usage, turnReported)
			if rest.InputTokens+rest.OutputTokens+rest.CacheReadTokens+rest.CacheWriteTokens > 0 {
				u = rest
			}
		}
		st.closeResponse(u, cost)
	}
	p.turnBase = st.reported
	p.msgUsage = protocol.Usage{}
	if l.IsError || p.synthetic != "" {
		r.IsError = true
		st.fail(p.errorMessage(l, raw), l.APIErrorStatus)
	}
	st.finishResult(r)
	return true
}

// turnCost is the cost of the turn l ends: the costs since the last
// result when Claude names them, else what total_cost_usd grew by in this
// stream.
func (p *claudeParser) turnCost(l *claudeLine) float64 {
	total := l.TotalCostUSD
	defer func() { p.costSoFar = max(p.costSoFar, total) }()
	if l.ModelUsageSinceLastResult != nil {
		var c float64
		for _, m := range l.ModelUsageSinceLastResult {
			c += m.CostUSD
		}
		return c
	}
	return max(total-p.costSoFar, 0)
}

// errorMessage explains an error result: error.message, the result text,
// the errors list, a synthetic message's text, else the subtype.
func (p *claudeParser) errorMessage(l *claudeLine, raw []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	if l.Result != "" {
		return l.Result
	}
	var errs []string
	if json.Unmarshal(l.Errors, &errs) == nil && len(errs) > 0 {
		if msg := strings.Join(errs, "; "); msg != "" {
			return msg
		}
	}
	if p.synthetic != "" {
		return p.synthetic
	}
	return "the agent reported an error (" + l.Subtype + ")"
}

func (p *claudeParser) finish(st *state) {
	p.endMessage(st)
	if st.result == nil && p.synthetic != "" {
		st.fail(p.synthetic, 0)
	}
}
