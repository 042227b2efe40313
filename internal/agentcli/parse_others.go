package agentcli

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

// codexParser reads `codex exec --json` (ThreadEvent JSONL).
//
// Mapping: thread.started → session id; agent_message / reasoning items →
// response chunks (text / thinking); command_execution, file_change,
// mcp_tool_call and web_search items → tool_call, tool_start, tool_output
// (growth of aggregated_output), tool_end; todo_list / plan / error items →
// status; top-level error "Reconnecting… n/m" → status + Retry, other
// errors → structured error; turn.failed → structured error and an error
// Result; turn.completed → the open response ends with the usage delta
// (Codex reports the thread's running total; cached_input_tokens is a
// subset of input_tokens and is subtracted) and the Result, whose text is
// the last agent_message.
type codexParser struct {
	r         jsonReader
	started   map[string]bool
	outputLen map[string]int
	lastText  string
	lastError string
}

type codexItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            *codexError     `json:"error"`
	Query            string          `json:"query"`
	Items            json.RawMessage `json:"items"`
	Message          string          `json:"message"`
}

type codexError struct {
	Message string `json:"message"`
}

type codexUsage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
}

type codexLine struct {
	Type     string      `json:"type"`
	ThreadID string      `json:"thread_id"`
	Item     *codexItem  `json:"item"`
	Message  string      `json:"message"`
	Error    *codexError `json:"error"`
	Usage    *codexUsage `json:"usage"`
}

var reconnecting = regexp.MustCompile(`^Reconnecting\.\.\.\s*(\d+)/(\d+)`)

func (p *codexParser) tool(st *state, it *codexItem, completed bool) {
	if p.started == nil {
		p.started, p.outputLen = map[string]bool{}, map[string]int{}
	}
	name, args := it.Type, json.RawMessage(nil)
	switch it.Type {
	case "command_execution":
		args = oneKeyObject("command", it.Command)
	case "file_change":
		args, _ = json.Marshal(map[string]json.RawMessage{"changes": it.Changes})
	case "mcp_tool_call":
		name = "mcp__" + it.Server + "__" + it.Tool
		args = it.Arguments
	case "web_search":
		args = oneKeyObject("query", it.Query)
	}
	if !p.started[it.ID] {
		p.started[it.ID] = true
		st.closeResponse(protocol.Usage{}, 0)
		st.toolCall(it.ID, name, args, false)
	}
	out := it.AggregatedOutput
	if it.Type == "mcp_tool_call" && completed {
		out = textOfMCP(it.Result)
	}
	if len(out) > p.outputLen[it.ID] {
		st.toolOutput(it.ID, out[p.outputLen[it.ID]:], false)
		p.outputLen[it.ID] = len(out)
	}
	if completed {
		ok := it.Status == "completed" && (it.ExitCode == nil || *it.ExitCode == 0) && it.Error == nil
		code := ""
		if !ok {
			code = it.Status
			if it.Error != nil {
				st.toolOutput(it.ID, it.Error.Message, false)
			}
		}
		st.toolEnd(it.ID, ok, code, false)
	}
}

func textOfMCP(raw json.RawMessage) string {
	var r struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &r) == nil && len(r.Content) > 0 {
		return textOf(r.Content)
	}
	return ""
}

