package llmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"
)

// anthropicClient returns an official Anthropic SDK client pointed at s,
// reading nothing from the environment and never retrying.
func anthropicClient(t *testing.T, s *Server) *anthropic.Client {
	t.Helper()
	c := anthropic.NewClient(
		anthropicoption.WithoutEnvironmentDefaults(),
		anthropicoption.WithBaseURL(s.URL()),
		anthropicoption.WithAPIKey("sk-ant-test"),
		anthropicoption.WithMaxRetries(0),
		anthropicoption.WithRequestTimeout(30*time.Second),
	)
	return &c
}

// anthropicTurn is readGlobTurn with an Anthropic tool-use id.
var anthropicTurn = readGlobTurn("toolu_a", 7)

func anthropicParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	}
}

// blockSummary is the comparable essence of a content block.
type blockSummary struct {
	Type, Text, Thinking, Signature, ID, Name, Input string
}

func summarize(blocks []anthropic.ContentBlockUnion) []blockSummary {
	var out []blockSummary
	for _, b := range blocks {
		s := blockSummary{Type: b.Type, Text: b.Text, Thinking: b.Thinking, Signature: b.Signature, ID: b.ID, Name: b.Name}
		if b.Type == "tool_use" {
			s.Input = string(b.Input)
		}
		out = append(out, s)
	}
	return out
}

func wantAnthropicBlocks() []blockSummary {
	return []blockSummary{
		{Type: "thinking", Thinking: anthropicTurn.Thinking, Signature: ThinkingSignature(anthropicTurn.Thinking)},
		{Type: "text", Text: "I will read it."},
		{Type: "tool_use", ID: "toolu_a", Name: "Read", Input: `{"path":"café/notes.md","limit":10}`},
		{Type: "tool_use", ID: "toolu_002", Name: "Glob", Input: `{"pattern":"*.go"}`},
	}
}

func TestAnthropicStreamThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, anthropicTurn)
	client := anthropicClient(t, s)

	stream := client.Messages.NewStreaming(t.Context(), anthropicParams("claude-test"))
	defer stream.Close()
	var msg anthropic.Message
	var text, thinking []string
	var jsonDeltas int
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.Type, err)
		}
		if ev.Type == "content_block_delta" {
			switch ev.Delta.Type {
			case "text_delta":
				text = append(text, ev.Delta.Text)
			case "thinking_delta":
				thinking = append(thinking, ev.Delta.Thinking)
			case "input_json_delta":
				jsonDeltas++
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if diff := cmp.Diff(anthropicTurn.Text, text); diff != "" {
		t.Errorf("text deltas (-want +got):\n%s", diff)
	}
	if got := strings.Join(thinking, ""); got != anthropicTurn.Thinking || len(thinking) != 2 {
		t.Errorf("thinking deltas = %q, want %q in 2 pieces", thinking, anthropicTurn.Thinking)
	}
	if jsonDeltas != 3+2 {
		t.Errorf("input_json_delta events = %d, want 5 (3 + default 2)", jsonDeltas)
	}
	if diff := cmp.Diff(wantAnthropicBlocks(), summarize(msg.Content)); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.Model != "claude-test" || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") {
		t.Errorf("message: stop %q model %q role %q id %q", msg.StopReason, msg.Model, msg.Role, msg.ID)
	}
	u := msg.Usage
	if u.InputTokens != 100 || u.OutputTokens != 20 || u.CacheReadInputTokens != 30 || u.CacheCreationInputTokens != 7 {
		t.Errorf("usage = in %d out %d read %d write %d, want 100 20 30 7", u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/messages" || reqs[0].Header.Get("X-Api-Key") != "sk-ant-test" || reqs[0].JSON()["stream"] != true {
		t.Errorf("requests = %+v", reqs)
	}
}

// rawEvents posts a streaming request and returns the SSE event names and
// the "type" field of each event's data.
func rawEvents(t *testing.T, s *Server, body string) (names, types []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("anthropic-version", "2023-06-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" || res.Header.Get("request-id") == "" {
		t.Errorf("content type %q, request-id %q", ct, res.Header.Get("request-id"))
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, name)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var v struct{ Type string }
			if err := json.Unmarshal([]byte(data), &v); err != nil {
				t.Fatalf("data is not JSON: %q", data)
			}
			types = append(types, v.Type)
		}
	}
	return names, types
}

func TestAnthropicWireEventOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		turn Turn
		want []string
	}{
		{
			name: "text",
			turn: Turn{Text: []string{"a", "b"}},
			want: []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
		},
		{
			name: "thinking and tool call",
			turn: Turn{Thinking: "hmm", ToolCalls: []ToolCall{{Name: "Bash", Input: `{"command":"ls"}`, Fragments: 1}}},
			want: []string{
				"message_start",
				// two thinking_delta pieces and a signature_delta
				"content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
				"ping", "content_block_start", "content_block_delta", "content_block_stop",
				"message_delta", "message_stop",
			},
		},
		{
			name: "mid-stream error event",
			turn: Turn{Text: []string{"a", "b"}, Status: 529, CutAfter: 4},
			want: []string{"message_start", "content_block_start", "ping", "content_block_delta", "error"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := NewServer(t, tt.turn)
			names, types := rawEvents(t, s, `{"model":"m","max_tokens":10,"stream":true,"messages":[]}`)
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(names, types); diff != "" {
				t.Errorf("data types differ from event names (-names +types):\n%s", diff)
			}
		})
	}
}

