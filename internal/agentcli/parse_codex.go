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

// protocol converts to Maestro's convention (cached_input_tokens and
// cache_write_input_tokens are subsets of input_tokens).
func (u codexUsage) protocol() protocol.Usage {
	return protocol.Usage{
		InputTokens:      max(u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens, 0),
		CacheReadTokens:  u.CachedInputTokens,
		CacheWriteTokens: u.CacheWriteInputTokens,
		OutputTokens:     u.OutputTokens,
	}
}

type codexLine struct {
	envelope
	ThreadID string      `json:"thread_id"`
	Item     *codexItem  `json:"item"`
	Message  string      `json:"message"`
	Error    *codexError `json:"error"`
	Usage    *codexUsage `json:"usage"`
}

var reconnecting = regexp.MustCompile(`^Reconnecting\.\.\.\s*(\d+)/(\d+)`)

func (p *codexParser) tool(st *state, it *codexItem, completed bool) {
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

// newCodexFormat reads `codex exec --json`.
func newCodexFormat() format[codexLine, *codexLine] {
	p := &codexParser{started: map[string]bool{}, outputLen: map[string]int{}}
	m := map[string]handler[*codexLine]{
		"thread.started": func(st *state, l *codexLine, _ []byte) bool { st.setSession(l.ThreadID); return true },
		"error":          p.error,
		"turn.failed":    p.turnFailed,
		"turn.completed": p.turnCompleted,
	}
	on(m, p.item, "item.started", "item.updated", "item.completed")
	on(m, ignore, "turn.started", "item.plan.delta", "request_user_input")
	return format[codexLine, *codexLine]{on: m, finish: p.finish}
}

// item: an item started, grew or completed.
func (p *codexParser) item(st *state, l *codexLine, _ []byte) bool {
	it := l.Item
	if it == nil {
		return false
	}
	completed := l.Type == "item.completed"
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
	return true
}

// error: "Reconnecting… n/m" is a retry; another error is kept for the
// turn's failure.
func (p *codexParser) error(st *state, l *codexLine, _ []byte) bool {
	if m := reconnecting.FindStringSubmatch(l.Message); m != nil {
		attempt, _ := strconv.Atoi(m[1])
		maxN, _ := strconv.Atoi(m[2])
		st.ev.Retry = &Retry{Attempt: attempt, Max: maxN, Status: StatusInText(l.Message), Message: l.Message}
		st.status("Model call failed; the agent retries: " + l.Message)
		return true
	}
	p.lastError = l.Message
	return true
}

func (p *codexParser) turnFailed(st *state, l *codexLine, _ []byte) bool {
	msg := p.lastError
	if l.Error != nil && l.Error.Message != "" {
		msg = l.Error.Message
	}
	st.closeResponse(protocol.Usage{}, 0)
	st.fail(extractMessage(msg), StatusInText(msg))
	st.finishResult(&Result{IsError: true, Subtype: "turn.failed", Text: p.lastText})
	return true
}

func (p *codexParser) turnCompleted(st *state, l *codexLine, _ []byte) bool {
	r := &Result{Text: p.lastText, Subtype: "success"}
	var u protocol.Usage
	if l.Usage != nil {
		u = subUsage(l.Usage.protocol(), st.opt.BaselineUsage)
	}
	u.ModelID = st.modelID()
	st.closeResponse(u, 0)
	r.Usage = u
	r.Usage.TotalTokens = u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
	r.Usage.Provider = st.opt.Provider
	st.finishResult(r)
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
