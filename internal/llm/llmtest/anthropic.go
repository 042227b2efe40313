package llmtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
)

// Anthropic Messages wire format.
//
// A streaming request (stream: true) is answered with named SSE events:
//
//  1. message_start: the message shell (id, model echoed from the request,
//     empty content, null stop_reason) and the input usage: input_tokens,
//     cache_creation_input_tokens, cache_read_input_tokens;
//  2. Turn.Thinking as a thinking block: content_block_start (type
//     thinking), thinking_delta events, one signature_delta, stop;
//  3. Turn.Text as a text block, one text_delta per element;
//  4. each tool call as a tool_use block: content_block_start with an empty
//     input {}, the input JSON in ToolCall.Fragments input_json_delta
//     pieces (default 2), stop;
//  5. message_delta with stop_reason (tool_use when there are tool calls,
//     else end_turn) and the cumulative output_tokens;
//  6. message_stop.
//
// ping events are interleaved as the API does: after the first
// content_block_start and before each tool_use block.
//
// Turn.Status answers with Anthropic's error body and that HTTP status. When
// a streaming turn has both Status and CutAfter, the stream starts instead,
// and after CutAfter events it fails with an SSE "error" event carrying the
// same error body (the API's mid-stream overloaded_error, for example).
//
// A non-streaming request is answered with one message object.

// anthropicError returns the API's error type and a message for a failing
// turn's HTTP status.
func anthropicError(turn Turn) (typ, message string) {
	switch {
	case turn.Status == http.StatusBadRequest:
		typ, message = "invalid_request_error", "invalid request"
	case turn.Status == http.StatusUnauthorized:
		typ, message = "authentication_error", "invalid x-api-key"
	case turn.Status == http.StatusForbidden:
		typ, message = "permission_error", "Your API key does not have permission to use the specified resource."
	case turn.Status == http.StatusNotFound:
		typ, message = "not_found_error", "Not found"
	case turn.Status == http.StatusRequestEntityTooLarge:
		typ, message = "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case turn.Status == http.StatusTooManyRequests:
		typ, message = "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
	case turn.Status == 529:
		typ, message = "overloaded_error", "Overloaded"
	case turn.Status >= 500:
		typ, message = "api_error", "Internal server error"
	default:
		typ, message = "invalid_request_error", "invalid request"
	}
	if turn.ErrorMessage != "" {
		message = turn.ErrorMessage
	}
	return typ, message
}

type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

func newAnthropicErrorBody(turn Turn, requestID string) anthropicErrorBody {
	var b anthropicErrorBody
	b.Type = "error"
	b.Error.Type, b.Error.Message = anthropicError(turn)
	b.RequestID = requestID
	return b
}

type anthropicUsage struct {
	InputTokens              int64                   `json:"input_tokens"`
	CacheCreationInputTokens int64                   `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64                   `json:"cache_read_input_tokens"`
	CacheCreation            *anthropicCacheCreation `json:"cache_creation,omitempty"`
	OutputTokens             int64                   `json:"output_tokens"`
	ServiceTier              string                  `json:"service_tier,omitempty"`
}

type anthropicCacheCreation struct {
	Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
}

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

type anthropicBlockStart struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block"`
}

type anthropicBlockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type anthropicBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type anthropicTextDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicThinkingDelta struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
}

type anthropicSignatureDelta struct {
	Type      string `json:"type"`
	Signature string `json:"signature"`
}

type anthropicJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type anthropicEvent struct {
	name string
	data any
}

// anthropicRandomID returns an id in the API's style ("msg_…", "req_…").
func anthropicRandomID(prefix string) string {
	return fmt.Sprintf("%s_011llmtest%016x", prefix, rand.Uint64())
}

