package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

var apis = []string{APIChat, APIResponses}

// newProvider returns a provider on api talking to base (an API root
// ending in /v1) with a test key.
func newProvider(t testing.TB, base, api string, edit ...func(*Config)) *Provider {
	t.Helper()
	cfg := Config{APIKey: "sk-test", BaseURL: base, Model: "gpt-test", API: api}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// stream drains one Stream call of p (see llmtest.Drain).
func stream(t testing.TB, ctx context.Context, p llm.Provider, req *llm.Request) llmtest.Outcome {
	t.Helper()
	return llmtest.Drain(t, p.Stream(ctx, req))
}

// eachAPI runs f as a parallel subtest, named by the API, for each API.
func eachAPI(t *testing.T, f func(t *testing.T, api string)) {
	t.Helper()
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			f(t, api)
		})
	}
}

func hello() *llm.Request {
	return &llm.Request{System: "be brief", Messages: []llm.Message{llm.UserText("hi")}}
}

func TestStreamTextWithUsage(t *testing.T) {
	t.Parallel()
	eachAPI(t, func(t *testing.T, api string) {
		srv := llmtest.NewServer(t, llmtest.Turn{
			Thinking:        "Short answer.",
			Text:            []string{"Hello", ", ", "world"},
			InputTokens:     100,
			OutputTokens:    20,
			CacheReadTokens: 30,
		})
		r := stream(t, t.Context(), newProvider(t, srv.URL()+"/v1", api), hello())
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		wantDeltas := []llm.Event{
			{Type: llm.EventThinkingDelta, Delta: "Short a"},
			{Type: llm.EventThinkingDelta, Delta: "nswer."},
			{Type: llm.EventTextDelta, Delta: "Hello"},
			{Type: llm.EventTextDelta, Delta: ", "},
			{Type: llm.EventTextDelta, Delta: "world"},
		}
		if diff := cmp.Diff(wantDeltas, r.Deltas); diff != "" {
			t.Errorf("deltas (-want +got):\n%s", diff)
		}
		want := &llm.Response{
			Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Type: llm.PartThinking, Text: "Short answer."},
				llm.Text("Hello, world"),
			}},
			Usage:      llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 30},
			StopReason: llm.StopEndTurn,
			Model:      "gpt-test",
		}
		if diff := cmp.Diff(want, r.Response); diff != "" {
			t.Errorf("response (-want +got):\n%s", diff)
		}
		reqs := srv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests", len(reqs))
		}
		wantPath := map[string]string{APIChat: "/v1/chat/completions", APIResponses: "/v1/responses"}[api]
		if reqs[0].Path != wantPath || reqs[0].Header.Get("Authorization") != "Bearer sk-test" {
			t.Errorf("request %s with Authorization %q", reqs[0].Path, reqs[0].Header.Get("Authorization"))
		}
	})
}

func TestStreamToolCalls(t *testing.T) {
	t.Parallel()
	eachAPI(t, func(t *testing.T, api string) {
		srv := llmtest.NewServer(t, llmtest.Turn{
			Text: []string{"Reading."},
			ToolCalls: []llmtest.ToolCall{
				{ID: "call_a", Name: "Read", Input: `{"path":"docs/café.md","limit":5}`, Fragments: 4},
				{ID: "call_b", Name: "Glob", Input: `{"pattern":"**/*.go"}`},
			},
			InputTokens: 10, OutputTokens: 5,
		})
		r := stream(t, t.Context(), newProvider(t, srv.URL()+"/v1", api), hello())
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		want := []llm.ToolCall{
			{ID: "call_a", Name: "Read", Input: json.RawMessage(`{"path":"docs/café.md","limit":5}`)},
			{ID: "call_b", Name: "Glob", Input: json.RawMessage(`{"pattern":"**/*.go"}`)},
		}
		if diff := cmp.Diff(want, r.Response.Message.ToolCalls()); diff != "" {
			t.Errorf("tool calls (-want +got):\n%s", diff)
		}
		if r.Response.StopReason != llm.StopToolUse || r.Response.Message.TextContent() != "Reading." {
			t.Errorf("stop %q text %q", r.Response.StopReason, r.Response.Message.TextContent())
		}
	})
}

