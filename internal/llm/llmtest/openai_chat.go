package llmtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// OpenAI Chat Completions wire format.
//
// A streaming request (stream: true) is answered with data-only SSE events,
// each a chat.completion.chunk, ending with "data: [DONE]":
//
//  1. a chunk whose delta carries role "assistant" and empty content;
//  2. Turn.Thinking as delta.reasoning_content (OpenAI itself never streams
//     reasoning on Chat Completions; reasoning_content is what vLLM,
//     DeepSeek and other compatible servers send);
//  3. one delta.content chunk per Turn.Text element;
//  4. per tool call, a delta with index, id, type "function",
//     function.name and empty arguments, then the arguments in
//     ToolCall.Fragments pieces (default 2);
//  5. a chunk with an empty delta and finish_reason "tool_calls" or "stop";
//  6. when stream_options.include_usage is true, a chunk with empty choices
//     and the usage (every earlier chunk then carries "usage": null).
//
// prompt_tokens counts InputTokens + CacheReadTokens, and
// prompt_tokens_details.cached_tokens the cache reads, as OpenAI does;
// CacheWriteTokens has no OpenAI counterpart and is not reported. A
// non-streaming request is answered with one chat.completion object.

// nextOpenAIID returns a random id with OpenAI's prefix style.
func nextOpenAIID(prefix string) string {
	return fmt.Sprintf("%sllmtest%016x", prefix, rand.Uint64())
}

// chatChunk is a chat.completion.chunk (or, with Object
// "chat.completion", a complete non-streaming answer).
type chatChunk struct {
	ID                string
	Object            string
	Created           int64
	Model             string
	SystemFingerprint string
	Choices           []chatChoice
	Usage             *chatUsage
	// nullUsage writes "usage": null when Usage is nil (streams that asked
	// for usage carry it on every chunk).
	nullUsage bool
}

type chatChoice struct {
	Index        int        `json:"index"`
	Delta        *chatDelta `json:"delta,omitempty"`
	Message      *chatDelta `json:"message,omitempty"`
	Logprobs     any        `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chatDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	Refusal          *string        `json:"refusal,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatUsage struct {
	PromptTokens            int64          `json:"prompt_tokens"`
	CompletionTokens        int64          `json:"completion_tokens"`
	TotalTokens             int64          `json:"total_tokens"`
	PromptTokensDetails     map[string]int `json:"prompt_tokens_details"`
	CompletionTokensDetails map[string]int `json:"completion_tokens_details"`
}

// MarshalJSON writes the chunk with OpenAI's field names; "usage" is null
// on chunks of a stream that asked for usage and absent otherwise.
func (c chatChunk) MarshalJSON() ([]byte, error) {
	type plain struct {
		ID                string       `json:"id"`
		Object            string       `json:"object"`
		Created           int64        `json:"created"`
		Model             string       `json:"model"`
		SystemFingerprint string       `json:"system_fingerprint"`
		Choices           []chatChoice `json:"choices"`
	}
	type withUsage struct {
		plain
		Usage *chatUsage `json:"usage"`
	}
	p := plain{c.ID, c.Object, c.Created, c.Model, c.SystemFingerprint, c.Choices}
	if c.Usage != nil || c.nullUsage {
		return json.Marshal(withUsage{p, c.Usage})
	}
	return json.Marshal(p)
}