// ThinkingSignature is the signature the fake Anthropic server attaches to
// a thinking block: deterministic, so tests can check it is sent back.
func ThinkingSignature(thinking string) string {
	sum := sha256.Sum256([]byte("llmtest-thinking:" + thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// anthropicToolInput returns the tool call's input JSON text ("{}" when
// empty).
func anthropicToolInput(tc ToolCall) string {
	if strings.TrimSpace(tc.Input) == "" {
		return "{}"
	}
	return tc.Input
}

func anthropicStopReason(turn Turn) string {
	if len(turn.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func anthropicStartUsage(turn Turn) anthropicUsage {
	return anthropicUsage{
		InputTokens:              turn.InputTokens,
		CacheCreationInputTokens: turn.CacheWriteTokens,
		CacheReadInputTokens:     turn.CacheReadTokens,
		CacheCreation:            &anthropicCacheCreation{Ephemeral5m: turn.CacheWriteTokens},
		OutputTokens:             min(turn.OutputTokens, 1),
		ServiceTier:              "standard",
	}
}

// anthropicEvents returns the SSE events of a successful streaming turn.
func anthropicEvents(model string, turn Turn) []anthropicEvent {
	events := []anthropicEvent{{"message_start", map[string]any{
		"type": "message_start",
		"message": anthropicMessage{
			ID: anthropicRandomID("msg"), Type: "message", Role: "assistant", Model: model,
			Content: []any{}, Usage: anthropicStartUsage(turn),
		},
	}}}
	index := 0
	start := func(block any) {
		events = append(events, anthropicEvent{"content_block_start", anthropicBlockStart{"content_block_start", index, block}})
		if index == 0 {
			events = append(events, anthropicEvent{"ping", map[string]string{"type": "ping"}})
		}
	}
	delta := func(d any) {
		events = append(events, anthropicEvent{"content_block_delta", anthropicBlockDelta{"content_block_delta", index, d}})
	}
	stop := func() {
		events = append(events, anthropicEvent{"content_block_stop", anthropicBlockStop{"content_block_stop", index}})
		index++
	}
	if turn.Thinking != "" {
		start(map[string]string{"type": "thinking", "thinking": "", "signature": ""})
		for _, piece := range fragments(turn.Thinking, 2) {
			delta(anthropicThinkingDelta{"thinking_delta", piece})
		}
		delta(anthropicSignatureDelta{"signature_delta", ThinkingSignature(turn.Thinking)})
		stop()
	}
	if len(turn.Text) > 0 {
		start(map[string]string{"type": "text", "text": ""})
		for _, chunk := range turn.Text {
			delta(anthropicTextDelta{"text_delta", chunk})
		}
		stop()
	}
	for i, tc := range turn.ToolCalls {
		if index > 0 {
			events = append(events, anthropicEvent{"ping", map[string]string{"type": "ping"}})
		}
		start(map[string]any{"type": "tool_use", "id": callID(tc, "toolu", i+1), "name": tc.Name, "input": map[string]any{}})
		n := tc.Fragments
		if n <= 0 {
			n = 2
		}
		for _, piece := range fragments(anthropicToolInput(tc), n) {
			delta(anthropicJSONDelta{"input_json_delta", piece})
		}
		stop()
	}
	events = append(events,
		anthropicEvent{"message_delta", map[string]any{
			"type":  "message_delta",
			"delta": map[string]any{"stop_reason": anthropicStopReason(turn), "stop_sequence": nil},
			"usage": map[string]int64{"output_tokens": turn.OutputTokens},
		}},
		anthropicEvent{"message_stop", map[string]string{"type": "message_stop"}},
	)
	return events
}

// anthropicMessageOf returns the non-streaming answer of a successful turn.
func anthropicMessageOf(model string, turn Turn) anthropicMessage {
	content := []any{}
	if turn.Thinking != "" {
		content = append(content, map[string]string{"type": "thinking", "thinking": turn.Thinking, "signature": ThinkingSignature(turn.Thinking)})
	}
	if len(turn.Text) > 0 {
		content = append(content, map[string]string{"type": "text", "text": strings.Join(turn.Text, "")})
	}
	for i, tc := range turn.ToolCalls {
		input := json.RawMessage(anthropicToolInput(tc))
		if !json.Valid(input) {
			input = json.RawMessage("{}")
		}
		content = append(content, map[string]any{"type": "tool_use", "id": callID(tc, "toolu", i+1), "name": tc.Name, "input": input})
	}
	stopReason := anthropicStopReason(turn)
	usage := anthropicStartUsage(turn)
	usage.OutputTokens = turn.OutputTokens
	return anthropicMessage{
		ID: anthropicRandomID("msg"), Type: "message", Role: "assistant", Model: model,
		Content: content, StopReason: &stopReason, Usage: usage,
	}
}

// serveAnthropic answers in the Anthropic Messages format (see above).
func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, req map[string]any, turn Turn) {
	requestID := anthropicRandomID("req")
	w.Header().Set("request-id", requestID)
	model, _ := req["model"].(string)
	stream, _ := req["stream"].(bool)

	if turn.Status != 0 && (!stream || turn.CutAfter <= 0) {
		if turn.RetryAfter != "" {
			w.Header().Set("Retry-After", turn.RetryAfter)
		}
		if turn.Status == http.StatusTooManyRequests || turn.Status == 529 {
			w.Header().Set("x-should-retry", "true")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(turn.Status)
		_ = json.NewEncoder(w).Encode(newAnthropicErrorBody(turn, requestID))
		return
	}

	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(anthropicMessageOf(model, turn))
		return
	}

	events := anthropicEvents(model, turn)
	if turn.Status != 0 {
		// A mid-stream failure: the first CutAfter events, then an error event.
		out := newSSE(w, 0)
		for _, ev := range events[:min(turn.CutAfter, len(events))] {
			out.send(ev.name, ev.data)
		}
		out.send("error", newAnthropicErrorBody(turn, requestID))
		return
	}
	out := newSSE(w, turn.CutAfter)
	for _, ev := range events {
		if !out.send(ev.name, ev.data) {
			return
		}
	}
}