func TestMultiTurnToolResult(t *testing.T) {
	t.Parallel()
	eachAPI(t, func(t *testing.T, api string) {
		srv := llmtest.NewServer(t,
			llmtest.Turn{Text: []string{"Let me read it."}, ToolCalls: []llmtest.ToolCall{{ID: "call_42", Name: "Read", Input: `{"path":"a.txt"}`}}},
			llmtest.Turn{Text: []string{"It says hi."}},
		)
		p := newProvider(t, srv.URL()+"/v1", api)
		schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
		req := &llm.Request{
			System:   "You are terse.",
			Messages: []llm.Message{llm.UserText("What is in a.txt?")},
			Tools:    []llm.ToolSpec{{Name: "Read", Description: "Read a file", InputSchema: schema}},
		}
		first := stream(t, t.Context(), p, req)
		if first.Err != nil {
			t.Fatal(first.Err)
		}
		req.Messages = append(req.Messages, first.Response.Message, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
			{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "call_42", Name: "Read", Content: "hi"}},
			llm.Text("Summarise it."),
		}})
		second := stream(t, t.Context(), p, req)
		if second.Err != nil {
			t.Fatal(second.Err)
		}
		if got := second.Response.Message.TextContent(); got != "It says hi." {
			t.Errorf("second answer %q", got)
		}

		body := srv.Requests()[1].JSON()
		var got any
		switch api {
		case APIChat:
			got = body["messages"]
		case APIResponses:
			if body["instructions"] != "You are terse." || body["store"] != false {
				t.Errorf("instructions %v store %v", body["instructions"], body["store"])
			}
			got = body["input"]
		}
		want := map[string]any{
			APIChat: []any{
				map[string]any{"role": "system", "content": "You are terse."},
				map[string]any{"role": "user", "content": "What is in a.txt?"},
				map[string]any{"role": "assistant", "content": "Let me read it.", "tool_calls": []any{
					map[string]any{"id": "call_42", "type": "function", "function": map[string]any{"name": "Read", "arguments": `{"path":"a.txt"}`}},
				}},
				map[string]any{"role": "tool", "tool_call_id": "call_42", "content": "hi"},
				map[string]any{"role": "user", "content": "Summarise it."},
			},
			APIResponses: []any{
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "What is in a.txt?"}}},
				map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "Let me read it."}}},
				map[string]any{"type": "function_call", "call_id": "call_42", "name": "Read", "arguments": `{"path":"a.txt"}`},
				map[string]any{"type": "function_call_output", "call_id": "call_42", "output": "hi"},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Summarise it."}}},
			},
		}[api]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("second request conversation (-want +got):\n%s", diff)
		}
		tools, _ := json.Marshal(body["tools"])
		wantTools := map[string]string{
			APIChat:      `[{"function":{"description":"Read a file","name":"Read","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}},"type":"function"}]`,
			APIResponses: `[{"description":"Read a file","name":"Read","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"strict":false,"type":"function"}]`,
		}[api]
		if string(tools) != wantTools {
			t.Errorf("tools = %s\nwant    %s", tools, wantTools)
		}
	})
}

