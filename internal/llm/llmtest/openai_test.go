package llmtest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// sdkClient returns an official SDK client pointed at s, not reading the
// environment's base URL or key, and never retrying.
func sdkClient(t *testing.T, s *Server) *openai.Client {
	t.Helper()
	c := openai.NewClient(
		option.WithBaseURL(s.URL()+"/v1"),
		option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(30*time.Second),
	)
	return &c
}

// scriptedTurn is readGlobTurn with an OpenAI call id.
var scriptedTurn = readGlobTurn("call_a", 0)

// readGlobTurn is the turn the SDK tests of both dialects script:
// thinking, three text deltas and two tool calls (the first, with the id
// callID, split in three fragments), with cacheWrite cache-write tokens.
func readGlobTurn(callID string, cacheWrite int64) Turn {
	return Turn{
		Thinking:         "Let me look at the file.",
		Text:             []string{"I will ", "read ", "it."},
		ToolCalls:        []ToolCall{{ID: callID, Name: "Read", Input: `{"path":"café/notes.md","limit":10}`, Fragments: 3}, {Name: "Glob", Input: `{"pattern":"*.go"}`}},
		InputTokens:      100,
		OutputTokens:     20,
		CacheReadTokens:  30,
		CacheWriteTokens: cacheWrite,
	}
}

func TestChatStreamThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, scriptedTurn, Turn{Text: []string{"done"}, InputTokens: 5, OutputTokens: 1})
	client := sdkClient(t, s)
	ctx := t.Context()

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "gpt-test",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	var reasoning, content []string
	chunks := 0
	for stream.Next() {
		chunk := stream.Current()
		chunks++
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator rejected chunk %d: %s", chunks, chunk.RawJSON())
		}
		if chunk.Model != "gpt-test" || chunk.Object != "chat.completion.chunk" {
			t.Errorf("chunk %d: model %q object %q", chunks, chunk.Model, chunk.Object)
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		d := chunk.Choices[0].Delta
		if f, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
			reasoning = append(reasoning, strings.Trim(f.Raw(), `"`))
		}
		if d.Content != "" {
			content = append(content, d.Content)
		}
		if chunks == 1 && d.Role != "assistant" {
			t.Errorf("first delta role = %q, want assistant", d.Role)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got, want := strings.Join(reasoning, ""), scriptedTurn.Thinking; got != want {
		t.Errorf("reasoning_content = %q, want %q", got, want)
	}
	if diff := cmp.Diff(scriptedTurn.Text, content); diff != "" {
		t.Errorf("content deltas (-want +got):\n%s", diff)
	}
	choice := acc.Choices[0]
	if choice.FinishReason != "tool_calls" {
		t.Errorf("finish_reason = %q", choice.FinishReason)
	}
	type call struct{ ID, Name, Args string }
	var calls []call
	for _, tc := range choice.Message.ToolCalls {
		calls = append(calls, call{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	want := []call{{"call_a", "Read", `{"path":"café/notes.md","limit":10}`}, {"call_001", "Glob", `{"pattern":"*.go"}`}}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	u := acc.Usage
	if u.PromptTokens != 130 || u.CompletionTokens != 20 || u.TotalTokens != 150 || u.PromptTokensDetails.CachedTokens != 30 {
		t.Errorf("usage = %s", u.RawJSON())
	}

	// Without include_usage there is no usage chunk.
	stream = client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("again")},
	})
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) == 0 || c.JSON.Usage.Valid() {
			t.Errorf("unexpected usage chunk %s", c.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("second stream: %v", err)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Path != "/v1/chat/completions" || reqs[0].Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("requests = %+v", reqs)
	}
	if so, _ := reqs[0].JSON()["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("first request stream_options = %v", so)
	}
}

func TestChatNonStreamingThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, scriptedTurn)
	got, err := sdkClient(t, s).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := got.Choices[0].Message
	if msg.Content != "I will read it." || len(msg.ToolCalls) != 2 || msg.ToolCalls[1].Function.Arguments != `{"pattern":"*.go"}` {
		t.Errorf("message = %s", msg.RawJSON())
	}
	if got.Choices[0].FinishReason != "tool_calls" || got.Usage.PromptTokensDetails.CachedTokens != 30 {
		t.Errorf("completion = %s", got.RawJSON())
	}
}

func TestResponsesStreamThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, scriptedTurn)
	stream := sdkClient(t, s).Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model:        "gpt-test",
		Instructions: openai.String("be brief"),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	var types []string
	var text, summary, args strings.Builder
	var completed responses.Response
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq {
			t.Errorf("event %s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.reasoning_summary_text.delta":
			summary.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			if ev.ItemID == "fc_000" {
				args.WriteString(ev.Delta)
			}
		case "response.completed":
			completed = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	wantTypes := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added",
		"response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	if text.String() != "I will read it." || summary.String() != scriptedTurn.Thinking || args.String() != scriptedTurn.ToolCalls[0].Input {
		t.Errorf("text %q summary %q args %q", text.String(), summary.String(), args.String())
	}
	if completed.Status != "completed" || completed.OutputText() != "I will read it." || completed.Instructions.OfString != "be brief" {
		t.Errorf("completed response = %s", completed.RawJSON())
	}
	type item struct{ Type, CallID, Name, Args string }
	var items []item
	for _, it := range completed.Output {
		fc := it.AsFunctionCall()
		items = append(items, item{it.Type, fc.CallID, fc.Name, fc.Arguments})
	}
	wantItems := []item{{Type: "reasoning"}, {Type: "message"}, {"function_call", "call_a", "Read", scriptedTurn.ToolCalls[0].Input}, {"function_call", "call_001", "Glob", `{"pattern":"*.go"}`}}
	if diff := cmp.Diff(wantItems, items); diff != "" {
		t.Errorf("output items (-want +got):\n%s", diff)
	}
	if got := completed.Output[0].AsReasoning().Summary; len(got) != 1 || got[0].Text != scriptedTurn.Thinking {
		t.Errorf("reasoning summary = %+v", got)
	}
	u := completed.Usage
	if u.InputTokens != 130 || u.InputTokensDetails.CachedTokens != 30 || u.OutputTokens != 20 || u.TotalTokens != 150 || !u.OutputTokensDetails.JSON.ReasoningTokens.Valid() {
		t.Errorf("usage = %s", u.RawJSON())
	}
}

func TestResponsesNonStreamingThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Turn{Text: []string{"hello ", "there"}, InputTokens: 7, OutputTokens: 2})
	got, err := sdkClient(t, s).Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputText() != "hello there" || got.Status != "completed" || got.Usage.InputTokens != 7 {
		t.Errorf("response = %s", got.RawJSON())
	}
}

func TestOpenAIErrorsThroughSDK(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		turn       Turn
		wantType   string
		wantCode   string
		wantMsg    string
		retryAfter string
	}{
		{"bad request", Turn{Status: 400, ErrorMessage: "messages: too short"}, "invalid_request_error", "", "messages: too short", ""},
		{"auth", Turn{Status: 401}, "authentication_error", "invalid_api_key", "Incorrect API key", ""},
		{"model", Turn{Status: 404, ErrorMessage: "model: gpt-test"}, "invalid_request_error", "model_not_found", "The model `gpt-test` does not exist", ""},
		{"rate limit", Turn{Status: 429, RetryAfter: "7"}, "requests", "rate_limit_exceeded", "Rate limit reached", "7"},
		{"server", Turn{Status: 500}, "server_error", "", "The server had an error", ""},
		{"unavailable", Turn{Status: 503, ErrorMessage: "overloaded"}, "server_error", "", "overloaded", ""},
	}
	for _, tt := range tests {
		for _, api := range []string{"chat", "responses"} {
			t.Run(tt.name+"/"+api, func(t *testing.T) {
				t.Parallel()
				s := NewServer(t, tt.turn)
				client := sdkClient(t, s)
				var err error
				if api == "chat" {
					stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
						Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
					})
					for stream.Next() {
						t.Error("unexpected chunk")
					}
					err = stream.Err()
				} else {
					stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
						Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
					})
					for stream.Next() {
						t.Error("unexpected event")
					}
					err = stream.Err()
				}
				apiErr, ok := errors.AsType[*openai.Error](err)
				if !ok {
					t.Fatalf("error %v (%T) is not *openai.Error", err, err)
				}
				if apiErr.StatusCode != tt.turn.Status || apiErr.Type != tt.wantType || apiErr.Code != tt.wantCode || !strings.HasPrefix(apiErr.Message, tt.wantMsg) {
					t.Errorf("error = %d type %q code %q message %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
				}
				if got := apiErr.Response.Header.Get("Retry-After"); got != tt.retryAfter {
					t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
				}
			})
		}
	}
}