func TestAnthropicErrorsThroughSDK(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status     int
		retryAfter string
		wantType   anthropic.ErrorType
	}{
		{400, "", anthropic.ErrorTypeInvalidRequestError},
		{401, "", anthropic.ErrorTypeAuthenticationError},
		{403, "", anthropic.ErrorTypePermissionError},
		{404, "", anthropic.ErrorTypeNotFoundError},
		{429, "7", anthropic.ErrorTypeRateLimitError},
		{500, "", anthropic.ErrorTypeAPIError},
		{529, "", anthropic.ErrorTypeOverloadedError},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			s := NewServer(t, Turn{Status: tt.status, RetryAfter: tt.retryAfter, ErrorMessage: "scripted failure"})
			client := anthropicClient(t, s)
			stream := client.Messages.NewStreaming(t.Context(), anthropicParams("claude-test"))
			defer stream.Close()
			if stream.Next() {
				t.Fatalf("stream yielded %s, want an error", stream.Current().Type)
			}
			apiErr, ok := errors.AsType[*anthropic.Error](stream.Err())
			if !ok {
				t.Fatalf("err = %v (%T), want *anthropic.Error", stream.Err(), stream.Err())
			}
			if apiErr.StatusCode != tt.status || apiErr.Type() != tt.wantType || apiErr.RequestID == "" {
				t.Errorf("status %d type %q request id %q, want %d %q", apiErr.StatusCode, apiErr.Type(), apiErr.RequestID, tt.status, tt.wantType)
			}
			if got := apiErr.Response.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			var body struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal([]byte(apiErr.RawJSON()), &body); err != nil {
				t.Fatalf("error body %q: %v", apiErr.RawJSON(), err)
			}
			if body.Type != "error" || body.Error.Type != string(tt.wantType) || body.Error.Message != "scripted failure" {
				t.Errorf("error body = %+v", body)
			}
		})
	}
}

func TestAnthropicMidStreamErrorEventThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Turn{Text: []string{"partial", "never"}, Status: 529, CutAfter: 4})
	client := anthropicClient(t, s)
	stream := client.Messages.NewStreaming(t.Context(), anthropicParams("claude-test"))
	defer stream.Close()
	var text string
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "content_block_delta" {
			text += ev.Delta.Text
		}
	}
	apiErr, ok := errors.AsType[*anthropic.Error](stream.Err())
	if !ok || apiErr.Type() != anthropic.ErrorTypeOverloadedError {
		t.Fatalf("err = %v, want an overloaded_error event", stream.Err())
	}
	if text != "partial" {
		t.Errorf("text before the error = %q, want %q", text, "partial")
	}
}

func TestAnthropicCutStreamThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Turn{Text: []string{"a", "b", "c"}, CutAfter: 4})
	client := anthropicClient(t, s)
	stream := client.Messages.NewStreaming(t.Context(), anthropicParams("claude-test"))
	defer stream.Close()
	var types []string
	for stream.Next() {
		types = append(types, stream.Current().Type)
	}
	// The SDK hides ping; the cut comes after message_start,
	// content_block_start, ping and one delta.
	if diff := cmp.Diff([]string{"message_start", "content_block_start", "content_block_delta"}, types); diff != "" {
		t.Errorf("events before the cut (-want +got):\n%s", diff)
	}
	if stream.Err() == nil {
		t.Error("cut stream ended without an error")
	}
}

func TestAnthropicNonStreamingThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, anthropicTurn)
	client := anthropicClient(t, s)
	msg, err := client.Messages.New(t.Context(), anthropicParams("claude-test"))
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if diff := cmp.Diff(wantAnthropicBlocks(), summarize(msg.Content)); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.Usage.OutputTokens != 20 || msg.Usage.CacheCreationInputTokens != 7 {
		t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
	}
	if body := s.Requests()[0].Body; bytes.Contains(body, []byte(`"stream"`)) {
		t.Errorf("non-streaming request body mentions stream: %s", body)
	}
}

func TestAnthropicModelsThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Turn{Text: []string{"never"}})
	s.Models = []string{"claude-a", "claude-b"}
	client := anthropicClient(t, s)

	page, err := client.Models.List(t.Context(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatalf("list models: %v", err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff(s.Models, ids); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}

	_, err = client.Messages.New(t.Context(), anthropicParams("claude-z"))
	apiErr, ok := errors.AsType[*anthropic.Error](err)
	if !ok || apiErr.StatusCode != http.StatusNotFound || apiErr.Type() != anthropic.ErrorTypeNotFoundError || !strings.Contains(apiErr.RawJSON(), "claude-z") {
		t.Fatalf("unknown model: err = %v, want a 404 not_found_error naming the model", err)
	}
}