func TestRequestOptions(t *testing.T) {
	t.Parallel()
	img := &llm.Image{MediaType: "image/png", Data: []byte("PNG")}
	tests := []struct {
		name     string
		req      llm.Request
		cfgMax   int
		wantChat map[string]any
		wantResp map[string]any
	}{
		{
			name:     "defaults",
			req:      llm.Request{Messages: []llm.Message{llm.UserText("x")}},
			wantChat: map[string]any{"reasoning_effort": nil, "max_completion_tokens": nil, "stream_options": map[string]any{"include_usage": true}},
			wantResp: map[string]any{"reasoning": nil, "max_output_tokens": nil, "instructions": nil},
		},
		{
			name:     "thinking high and max tokens",
			req:      llm.Request{Messages: []llm.Message{llm.UserText("x")}, Thinking: llm.ThinkingHigh, MaxTokens: 512},
			wantChat: map[string]any{"reasoning_effort": "high", "max_completion_tokens": float64(512)},
			wantResp: map[string]any{"reasoning": map[string]any{"effort": "high", "summary": "auto"}, "max_output_tokens": float64(512)},
		},
		{
			name:     "ultra is high, configured max tokens",
			req:      llm.Request{Messages: []llm.Message{llm.UserText("x")}, Thinking: llm.ThinkingUltra},
			cfgMax:   100,
			wantChat: map[string]any{"reasoning_effort": "high", "max_completion_tokens": float64(100)},
			wantResp: map[string]any{"reasoning": map[string]any{"effort": "high", "summary": "auto"}, "max_output_tokens": float64(100)},
		},
		{
			name:     "minimal",
			req:      llm.Request{Messages: []llm.Message{llm.UserText("x")}, Thinking: llm.ThinkingMinimal},
			wantChat: map[string]any{"reasoning_effort": "minimal"},
			wantResp: map[string]any{"reasoning": map[string]any{"effort": "minimal", "summary": "auto"}},
		},
		{
			name:     "off",
			req:      llm.Request{Messages: []llm.Message{llm.UserText("x")}, Thinking: llm.ThinkingOff},
			wantChat: map[string]any{"reasoning_effort": nil},
			wantResp: map[string]any{"reasoning": nil},
		},
		{
			name: "image",
			req:  llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("what is this?"), {Type: llm.PartImage, Image: img}}}}},
			wantChat: map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "what is this?"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,UE5H"}},
			}}}},
			wantResp: map[string]any{"input": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "what is this?"},
				map[string]any{"type": "input_image", "image_url": "data:image/png;base64,UE5H", "detail": "auto"},
			}}}},
		},
	}
	for _, tt := range tests {
		for _, api := range apis {
			t.Run(tt.name+"/"+api, func(t *testing.T) {
				t.Parallel()
				srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{"ok"}})
				p := newProvider(t, srv.URL()+"/v1", api, func(c *Config) { c.MaxTokens = tt.cfgMax })
				req := tt.req
				if r := stream(t, t.Context(), p, &req); r.Err != nil {
					t.Fatal(r.Err)
				}
				body := srv.Requests()[0].JSON()
				want := tt.wantChat
				if api == APIResponses {
					want = tt.wantResp
				}
				for key, w := range want {
					if diff := cmp.Diff(w, body[key]); diff != "" {
						t.Errorf("%s (-want +got):\n%s", key, diff)
					}
				}
				if body["stream"] != true || body["model"] != "gpt-test" {
					t.Errorf("stream %v model %v", body["stream"], body["model"])
				}
			})
		}
	}
}