func openAIUsage(turn Turn) *chatUsage {
	prompt := turn.InputTokens + turn.CacheReadTokens
	return &chatUsage{
		PromptTokens:            prompt,
		CompletionTokens:        turn.OutputTokens,
		TotalTokens:             prompt + turn.OutputTokens,
		PromptTokensDetails:     map[string]int{"cached_tokens": int(turn.CacheReadTokens), "audio_tokens": 0},
		CompletionTokensDetails: map[string]int{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}

func ptr[T any](v T) *T { return &v }

func requestModel(req map[string]any) string {
	if m, ok := req["model"].(string); ok && m != "" {
		return m
	}
	return "llmtest"
}

// serveChat answers in the OpenAI Chat Completions format.
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, req map[string]any, turn Turn) {
	model := requestModel(req)
	if turn.Status != 0 {
		writeOpenAIError(w, turn, model)
		return
	}
	finish := "stop"
	if len(turn.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	base := chatChunk{ID: nextOpenAIID("chatcmpl-"), Created: time.Now().Unix(), Model: model, SystemFingerprint: "fp_llmtest"}

	if stream, _ := req["stream"].(bool); !stream {
		msg := &chatDelta{Role: "assistant", ReasoningContent: turn.Thinking}
		if text := strings.Join(turn.Text, ""); text != "" || len(turn.ToolCalls) == 0 {
			msg.Content = &text
		}
		for i, tc := range turn.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: callID(tc, "call", i), Type: "function", Function: chatFunctionCall{Name: tc.Name, Arguments: tc.Input}})
		}
		out := base
		out.Object = "chat.completion"
		out.Choices = []chatChoice{{Message: msg, FinishReason: &finish}}
		out.Usage = openAIUsage(turn)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
		return
	}

	includeUsage := false
	if so, ok := req["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	base.Object = "chat.completion.chunk"
	base.nullUsage = includeUsage
	chunk := func(d chatDelta, finishReason *string) chatChunk {
		c := base
		c.Choices = []chatChoice{{Delta: &d, FinishReason: finishReason}}
		return c
	}

	e := newSSE(w, turn.CutAfter)
	if !e.send("", chunk(chatDelta{Role: "assistant", Content: ptr(""), Refusal: nil}, nil)) {
		return
	}
	if turn.Thinking != "" {
		for _, piece := range splitUTF8(turn.Thinking, 2) {
			if !e.send("", chunk(chatDelta{ReasoningContent: piece}, nil)) {
				return
			}
		}
	}
	for _, text := range turn.Text {
		if !e.send("", chunk(chatDelta{Content: ptr(text)}, nil)) {
			return
		}
	}
	for i, tc := range turn.ToolCalls {
		head := chatToolCall{Index: ptr(i), ID: callID(tc, "call", i), Type: "function", Function: chatFunctionCall{Name: tc.Name}}
		if !e.send("", chunk(chatDelta{ToolCalls: []chatToolCall{head}}, nil)) {
			return
		}
		n := tc.Fragments
		if n <= 0 {
			n = 2
		}
		for _, piece := range splitUTF8(tc.Input, n) {
			if !e.send("", chunk(chatDelta{ToolCalls: []chatToolCall{{Index: ptr(i), Function: chatFunctionCall{Arguments: piece}}}}, nil)) {
				return
			}
		}
	}
	if !e.send("", chunk(chatDelta{}, &finish)) {
		return
	}
	if includeUsage {
		last := base
		last.Choices = []chatChoice{}
		last.Usage = openAIUsage(turn)
		if !e.send("", last) {
			return
		}
	}
	e.send("", "[DONE]")
}

// openAIError is the error body of both OpenAI APIs.
type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeOpenAIError answers with turn.Status and OpenAI's error body:
// 401 authentication_error/invalid_api_key, 403 permission_error, 404
// invalid_request_error/model_not_found, 429 requests/rate_limit_exceeded,
// 5xx server_error, other 4xx invalid_request_error. Turn.RetryAfter is
// sent as the Retry-After header.
func writeOpenAIError(w http.ResponseWriter, turn Turn, model string) {
	body := openAIErrorBody{Message: turn.ErrorMessage, Type: "invalid_request_error"}
	switch status := turn.Status; {
	case turn.ContextExceeded:
		body.Param, body.Code = ptr("messages"), ptr("context_length_exceeded")
	case status == http.StatusUnauthorized:
		body.Type, body.Code = "authentication_error", ptr("invalid_api_key")
		if body.Message == "" {
			body.Message = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
		}
	case status == http.StatusForbidden:
		body.Type = "permission_error"
	case status == http.StatusNotFound:
		body.Code = ptr("model_not_found")
		if body.Message == "" || body.Message == "model: "+model {
			body.Message = fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)
		}
	case status == http.StatusTooManyRequests:
		body.Type, body.Code = "requests", ptr("rate_limit_exceeded")
		if body.Message == "" {
			body.Message = fmt.Sprintf("Rate limit reached for %s on requests per min (RPM): Limit 3, Used 3, Requested 1.", model)
		}
	case status >= 500:
		body.Type = "server_error"
		if body.Message == "" {
			body.Message = "The server had an error while processing your request. Sorry about that!"
		}
	}
	if body.Message == "" {
		body.Message = http.StatusText(turn.Status)
	}
	if turn.RetryAfter != "" {
		w.Header().Set("Retry-After", turn.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", nextOpenAIID("req_"))
	w.WriteHeader(turn.Status)
	_ = json.NewEncoder(w).Encode(openAIError{Error: body})
}

// splitUTF8 is fragments that never splits a multi-byte character, so
// every piece is valid UTF-8 and survives JSON encoding unchanged.
func splitUTF8(s string, n int) []string {
	if n <= 1 || len(s) < n {
		return []string{s}
	}
	size := (len(s) + n - 1) / n
	var out []string
	for start := 0; start < len(s); {
		end := min(start+size, len(s))
		for end < len(s) && !isRuneStart(s[end]) {
			end++
		}
		out = append(out, s[start:end])
		start = end
	}
	return out
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
