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
	r    jsonReader
	// msgID is the model message the open (or last) response belongs to.
	msgID string
	// msgUsage is the usage of the current model message.
	msgUsage protocol.Usage
	// lastText accumulates non-thinking text for a missing result.
	lastText strings.Builder
	// synthetic holds the text of a <synthetic> assistant message (Claude
	// writes API errors that way).
	synthetic string
	// closed is the message id whose response already ended at a tool_use.
	closed string
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

type claudeLine struct {
	Type      string        `json:"type"`
	Subtype   string        `json:"subtype"`
	SessionID string        `json:"session_id"`
	Model     string        `json:"model"`
	Message   claudeMessage `json:"message"`
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
	// Errors explain an is_error result with no result text (Claude Code
	// 2.1: "No conversation found with session ID: …" on a bad resume).
	Errors json.RawMessage `json:"errors"`
}

func (p *claudeParser) blocks(raw json.RawMessage) []claudeBlock {
	if bl, ok := p.fastBlocks(raw); ok {
		return bl
	}
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

func (p *claudeParser) line(st *state, raw []byte) lineResult {
	var l claudeLine
	if res := decodeLine(&p.r, raw, &l); res != lineOK {
		return res
	}
	if !p.handle(st, &l, raw) {
		return lineUnknown
	}
	return lineOK
}

func (p *claudeParser) handle(st *state, l *claudeLine, raw []byte) bool {
	st.setSession(l.SessionID)
	switch l.Type {
	case "system":
		switch l.Subtype {
		case "init", "session_start":
			if l.Model != "" {
				st.model = strings.TrimSuffix(l.Model, "[1m]")
			}
		case "api_retry":
			msg := fmt.Sprint(l.ErrorText)
			st.ev.Retry = &Retry{Attempt: l.Attempt, Max: l.MaxRetries, Status: l.ErrorStatus, Message: msg}
			st.status(fmt.Sprintf("Model call failed (%s, HTTP %d); the agent retries (attempt %d of %d)", msg, l.ErrorStatus, l.Attempt, l.MaxRetries))
		}
		return true
	case "stream_event":
		// Partial-message events (--include-partial-messages) duplicate the
		// assistant lines; Qwen also reports goal state here.
		return true
	case "assistant":
		m := l.Message
		if m.Model == "<synthetic>" {
			for _, b := range p.blocks(m.Content) {
				p.synthetic += b.Text
			}
			return true
		}
		if m.Model != "" {
			st.model = m.Model
		}
		if m.ID != p.msgID {
			// Qwen's reasoning message and the answer that follows are one
			// model call: one response.
			u := p.msgUsage
			if !p.qwen || !p.thinkingOnly || st.respID == "" || u.InputTokens+u.OutputTokens+u.CacheReadTokens+u.CacheWriteTokens > 0 {
				p.endMessage(st)
			}
			p.msgID = m.ID
			p.thinkingOnly = true
		}
		if m.Usage != nil {
			p.msgUsage = m.Usage.protocol(st.model)
		}
		for _, b := range p.blocks(m.Content) {
			switch b.Type {
			case "text":
				if p.qwen && strings.HasPrefix(b.Text, "[API Error:") {
					p.synthetic += b.Text
					continue
				}
				st.chunk(b.Text, false)
				p.lastText.WriteString(b.Text)
			case "thinking":
				st.chunk(b.Thinking, true)
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
	case "user":
		p.endMessage(st)
		for _, b := range p.blocks(l.Message.Content) {
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
	case "result":
		r := &Result{SessionID: l.SessionID, Text: l.Result, IsError: l.IsError, Subtype: l.Subtype,
			CostUSD: l.TotalCostUSD, NumTurns: l.NumTurns, DurationMS: l.DurationMS}
		if n, ok := countArray(&p.r, l.PermissionDenials); ok {
			r.PermissionDenials = n
		} else {
			var denials []json.RawMessage
			if json.Unmarshal(l.PermissionDenials, &denials) == nil {
				r.PermissionDenials = len(denials)
			}
		}
		if l.Usage != nil {
			r.Usage = l.Usage.protocol(st.model)
			r.Usage.TotalTokens = r.Usage.InputTokens + r.Usage.OutputTokens + r.Usage.CacheReadTokens + r.Usage.CacheWriteTokens
			r.Usage.TotalCostUSD = l.TotalCostUSD
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
				rest := subUsage(r.Usage, st.reported)
				if rest.InputTokens+rest.OutputTokens+rest.CacheReadTokens+rest.CacheWriteTokens > 0 {
					u = rest
				}
			}
			st.closeResponse(u, l.TotalCostUSD)
		}
		p.msgUsage = protocol.Usage{}
		if l.IsError || p.synthetic != "" {
			msg := l.Result
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
				msg = e.Error.Message
			}
			if msg == "" {
				var errs []string
				if json.Unmarshal(l.Errors, &errs) == nil {
					msg = strings.Join(errs, "; ")
				}
			}
			if msg == "" {
				msg = p.synthetic
			}
			if msg == "" {
				msg = "the agent reported an error (" + l.Subtype + ")"
			}
			r.IsError = true
			st.fail(msg, l.APIErrorStatus)
		}
		st.finishResult(r)
		return true
	case "control_request", "control_response", "keep_alive", "rate_limit_event":
		return true
	}
	return false
}

func (p *claudeParser) finish(st *state) {
	p.endMessage(st)
	if st.result == nil && p.synthetic != "" {
		st.fail(p.synthetic, 0)
	}
}

// The read methods fill the line structs on the fast path (see jsonReader
// and object); each fields value lists its struct's json tags in the order
// of the read's cases.

var claudeLineNames = newFields("type", "subtype", "session_id", "model", "message", "attempt", "max_retries",
	"error_status", "error", "status", "is_error", "result", "api_error_status", "usage", "total_cost_usd",
	"num_turns", "duration_ms", "permission_denials", "errors")

// read fills l from one line (see jsonReader).
func (l *claudeLine) read(r *jsonReader) {
	r.object(claudeLineNames, func(i int) {
		switch i {
		case 0:
			r.str(&l.Type)
		case 1:
			r.str(&l.Subtype)
		case 2:
			r.str(&l.SessionID)
		case 3:
			r.str(&l.Model)
		case 4:
			if r.structStart() {
				l.Message.read(r)
			}
		case 5:
			r.int(&l.Attempt)
		case 6:
			r.int(&l.MaxRetries)
		case 7:
			r.int(&l.ErrorStatus)
		case 8:
			// An interface{} field: strings and null directly, the rest
			// (rare: api_retry objects) through encoding/json.
			switch r.peek() {
			case 'n':
				r.literal("null")
				l.ErrorText = nil
			case '"':
				var s string
				r.str(&s)
				l.ErrorText = s
			default:
				if v := r.raw(); !r.bad && json.Unmarshal(v, &l.ErrorText) != nil {
					r.fail()
				}
			}
		case 9:
			r.str(&l.Status)
		case 10:
			r.bool(&l.IsError)
		case 11:
			r.str(&l.Result)
		case 12:
			r.int(&l.APIErrorStatus)
		case 13:
			if u := ptrStart(r, &l.Usage); u != nil {
				u.read(r)
			}
		case 14:
			r.float(&l.TotalCostUSD)
		case 15:
			r.int(&l.NumTurns)
		case 16:
			r.int64(&l.DurationMS)
		case 17:
			r.rawMsg(&l.PermissionDenials)
		case 18:
			r.rawMsg(&l.Errors)
		}
	})
}

var claudeMessageNames = newFields("id", "model", "content", "usage")

func (m *claudeMessage) read(r *jsonReader) {
	r.object(claudeMessageNames, func(i int) {
		switch i {
		case 0:
			r.str(&m.ID)
		case 1:
			r.str(&m.Model)
		case 2:
			r.rawMsg(&m.Content)
		case 3:
			if u := ptrStart(r, &m.Usage); u != nil {
				u.read(r)
			}
		}
	})
}

var claudeUsageNames = newFields("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")

func (u *claudeUsage) read(r *jsonReader) {
	r.object(claudeUsageNames, func(i int) {
		switch i {
		case 0:
			r.int64(&u.InputTokens)
		case 1:
			r.int64(&u.OutputTokens)
		case 2:
			r.int64(&u.CacheReadInputTokens)
		case 3:
			r.int64(&u.CacheCreationInputTokens)
		}
	})
}

var claudeBlockNames = newFields("type", "text", "thinking", "id", "name", "input", "tool_use_id", "content", "is_error")

func (b *claudeBlock) read(r *jsonReader) {
	r.object(claudeBlockNames, func(i int) {
		switch i {
		case 0:
			r.str(&b.Type)
		case 1:
			r.str(&b.Text)
		case 2:
			r.str(&b.Thinking)
		case 3:
			r.str(&b.ID)
		case 4:
			r.str(&b.Name)
		case 5:
			r.rawMsg(&b.Input)
		case 6:
			r.str(&b.ToolUseID)
		case 7:
			r.rawMsg(&b.Content)
		case 8:
			r.bool(&b.IsError)
		}
	})
}

// fastBlocks is blocks on the fast reader (ok false: use encoding/json).
func (p *claudeParser) fastBlocks(raw json.RawMessage) ([]claudeBlock, bool) {
	r := &p.r
	r.reset(raw)
	switch r.peek() {
	case 0:
		return nil, len(raw) == 0
	case 'n':
		r.literal("null")
		return nil, r.end()
	case '"':
		var s string
		r.str(&s)
		if !r.end() {
			return nil, false
		}
		if s == "" {
			return nil, true
		}
		return []claudeBlock{{Type: "text", Text: s}}, true
	case '[':
		var bl []claudeBlock
		r.arr()
		for first := true; r.elem(first); first = false {
			bl = append(bl, claudeBlock{})
			if !r.null() {
				bl[len(bl)-1].read(r)
			}
		}
		if !r.end() {
			return nil, false
		}
		if bl == nil {
			bl = []claudeBlock{}
		}
		return bl, true
	}
	return nil, false
}