func TestNoKeyLocalServer(t *testing.T) {
	// Not parallel: the environment holds a key the provider must ignore.
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_ORG_ID", "org-from-env")
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{"local"}})
			p := newProvider(t, srv.URL()+"/v1", api, func(c *Config) { c.APIKey = "" })
			r := stream(t, t.Context(), p, hello())
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if r.Response.Message.TextContent() != "local" {
				t.Errorf("text %q", r.Response.Message.TextContent())
			}
			h := srv.Requests()[0].Header
			for _, name := range []string{"Authorization", "OpenAI-Organization"} {
				if v := h.Values(name); len(v) > 0 {
					t.Errorf("%s header sent: %q", name, v)
				}
			}
		})
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		turn  llmtest.Turn
		model string
		want  llm.Error
	}{
		{"401", llmtest.Turn{Status: 401}, "", llm.Error{Kind: llm.KindAuth, Status: 401, Hint: authHint}},
		{"403", llmtest.Turn{Status: 403, ErrorMessage: "region not supported"}, "", llm.Error{Kind: llm.KindAuth, Status: 403, Message: "region not supported", Hint: authHint}},
		{"429", llmtest.Turn{Status: 429, RetryAfter: "3"}, "", llm.Error{Kind: llm.KindRateLimit, Status: 429, RetryAfter: 3 * time.Second}},
		{"500", llmtest.Turn{Status: 500}, "", llm.Error{Kind: llm.KindServer, Status: 500}},
		// A prompt too long for the window is its own kind (issue 12: the
		// agent loop compacts and retries); other 400s stay bad requests.
		{"400", llmtest.Turn{Status: 400, ErrorMessage: "context_length_exceeded: too long"}, "", llm.Error{Kind: llm.KindContextLength, Status: 400, Message: "context_length_exceeded: too long"}},
		{"400 other", llmtest.Turn{Status: 400, ErrorMessage: "messages: must be an array"}, "", llm.Error{Kind: llm.KindBadRequest, Status: 400, Message: "messages: must be an array"}},
		{"400 too long", llmtest.Turn{ContextExceeded: true}, "", llm.Error{Kind: llm.KindContextLength, Status: 400,
			Message: "This model's maximum context length is 200000 tokens. However, your messages resulted in 200001 tokens. Please reduce the length of the messages."}},
		{"404 model", llmtest.Turn{Text: []string{"unused"}}, "gpt-missing", llm.Error{
			Kind: llm.KindModelNotFound, Status: 404,
			Message: "model \"gpt-missing\" not found: The model `gpt-missing` does not exist or you do not have access to it.",
			Hint:    "check the model id against the models the server lists",
		}},
	}
	for _, tt := range tests {
		for _, api := range apis {
			t.Run(tt.name+"/"+api, func(t *testing.T) {
				t.Parallel()
				srv := llmtest.NewServer(t, tt.turn)
				srv.Models = []string{"gpt-test"}
				p := newProvider(t, srv.URL()+"/v1", api, func(c *Config) {
					if tt.model != "" {
						c.Model = tt.model
					}
				})
				r := stream(t, t.Context(), p, hello())
				e, ok := errors.AsType[*llm.Error](r.Err)
				if !ok {
					t.Fatalf("error %v (%T) is not *llm.Error", r.Err, r.Err)
				}
				if len(r.Deltas) != 0 {
					t.Errorf("deltas before the error: %v", r.Deltas)
				}
				got := llm.Error{Kind: e.Kind, Status: e.Status, RetryAfter: e.RetryAfter, Hint: e.Hint}
				want := tt.want
				if want.Message != "" {
					got.Message = e.Message
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				if e.Provider != "openai" || e.Message == "" || e.Err == nil {
					t.Errorf("provider %q message %q cause %v", e.Provider, e.Message, e.Err)
				}
			})
		}
	}
}

func TestStreamCut(t *testing.T) {
	t.Parallel()
	eachAPI(t, func(t *testing.T, api string) {
		// Cut after two text deltas: the chat stream's role chunk, or
		// the Responses stream's four opening events, come first.
		cut := map[string]int{APIChat: 3, APIResponses: 6}[api]
		srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{"a", "b", "c", "d"}, CutAfter: cut})
		r := stream(t, t.Context(), newProvider(t, srv.URL()+"/v1", api), hello())
		if got := llm.KindOf(r.Err); got != llm.KindStream {
			t.Fatalf("error kind %q (%v), want stream", got, r.Err)
		}
		want := []llm.Event{{Type: llm.EventTextDelta, Delta: "a"}, {Type: llm.EventTextDelta, Delta: "b"}}
		if diff := cmp.Diff(want, r.Deltas); diff != "" {
			t.Errorf("deltas before the cut (-want +got):\n%s", diff)
		}
	})
}

