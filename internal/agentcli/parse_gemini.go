package agentcli

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

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
	envelope
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

// newGeminiFormat reads Gemini CLI's stream-json.
func newGeminiFormat() format[geminiLine, *geminiLine] {
	p := &geminiParser{}
	m := map[string]handler[*geminiLine]{
		"init": func(st *state, l *geminiLine, _ []byte) bool {
			st.setSession(l.SessionID)
			st.model = l.Model
			return true
		},
		"message": func(st *state, l *geminiLine, _ []byte) bool {
			if l.Role == "assistant" {
				st.chunk(l.Content, false)
				p.text.WriteString(l.Content)
			}
			return true
		},
		"tool_use": func(st *state, l *geminiLine, _ []byte) bool {
			st.closeResponse(protocol.Usage{}, 0)
			p.text.Reset()
			st.toolCall(l.ToolID, l.ToolName, l.Parameters, false)
			return true
		},
		"tool_result": p.toolResult,
		"error": func(st *state, l *geminiLine, _ []byte) bool {
			st.status("Agent " + l.Severity + ": " + l.Message)
			return true
		},
		"result": p.result,
	}
	on(m, func(st *state, l *geminiLine, _ []byte) bool { st.chunk(l.Content, true); return true }, "thought", "thinking")
	return format[geminiLine, *geminiLine]{on: m}
}

func (p *geminiParser) toolResult(st *state, l *geminiLine, _ []byte) bool {
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
	return true
}

func (p *geminiParser) result(st *state, l *geminiLine, _ []byte) bool {
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
	return true
}

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