// oneKeyObject is json.Marshal(map[string]string{key: value}) for a key
// that needs no escaping.
func oneKeyObject(key, value string) json.RawMessage {
	v, _ := json.Marshal(value)
	b := make([]byte, 0, len(key)+len(v)+5)
	b = append(b, '{', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	b = append(b, v...)
	return append(b, '}')
}

func (p *codexParser) line(st *state, raw []byte) lineResult {
	var l codexLine
	if res := decodeLine(&p.r, raw, &l); res != lineOK {
		return res
	}
	if !p.handle(st, &l) {
		return lineUnknown
	}
	return lineOK
}

func (p *codexParser) handle(st *state, l *codexLine) bool {
	typ := l.Type
	switch typ {
	case "thread.started":
		st.setSession(l.ThreadID)
	case "turn.started":
	case "item.started", "item.updated", "item.completed":
		it := l.Item
		if it == nil {
			return false
		}
		completed := typ == "item.completed"
		switch it.Type {
		case "agent_message":
			if completed {
				st.chunk(it.Text, false)
				p.lastText = it.Text
			}
		case "reasoning":
			if completed {
				st.chunk(it.Text, true)
			}
		case "command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call":
			p.tool(st, it, completed)
		case "todo_list", "plan":
			if completed {
				st.status("Plan updated: " + strings.TrimSpace(it.Text+string(it.Items)))
			}
		case "error":
			if completed {
				st.status("Agent warning: " + it.Message)
			}
		default:
			return false
		}
	case "item.plan.delta", "request_user_input":
	case "error":
		if m := reconnecting.FindStringSubmatch(l.Message); m != nil {
			attempt, _ := strconv.Atoi(m[1])
			maxN, _ := strconv.Atoi(m[2])
			st.ev.Retry = &Retry{Attempt: attempt, Max: maxN, Status: StatusInText(l.Message), Message: l.Message}
			st.status("Model call failed; the agent retries: " + l.Message)
			return true
		}
		p.lastError = l.Message
	case "turn.failed":
		msg := p.lastError
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		st.closeResponse(protocol.Usage{}, 0)
		st.fail(extractMessage(msg), StatusInText(msg))
		st.finishResult(&Result{IsError: true, Subtype: "turn.failed", Text: p.lastText})
	case "turn.completed":
		r := &Result{Text: p.lastText, Subtype: "success"}
		var u protocol.Usage
		if l.Usage != nil {
			total := protocol.Usage{
				InputTokens:      max(l.Usage.InputTokens-l.Usage.CachedInputTokens-l.Usage.CacheWriteInputTokens, 0),
				CacheReadTokens:  l.Usage.CachedInputTokens,
				CacheWriteTokens: l.Usage.CacheWriteInputTokens,
				OutputTokens:     l.Usage.OutputTokens,
			}
			u = subUsage(total, st.opt.BaselineUsage)
			u.ModelID = st.model
		}
		st.closeResponse(u, 0)
		r.Usage = u
		r.Usage.TotalTokens = u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
		r.Usage.Provider = st.opt.Provider
		st.finishResult(r)
	default:
		return false
	}
	return true
}

func (p *codexParser) finish(st *state) {
	if st.result == nil && p.lastError != "" {
		st.fail(extractMessage(p.lastError), StatusInText(p.lastError))
	}
}

// extractMessage unwraps an API error body quoted in a message
// ({"error":{"message":…}}), keeping the outer text otherwise.
func extractMessage(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(t), &e) == nil && e.Error.Message != "" {
			if e.Error.Type != "" {
				return e.Error.Type + ": " + e.Error.Message
			}
			return e.Error.Message
		}
	}
	return t
}

// geminiParser reads Gemini CLI's --output-format stream-json.
//
// Mapping: init → session id and model; assistant message deltas →
// response chunks; tool_use → the response ends, tool_call + tool_start
// (names kept by tool_id, since tool_result has none); tool_result →
// tool_output (output or error message) + tool_end; error (warning) →
// status; result → the response ends with the turn's stats (input_tokens
// includes cached; cached is subtracted) and the Result, whose text is the
// assistant deltas since the last tool call; status "error" is a
// structured error.
type geminiParser struct {
	r    jsonReader
	text strings.Builder
}

type geminiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type geminiStats struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Cached       int64 `json:"cached"`
	DurationMS   int64 `json:"duration_ms"`
	ToolCalls    int   `json:"tool_calls"`
}