// sseServer serves handler and returns its API root.
func sseServer(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// writeSSE writes raw SSE lines and flushes.
func writeSSE(w http.ResponseWriter, lines ...string) {
	for _, l := range lines {
		fmt.Fprintf(w, "%s\n\n", l)
	}
	w.(http.Flusher).Flush()
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

// TestChatOllamaStyleToolCalls feeds the accumulator what compatible
// servers send, independently of llmtest: the whole call in one chunk
// together with finish_reason (openai/openai-go#417), calls without
// indexes, and a "stop" finish after tool calls.
func TestChatOllamaStyleToolCalls(t *testing.T) {
	t.Parallel()
	const head = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	tests := []struct {
		name  string
		lines []string
		want  []llm.ToolCall
	}{
		{
			name: "one chunk with finish_reason",
			lines: []string{
				`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_x1","index":0,"type":"function","function":{"name":"Read","arguments":"{\"path\":\"a.go\"}"}}]},"finish_reason":"tool_calls"}]}`,
				`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`,
			},
			want: []llm.ToolCall{{ID: "call_x1", Name: "Read", Input: json.RawMessage(`{"path":"a.go"}`)}},
		},
		{
			name: "two calls without indexes, finish stop",
			lines: []string{
				`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"Read","arguments":"{\"path\":"}},{"function":{"arguments":"\"b.go\"}"}},{"id":"call_2","type":"function","function":{"name":"Glob","arguments":"{}"}}]},"finish_reason":null}]}`,
				`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			},
			want: []llm.ToolCall{
				{ID: "call_1", Name: "Read", Input: json.RawMessage(`{"path":"b.go"}`)},
				{ID: "call_2", Name: "Glob", Input: json.RawMessage(`{}`)},
			},
		},
		{
			name: "two calls sharing index 0, no id on the second",
			lines: []string{
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Read","arguments":"{\"path\":\"c.go\"}"}}]},"finish_reason":null}]}`,
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"Read","arguments":""}}]},"finish_reason":null}]}`,
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"d.go\"}"}}]},"finish_reason":"tool_calls"}]}`,
			},
			want: []llm.ToolCall{
				{ID: "call_1", Name: "Read", Input: json.RawMessage(`{"path":"c.go"}`)},
				{ID: "call_2", Name: "Read", Input: json.RawMessage(`{"path":"d.go"}`)},
			},
		},
		{
			name: "malformed arguments stay serialisable",
			lines: []string{
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Read","arguments":"{\"path\":"}}]},"finish_reason":"length"}]}`,
			},
			want: []llm.ToolCall{{ID: "call_1", Name: "Read", Input: json.RawMessage(`"{\"path\":"`)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := sseServer(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				writeSSE(w, head)
				writeSSE(w, tt.lines...)
				writeSSE(w, "data: [DONE]")
			})
			r := stream(t, t.Context(), newProvider(t, base, APIChat), hello())
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if diff := cmp.Diff(tt.want, r.Response.Message.ToolCalls()); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			if r.Response.StopReason != llm.StopToolUse || r.Response.Model != "m" && r.Response.Model != "qwen3:8b" {
				t.Errorf("stop %q model %q", r.Response.StopReason, r.Response.Model)
			}
			if _, err := json.Marshal(r.Response.Message); err != nil {
				t.Errorf("message does not marshal: %v", err)
			}
		})
	}
}

func TestToolArgumentsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, args := range []string{`{"a":1}`, `{"path":`, `not json`, `"quoted"`} {
		in := toolInput(args)
		if !json.Valid(in) {
			t.Errorf("toolInput(%q) = %s, not JSON", args, in)
		}
		if got := toolArguments(in); got != args && !(args == `"quoted"` && got == "quoted") {
			t.Errorf("toolArguments(toolInput(%q)) = %q", args, got)
		}
	}
	if got := string(toolInput("  ")); got != "{}" {
		t.Errorf("empty arguments = %s", got)
	}
}

func TestIncompleteAndErrorEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		api   string
		lines []string
		want  llm.ErrorKind
		msg   string
	}{
		{
			name: "chat without finish_reason or [DONE]", api: APIChat,
			lines: []string{`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}`},
			want:  llm.KindStream, msg: "finish_reason",
		},
		{
			name: "chat error chunk", api: APIChat,
			lines: []string{
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}`,
				`data: {"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			},
			want: llm.KindRateLimit, msg: "Rate limit reached",
		},
		{
			// llama.cpp builds that stream their errors: a prompt over
			// the context size is a context overflow (the agent compacts).
			name: "chat error chunk llama.cpp too long", api: APIChat,
			lines: []string{
				`data: {"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`,
			},
			want: llm.KindContextLength, msg: "exceeds the available context size",
		},
		{
			name: "chat malformed chunk", api: APIChat,
			lines: []string{`data: {"id":`},
			want:  llm.KindStream, msg: "reading the response stream",
		},
		{
			name: "responses without response.completed", api: APIResponses,
			lines: []string{
				"event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"par","sequence_number":0}`,
			},
			want: llm.KindStream, msg: "response.completed",
		},
		{
			name: "response.failed", api: APIResponses,
			lines: []string{
				"event: response.failed\n" + `data: {"type":"response.failed","sequence_number":0,"response":{"id":"r","object":"response","status":"failed","error":{"code":"server_error","message":"The model crashed"},"output":[]}}`,
			},
			want: llm.KindServer, msg: "The model crashed",
		},
		{
			name: "error event", api: APIResponses,
			lines: []string{
				"event: error\n" + `data: {"type":"error","sequence_number":0,"code":"rate_limit_exceeded","message":"Slow down","param":null}`,
			},
			want: llm.KindRateLimit, msg: "Slow down",
		},
		{
			name: "unknown error event code", api: APIResponses,
			lines: []string{
				"event: error\n" + `data: {"type":"error","sequence_number":0,"code":"ERR_WEIRD","message":"Something","param":null}`,
			},
			want: llm.KindStream, msg: "ERR_WEIRD: Something",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := sseServer(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				writeSSE(w, tt.lines...)
			})
			r := stream(t, t.Context(), newProvider(t, base, tt.api), hello())
			e, ok := errors.AsType[*llm.Error](r.Err)
			if !ok {
				t.Fatalf("error %v (%T) is not *llm.Error", r.Err, r.Err)
			}
			if e.Kind != tt.want || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("error = %v, want kind %s with %q", e, tt.want, tt.msg)
			}
		})
	}
}