func TestOpenAICutAfterThroughSDK(t *testing.T) {
	t.Parallel()
	turn := Turn{Text: []string{"a", "b", "c", "d"}, CutAfter: 3}
	for _, api := range []string{"chat", "responses"} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			s := NewServer(t, turn)
			client := sdkClient(t, s)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			events := 0
			var err error
			var last string
			if api == "chat" {
				stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
					Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				})
				for stream.Next() {
					events++
					if c := stream.Current(); len(c.Choices) > 0 {
						last = c.Choices[0].FinishReason
					}
				}
				err = stream.Err()
			} else {
				stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
					Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
				})
				for stream.Next() {
					events++
					last = stream.Current().Type
				}
				err = stream.Err()
			}
			if events != 3 {
				t.Errorf("got %d events before the cut, want 3", events)
			}
			if err == nil {
				t.Error("cut stream ended without an error")
			}
			if last == "stop" || last == "response.completed" {
				t.Errorf("terminal event %q arrived despite the cut", last)
			}
		})
	}
}

func TestModelsListThroughSDK(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Turn{Text: []string{"x"}})
	s.Models = []string{"gpt-a", "gpt-b"}
	client := sdkClient(t, s)
	var ids []string
	iter := client.Models.ListAutoPaging(t.Context())
	for iter.Next() {
		ids = append(ids, iter.Current().ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpt-a", "gpt-b"}, ids); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	// A model outside the list is a model_not_found 404.
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "gpt-z", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if apiErr, ok := errors.AsType[*openai.Error](err); !ok || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" || !strings.Contains(apiErr.Message, "gpt-z") {
		t.Errorf("unknown model error = %v", err)
	}
}

// TestUnknownModelBeforeScript: a model outside Models is refused whatever
// the script holds, and the turn stays for the next call. A scripted error
// status was answered first (a 429 to a model the server does not have),
// and the refused call took the turn.
func TestUnknownModelBeforeScript(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Turn{Status: http.StatusTooManyRequests, ErrorMessage: "slow down"}, Turn{Text: []string{"ok"}})
	s.Models = []string{"gpt-a"}
	client := sdkClient(t, s)
	call := func(model string) error {
		_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		return err
	}
	if apiErr, ok := errors.AsType[*openai.Error](call("gpt-z")); !ok || apiErr.StatusCode != http.StatusNotFound || !strings.Contains(apiErr.Message, "gpt-z") {
		t.Errorf("unknown model: %v, want the 404 model_not_found", apiErr)
	}
	if apiErr, ok := errors.AsType[*openai.Error](call("gpt-a")); !ok || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Errorf("known model: %v, want the script's first turn (429)", apiErr)
	}
}

func TestSplitUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want []string
	}{
		{"", 2, []string{""}},
		{"abcd", 1, []string{"abcd"}},
		{"abcd", 2, []string{"ab", "cd"}},
		{"abcde", 2, []string{"abc", "de"}},
		{"ab", 5, []string{"ab"}},
		{"éé", 2, []string{"é", "é"}},
		{"aé", 2, []string{"aé"}},
		{"日本語", 3, []string{"日", "本", "語"}},
		{"a日b", 3, []string{"a日", "b"}},
	}
	for _, tt := range tests {
		got := splitUTF8(tt.in, tt.n)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("splitUTF8(%q, %d) (-want +got):\n%s", tt.in, tt.n, diff)
		}
		if strings.Join(got, "") != tt.in {
			t.Errorf("splitUTF8(%q, %d) lost bytes", tt.in, tt.n)
		}
		for _, p := range got {
			if !utf8.ValidString(p) {
				t.Errorf("splitUTF8(%q, %d): invalid piece %q", tt.in, tt.n, p)
			}
		}
	}
}

// TestScriptExhausted: a request past the script's last turn is a 500
// that tells the fake model's user what happened and what to do; it said
// "llmtest: script exhausted", naming a package of Maestro's tree.
func TestScriptExhausted(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Turn{Text: []string{"one"}})
	client := sdkClient(t, s)
	ask := func() error {
		_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
			Model:    "gpt-test",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		return err
	}
	if err := ask(); err != nil {
		t.Fatal(err)
	}
	err := ask()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError ||
		!strings.Contains(apiErr.Message, "its 1 turn(s) were all played") || !strings.Contains(apiErr.Message, "--loop") || strings.Contains(apiErr.Message, "llmtest") {
		t.Errorf("past the last turn: %v", err)
	}
}