type geminiLine struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	Model      string          `json:"model"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Severity   string          `json:"severity"`
	Message    string          `json:"message"`
	Error      *geminiError    `json:"error"`
	Stats      *geminiStats    `json:"stats"`
}

func (p *geminiParser) line(st *state, raw []byte) lineResult {
	var l geminiLine
	if res := decodeLine(&p.r, raw, &l); res != lineOK {
		return res
	}
	if !p.handle(st, &l) {
		return lineUnknown
	}
	return lineOK
}

func (p *geminiParser) handle(st *state, l *geminiLine) bool {
	switch l.Type {
	case "init":
		st.setSession(l.SessionID)
		st.model = l.Model
	case "message":
		if l.Role == "assistant" {
			st.chunk(l.Content, false)
			p.text.WriteString(l.Content)
		}
	case "thought", "thinking":
		st.chunk(l.Content, true)
	case "tool_use":
		st.closeResponse(protocol.Usage{}, 0)
		p.text.Reset()
		st.toolCall(l.ToolID, l.ToolName, l.Parameters, false)
	case "tool_result":
		out := l.Output
		if l.Error != nil && l.Error.Message != "" {
			out = l.Error.Message
		}
		st.toolOutput(l.ToolID, out, false)
		code := ""
		if l.Status != "success" {
			code = "tool_error"
			if l.Error != nil && l.Error.Type != "" {
				code = l.Error.Type
			}
		}
		st.toolEnd(l.ToolID, l.Status == "success", code, false)
	case "error":
		st.status("Agent " + l.Severity + ": " + l.Message)
	case "result":
		r := &Result{Text: p.text.String(), Subtype: l.Status, IsError: l.Status == "error"}
		var u protocol.Usage
		if l.Stats != nil {
			u = protocol.Usage{InputTokens: max(l.Stats.InputTokens-l.Stats.Cached, 0), CacheReadTokens: l.Stats.Cached,
				OutputTokens: l.Stats.OutputTokens, ModelID: st.model}
			r.DurationMS = l.Stats.DurationMS
		}
		st.closeResponse(u, 0)
		r.Usage = u
		r.Usage.TotalTokens = u.InputTokens + u.OutputTokens + u.CacheReadTokens
		r.Usage.Provider = st.opt.Provider
		if r.IsError {
			msg := "the agent reported an error"
			if l.Error != nil {
				msg = geminiAPIMessage(l.Error.Message)
			}
			st.fail(msg, StatusInText(msg))
		}
		st.finishResult(r)
	default:
		return false
	}
	return true
}

func (p *geminiParser) finish(*state) {}

var geminiAPIError = regexp.MustCompile(`^\[API Error: (\{.*\})\]$`)

// geminiAPIMessage turns "[API Error: {"error":{"code":401,…}}]" into
// "401 UNAUTHENTICATED: API key not valid…".
func geminiAPIMessage(s string) string {
	if m := geminiAPIError.FindStringSubmatch(s); m != nil {
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(m[1]), &e) == nil && e.Error.Code != 0 {
			return "API Error: " + strconv.Itoa(e.Error.Code) + " " + e.Error.Status + ": " + e.Error.Message
		}
	}
	return s
}

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
	r        jsonReader
	lastText string
	costSum  float64
	usageSum protocol.Usage
	failed   bool
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
	Type      string         `json:"type"`
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

func (p *opencodeParser) line(st *state, raw []byte) lineResult {
	var l opencodeLine
	if res := decodeLine(&p.r, raw, &l); res != lineOK {
		return res
	}
	if !p.handle(st, &l) {
		return lineUnknown
	}
	return lineOK
}

func (p *opencodeParser) handle(st *state, l *opencodeLine) bool {
	st.setSession(l.SessionID)
	switch l.Type {
	case "step_start":
		st.closeResponse(protocol.Usage{}, 0)
		st.openResponse()
	case "text":
		st.chunk(l.Part.Text, false)
		p.lastText = l.Part.Text
	case "reasoning":
		st.chunk(l.Part.Text, true)
	case "tool_use":
		var s opencodeState
		p.r.reset(l.Part.State)
		if s.read(&p.r); !p.r.end() {
			// encoding/json fills what it can and reports the rest.
			var slow opencodeState
			_ = json.Unmarshal(l.Part.State, &slow)
			s = slow
		}
		hold := true
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
	case "step_finish":
		var u protocol.Usage
		if t := l.Part.Tokens; t != nil {
			u = protocol.Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning,
				CacheReadTokens: t.Cache.Read, CacheWriteTokens: t.Cache.Write, ModelID: st.model}
		}
		st.closeResponse(u, l.Part.Cost)
		p.costSum += l.Part.Cost
		p.usageSum = addUsage(p.usageSum, u)
	case "error":
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
	case "done":
	default:
		return false
	}
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
}

// The read methods below fill the line structs on the fast path (see
// jsonReader and object); each fields value lists its struct's json tags in
// the order of the read's cases.

var codexLineNames = newFields("type", "thread_id", "item", "message", "error", "usage")

func (l *codexLine) read(r *jsonReader) {
	r.object(codexLineNames, func(i int) {
		switch i {
		case 0:
			r.str(&l.Type)
		case 1:
			r.str(&l.ThreadID)
		case 2:
			if it := ptrStart(r, &l.Item); it != nil {
				it.read(r)
			}
		case 3:
			r.str(&l.Message)
		case 4:
			if e := ptrStart(r, &l.Error); e != nil {
				e.read(r)
			}
		case 5:
			if u := ptrStart(r, &l.Usage); u != nil {
				u.read(r)
			}
		}
	})
}

var codexItemNames = newFields("id", "type", "text", "command", "aggregated_output", "exit_code", "status", "changes",
	"server", "tool", "arguments", "result", "error", "query", "items", "message")

func (it *codexItem) read(r *jsonReader) {
	r.object(codexItemNames, func(i int) {
		switch i {
		case 0:
			r.str(&it.ID)
		case 1:
			r.str(&it.Type)
		case 2:
			r.str(&it.Text)
		case 3:
			r.str(&it.Command)
		case 4:
			r.str(&it.AggregatedOutput)
		case 5:
			r.intPtr(&it.ExitCode)
		case 6:
			r.str(&it.Status)
		case 7:
			r.rawMsg(&it.Changes)
		case 8:
			r.str(&it.Server)
		case 9:
			r.str(&it.Tool)
		case 10:
			r.rawMsg(&it.Arguments)
		case 11:
			r.rawMsg(&it.Result)
		case 12:
			if e := ptrStart(r, &it.Error); e != nil {
				e.read(r)
			}
		case 13:
			r.str(&it.Query)
		case 14:
			r.rawMsg(&it.Items)
		case 15:
			r.str(&it.Message)
		}
	})
}

var messageNames = newFields("message")

func (e *codexError) read(r *jsonReader) {
	r.object(messageNames, func(int) { r.str(&e.Message) })
}

var codexUsageNames = newFields("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")

func (u *codexUsage) read(r *jsonReader) {
	r.object(codexUsageNames, func(i int) {
		switch i {
		case 0:
			r.int64(&u.InputTokens)
		case 1:
			r.int64(&u.CachedInputTokens)
		case 2:
			r.int64(&u.CacheWriteInputTokens)
		case 3:
			r.int64(&u.OutputTokens)
		}
	})
}

var geminiLineNames = newFields("type", "session_id", "model", "role", "content", "tool_name", "tool_id", "parameters",
	"status", "output", "severity", "message", "error", "stats")

func (l *geminiLine) read(r *jsonReader) {
	r.object(geminiLineNames, func(i int) {
		switch i {
		case 0:
			r.str(&l.Type)
		case 1:
			r.str(&l.SessionID)
		case 2:
			r.str(&l.Model)
		case 3:
			r.str(&l.Role)
		case 4:
			r.str(&l.Content)
		case 5:
			r.str(&l.ToolName)
		case 6:
			r.str(&l.ToolID)
		case 7:
			r.rawMsg(&l.Parameters)
		case 8:
			r.str(&l.Status)
		case 9:
			r.str(&l.Output)
		case 10:
			r.str(&l.Severity)
		case 11:
			r.str(&l.Message)
		case 12:
			if e := ptrStart(r, &l.Error); e != nil {
				e.read(r)
			}
		case 13:
			if st := ptrStart(r, &l.Stats); st != nil {
				st.read(r)
			}
		}
	})
}

var typeMessageNames = newFields("type", "message")

func (e *geminiError) read(r *jsonReader) {
	r.object(typeMessageNames, func(i int) {
		if i == 0 {
			r.str(&e.Type)
		} else {
			r.str(&e.Message)
		}
	})
}

var geminiStatsNames = newFields("input_tokens", "output_tokens", "cached", "duration_ms", "tool_calls")

func (s *geminiStats) read(r *jsonReader) {
	r.object(geminiStatsNames, func(i int) {
		switch i {
		case 0:
			r.int64(&s.InputTokens)
		case 1:
			r.int64(&s.OutputTokens)
		case 2:
			r.int64(&s.Cached)
		case 3:
			r.int64(&s.DurationMS)
		case 4:
			r.int(&s.ToolCalls)
		}
	})
}

var opencodeLineNames = newFields("type", "sessionID", "part", "error")

func (l *opencodeLine) read(r *jsonReader) {
	r.object(opencodeLineNames, func(i int) {
		switch i {
		case 0:
			r.str(&l.Type)
		case 1:
			r.str(&l.SessionID)
		case 2:
			if r.structStart() {
				l.Part.read(r)
			}
		case 3:
			if e := ptrStart(r, &l.Error); e != nil {
				e.read(r)
			}
		}
	})
}

var opencodePartNames = newFields("type", "text", "tool", "callID", "reason", "cost", "state", "tokens")

func (p *opencodePart) read(r *jsonReader) {
	r.object(opencodePartNames, func(i int) {
		switch i {
		case 0:
			r.str(&p.Type)
		case 1:
			r.str(&p.Text)
		case 2:
			r.str(&p.Tool)
		case 3:
			r.str(&p.CallID)
		case 4:
			r.str(&p.Reason)
		case 5:
			r.float(&p.Cost)
		case 6:
			r.rawMsg(&p.State)
		case 7:
			if t := ptrStart(r, &p.Tokens); t != nil {
				t.read(r)
			}
		}
	})
}

var opencodeTokensNames = newFields("input", "output", "reasoning", "cache")

func (t *opencodeTokens) read(r *jsonReader) {
	r.object(opencodeTokensNames, func(i int) {
		switch i {
		case 0:
			r.int64(&t.Input)
		case 1:
			r.int64(&t.Output)
		case 2:
			r.int64(&t.Reasoning)
		case 3:
			if r.structStart() {
				t.Cache.read(r)
			}
		}
	})
}

var readWriteNames = newFields("read", "write")

func (c *opencodeCache) read(r *jsonReader) {
	r.object(readWriteNames, func(i int) {
		if i == 0 {
			r.int64(&c.Read)
		} else {
			r.int64(&c.Write)
		}
	})
}

var opencodeErrorNames = newFields("name", "message", "data")

func (e *opencodeError) read(r *jsonReader) {
	r.object(opencodeErrorNames, func(i int) {
		switch i {
		case 0:
			r.str(&e.Name)
		case 1:
			r.str(&e.Message)
		case 2:
			if r.structStart() {
				e.Data.read(r)
			}
		}
	})
}

var opencodeErrorDataNames = newFields("message", "statusCode")

func (d *opencodeErrorData) read(r *jsonReader) {
	r.object(opencodeErrorDataNames, func(i int) {
		if i == 0 {
			r.str(&d.Message)
		} else {
			r.int(&d.StatusCode)
		}
	})
}

var opencodeStateNames = newFields("status", "input", "output", "error")

func (s *opencodeState) read(r *jsonReader) {
	r.object(opencodeStateNames, func(i int) {
		switch i {
		case 0:
			r.str(&s.Status)
		case 1:
			r.rawMsg(&s.Input)
		case 2:
			r.str(&s.Output)
		case 3:
			r.str(&s.Error)
		}
	})
}