func TestResponsesIncompleteMaxTokens(t *testing.T) {
	t.Parallel()
	base := sseServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		writeSSE(w,
			"event: response.output_text.delta\n"+`data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Trunc","sequence_number":0}`,
			"event: response.output_item.done\n"+`data: {"type":"response.output_item.done","output_index":0,"sequence_number":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"incomplete","content":[{"type":"output_text","text":"Trunc","annotations":[]}]}}`,
			"event: response.incomplete\n"+`data: {"type":"response.incomplete","sequence_number":2,"response":{"id":"r","object":"response","model":"gpt-x","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},"output_tokens":16,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":25}}}`,
		)
	})
	r := stream(t, t.Context(), newProvider(t, base, APIResponses), hello())
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := &llm.Response{
		Message:    llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("Trunc")}},
		Usage:      llm.Usage{InputTokens: 5, OutputTokens: 16, CacheReadTokens: 4},
		StopReason: llm.StopMaxTokens,
		Model:      "gpt-x",
	}
	if diff := cmp.Diff(want, r.Response); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestNonJSON404(t *testing.T) {
	t.Parallel()
	eachAPI(t, func(t *testing.T, api string) {
		base := sseServer(t, http.NotFound)
		r := stream(t, t.Context(), newProvider(t, base, api), hello())
		e, ok := errors.AsType[*llm.Error](r.Err)
		if !ok || e.Kind != llm.KindBadRequest || e.Status != 404 || !strings.Contains(e.Hint, "OPENAI_BASE_URL") {
			t.Errorf("error = %#v", r.Err)
		}
	})
}

// blockingServer streams one text delta, then holds the response open
// until the client goes away, which it reports on the returned channel.
func blockingServer(t *testing.T, api string) (string, <-chan struct{}) {
	t.Helper()
	gone := make(chan struct{})
	base := sseServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		if api == APIChat {
			writeSSE(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"first"},"finish_reason":null}]}`)
		} else {
			writeSSE(w, "event: response.output_text.delta\n"+`data: {"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"first","sequence_number":0}`)
		}
		<-r.Context().Done()
		close(gone)
	})
	return base, gone
}

func TestCancel(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		t.Run(api+"/mid-stream", func(t *testing.T) {
			t.Parallel()
			base, gone := blockingServer(t, api)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var deltas []string
			var gotErr error
			for ev, err := range newProvider(t, base, api).Stream(ctx, hello()) {
				if err != nil {
					gotErr = err
					break
				}
				deltas = append(deltas, ev.Delta)
				cancel()
			}
			if llm.KindOf(gotErr) != llm.KindCancelled || !errors.Is(gotErr, context.Canceled) {
				t.Errorf("error = %v, want cancelled", gotErr)
			}
			if diff := cmp.Diff([]string{"first"}, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			waitClosed(t, gone)
		})
		t.Run(api+"/before-start", func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{"x"}})
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			r := stream(t, ctx, newProvider(t, srv.URL()+"/v1", api), hello())
			if llm.KindOf(r.Err) != llm.KindCancelled {
				t.Errorf("error = %v, want cancelled", r.Err)
			}
		})
	}
}

func TestEarlyStopClosesStream(t *testing.T) {
	t.Parallel()
	eachAPI(t, func(t *testing.T, api string) {
		base, gone := blockingServer(t, api)
		for ev, err := range newProvider(t, base, api).Stream(t.Context(), hello()) {
			if err != nil || ev.Delta != "first" {
				t.Fatalf("event %+v, error %v", ev, err)
			}
			break
		}
		waitClosed(t, gone)
	})
}

func waitClosed(t *testing.T, gone <-chan struct{}) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the connection close")
	}
}

// refusedAddr is an address on which connections are refused: a port
// this test holds bound but never listens on. A port merely closed after
// a Listen can be handed at once to another process's listener (the suite
// runs many test servers beside this one), one that may accept and never
// answer: the suite once waited minutes on it.
func refusedAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	base := "http://" + refusedAddr(t) + "/v1"
	eachAPI(t, func(t *testing.T, api string) {
		p := newProvider(t, base, api)
		// Bounded: a refused connection answers at once, and a server
		// that accepted and never answered would be waited for up to
		// llm.ResponseHeaderTimeout (10 min).
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		r := stream(t, ctx, p, hello())
		e, ok := errors.AsType[*llm.Error](r.Err)
		if !ok || e.Kind != llm.KindNetwork || !e.Retryable() || !strings.Contains(e.Message, base) {
			t.Errorf("error = %v", r.Err)
		}
		if _, err := p.ListModels(ctx); llm.KindOf(err) != llm.KindNetwork {
			t.Errorf("ListModels error = %v", err)
		}
	})
}

func TestListModels(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Models = []string{"gpt-5", "gpt-5-mini", "o4-mini"}
	p := newProvider(t, srv.URL()+"/v1", "")
	var _ llm.ModelLister = p
	got, err := p.ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(srv.Models, got); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestWithRetryRateLimitThenSuccess(t *testing.T) {
	t.Parallel()
	eachAPI(t, func(t *testing.T, api string) {
		srv := llmtest.NewServer(t,
			llmtest.Turn{Status: 429, RetryAfter: "0.001"},
			llmtest.Turn{Text: []string{"after retry"}},
		)
		var retries []llm.ErrorKind
		p := llm.WithRetry(newProvider(t, srv.URL()+"/v1", api), llm.RetryPolicy{
			MaxAttempts: 3,
			BaseDelay:   time.Millisecond,
			OnRetry: func(attempt int, wait time.Duration, err *llm.Error) {
				retries = append(retries, err.Kind)
				if wait != time.Millisecond {
					t.Errorf("wait %v, want the server's 1ms", wait)
				}
			},
		})
		r := stream(t, t.Context(), p, hello())
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Response.Message.TextContent() != "after retry" {
			t.Errorf("text %q", r.Response.Message.TextContent())
		}
		if diff := cmp.Diff([]llm.ErrorKind{llm.KindRateLimit}, retries); diff != "" {
			t.Errorf("retries (-want +got):\n%s", diff)
		}
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantAPI string
		wantErr string
	}{
		{"openai default", Config{APIKey: "k", Model: "m"}, APIResponses, ""},
		{"openai explicit host", Config{APIKey: "k", Model: "m", BaseURL: "https://API.openai.com/v1"}, APIResponses, ""},
		{"ollama", Config{Model: "m", BaseURL: "http://localhost:11434/v1"}, APIChat, ""},
		{"forced responses", Config{Model: "m", BaseURL: "http://localhost:8000/v1", API: "responses"}, APIResponses, ""},
		{"forced chat on openai", Config{APIKey: "k", Model: "m", API: "chat"}, APIChat, ""},
		{"no key no base", Config{Model: "m"}, "", "OPENAI_API_KEY"},
		{"bad api", Config{APIKey: "k", Model: "m", API: "completions"}, "", "MAESTRO_OPENAI_API"},
		{"no model", Config{APIKey: "k"}, "", "no model"},
		{"relative base", Config{Model: "m", BaseURL: "localhost:11434"}, "", "absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.API() != tt.wantAPI || p.Name() != "openai" || p.Model() != tt.cfg.Model {
				t.Errorf("api %q name %q model %q", p.API(), p.Name(), p.Model())
			}
		})
	}
	_, err := New(Config{Model: "m"})
	if e, ok := errors.AsType[*llm.Error](err); !ok || e.Kind != llm.KindAuth || !strings.Contains(e.Error(), "OPENAI_BASE_URL") {
		t.Errorf("missing key error = %v", err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"OPENAI_API_KEY":     " sk-1 ",
		"OPENAI_BASE_URL":    "http://localhost:1234/v1",
		"MAESTRO_OPENAI_API": "Responses",
		"OPENAI_ORG_ID":      "org-7",
	}
	got := configFromEnv("qwen3", func(k string) string { return env[k] })
	want := Config{APIKey: "sk-1", BaseURL: "http://localhost:1234/v1", Model: "qwen3", API: "responses", Organization: "org-7"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

// llama.cpp's server answers a prompt over its context size with HTTP 400,
// type exceed_context_size_error and a message whose wording changed
// between builds; each is a context overflow, so the agent loop compacts
// (it was a plain bad request: the run failed with no compaction).
func TestLlamaCppContextOverflow(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{
		"request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it",
		"the request exceeds the available context size, try increasing it",
		"input (5000 tokens) is larger than the max context size (4096 tokens). skipping",
		"some future wording",
	} {
		body := fmt.Sprintf(`{"error":{"code":400,"message":%q,"type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`, msg)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		p := newProvider(t, srv.URL+"/v1", APIChat)
		r := stream(t, t.Context(), p, hello())
		if e, ok := errors.AsType[*llm.Error](r.Err); !ok || e.Kind != llm.KindContextLength || !strings.Contains(e.Message, msg) {
			t.Errorf("%q: error %#v, want kind %s with the message", msg, r.Err, llm.KindContextLength)
		}
	}
}
