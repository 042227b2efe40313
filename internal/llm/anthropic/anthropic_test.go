package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// testTimeout bounds every model call a test makes.
const testTimeout = 30 * time.Second

// newProvider returns a provider talking to baseURL with an API key;
// change adjusts the config.
func newProvider(t testing.TB, baseURL string, change ...func(*Config)) *Provider {
	t.Helper()
	cfg := Config{APIKey: "sk-ant-test", BaseURL: baseURL, Model: "claude-test"}
	for _, c := range change {
		c(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func callCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func userRequest(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{llm.UserText(text)}}
}

func textDeltas(chunks ...string) []llm.Event {
	var evs []llm.Event
	for _, c := range chunks {
		evs = append(evs, llm.Event{Type: llm.EventTextDelta, Delta: c})
	}
	return evs
}

// requestBody decodes the n-th request the server received.
func requestBody(t *testing.T, s *llmtest.Server, n int) map[string]any {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) <= n {
		t.Fatalf("server received %d requests, want more than %d", len(reqs), n)
	}
	var m map[string]any
	if err := json.Unmarshal(reqs[n].Body, &m); err != nil {
		t.Fatalf("request %d body: %v", n, err)
	}
	return m
}

// asJSON re-encodes v through JSON to a generic value, for comparisons.
func asJSON(t *testing.T, v string) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		t.Fatalf("decode %q: %v", v, err)
	}
	return out
}

func TestStreamTextWithUsage(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, llmtest.Turn{
		Text:        []string{"Hello", ", ", "world."},
		InputTokens: 12, OutputTokens: 5, CacheReadTokens: 1000, CacheWriteTokens: 300,
	})
	p := newProvider(t, s.URL())
	req := userRequest("hi")
	req.System = "You are terse."

	r := llmtest.Drain(t, p.Stream(callCtx(t), req))
	if r.Err != nil {
		t.Fatalf("stream: %v", r.Err)
	}
	if diff := cmp.Diff(textDeltas("Hello", ", ", "world."), r.Deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	want := &llm.Response{
		Message:    llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("Hello, world.")}},
		Usage:      llm.Usage{InputTokens: 12, OutputTokens: 5, CacheReadTokens: 1000, CacheWriteTokens: 300},
		StopReason: llm.StopEndTurn,
		Model:      "claude-test",
	}
	if diff := cmp.Diff(want, r.Response); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}

	body := requestBody(t, s, 0)
	wantBody := asJSON(t, `{
		"model": "claude-test",
		"max_tokens": 8192,
		"stream": true,
		"thinking": {"type": "disabled"},
		"system": [{"type": "text", "text": "You are terse."}],
		"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
	}`)
	if diff := cmp.Diff(wantBody, any(body)); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestStreamThinkingAndText(t *testing.T) {
	t.Parallel()
	const thinking = "The user greets me; answer briefly."
	s := llmtest.NewServer(t, llmtest.Turn{Thinking: thinking, Text: []string{"Hi!"}, InputTokens: 3, OutputTokens: 9})
	p := newProvider(t, s.URL())
	req := userRequest("hello")
	req.Thinking = llm.ThinkingLow

	r := llmtest.Drain(t, p.Stream(callCtx(t), req))
	if r.Err != nil {
		t.Fatalf("stream: %v", r.Err)
	}
	var gotThinking string
	for _, d := range r.Deltas {
		if d.Type == llm.EventThinkingDelta {
			gotThinking += d.Delta
		}
	}
	if gotThinking != thinking {
		t.Errorf("thinking deltas = %q, want %q", gotThinking, thinking)
	}
	wantParts := []llm.Part{
		{Type: llm.PartThinking, Text: thinking, Signature: llmtest.ThinkingSignature(thinking)},
		llm.Text("Hi!"),
	}
	if diff := cmp.Diff(wantParts, r.Response.Message.Parts); diff != "" {
		t.Errorf("parts (-want +got):\n%s", diff)
	}
	if last := r.Deltas[len(r.Deltas)-1]; last != (llm.Event{Type: llm.EventTextDelta, Delta: "Hi!"}) {
		t.Errorf("last delta = %+v, want the text after the thinking", last)
	}
}

func TestStreamToolCallWithFragmentedInput(t *testing.T) {
	t.Parallel()
	input := `{"path":"internal/llm/llm.go","offset":10,"limit":40}`
	s := llmtest.NewServer(t, llmtest.Turn{
		Text:      []string{"Reading."},
		ToolCalls: []llmtest.ToolCall{{ID: "toolu_1", Name: "Read", Input: input, Fragments: 7}, {Name: "Glob", Input: `{"pattern":"*.go"}`}},
	})
	p := newProvider(t, s.URL())
	req := userRequest("read it")
	req.Tools = []llm.ToolSpec{{
		Name:        "Read",
		Description: "Read a file.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}`),
	}, {Name: "Glob"}}

	r := llmtest.Drain(t, p.Stream(callCtx(t), req))
	if r.Err != nil {
		t.Fatalf("stream: %v", r.Err)
	}
	wantCalls := []llm.ToolCall{
		{ID: "toolu_1", Name: "Read", Input: json.RawMessage(input)},
		{ID: "toolu_002", Name: "Glob", Input: json.RawMessage(`{"pattern":"*.go"}`)},
	}
	if diff := cmp.Diff(wantCalls, r.Response.Message.ToolCalls()); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if r.Response.StopReason != llm.StopToolUse {
		t.Errorf("stop reason = %q, want tool_use", r.Response.StopReason)
	}
	body := requestBody(t, s, 0)
	wantTools := asJSON(t, `[
		{"name":"Read","description":"Read a file.","input_schema":{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}},
		{"name":"Glob","input_schema":{"type":"object"}}
	]`)
	if diff := cmp.Diff(wantTools, body["tools"]); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

func TestMultiTurnSendsSignatureAndToolResult(t *testing.T) {
	t.Parallel()
	const thinking = "I should list the files."
	s := llmtest.NewServer(t,
		llmtest.Turn{Thinking: thinking, ToolCalls: []llmtest.ToolCall{{ID: "toolu_ls", Name: "Bash", Input: `{"command":"ls"}`}}},
		llmtest.Turn{Text: []string{"There are two files."}},
	)
	p := newProvider(t, s.URL())
	req := userRequest("what is here?")
	req.Thinking = llm.ThinkingMedium

	first := llmtest.Drain(t, p.Stream(callCtx(t), req))
	if first.Err != nil {
		t.Fatalf("first call: %v", first.Err)
	}
	req.Messages = append(req.Messages, first.Response.Message, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{
		Type:       llm.PartToolResult,
		ToolResult: &llm.ToolResult{CallID: "toolu_ls", Name: "Bash", Content: "exit status 2: ls: permission denied", IsError: true},
	}}})
	second := llmtest.Drain(t, p.Stream(callCtx(t), req))
	if second.Err != nil {
		t.Fatalf("second call: %v", second.Err)
	}
	if got := second.Response.Message.TextContent(); got != "There are two files." {
		t.Errorf("second answer = %q", got)
	}

	body := requestBody(t, s, 1)
	wantMessages := asJSON(t, `[
		{"role":"user","content":[{"type":"text","text":"what is here?"}]},
		{"role":"assistant","content":[
			{"type":"thinking","thinking":"I should list the files.","signature":"`+llmtest.ThinkingSignature(thinking)+`"},
			{"type":"tool_use","id":"toolu_ls","name":"Bash","input":{"command":"ls"}}
		]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_ls","is_error":true,"content":[{"type":"text","text":"exit status 2: ls: permission denied"}]}
		]}
	]`)
	if diff := cmp.Diff(wantMessages, body["messages"]); diff != "" {
		t.Errorf("second request messages (-want +got):\n%s", diff)
	}
}

func TestRequestMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		req       llm.Request
		maxTokens int // Config.MaxTokens
		want      map[string]string
	}{
		{
			name: "thinking off",
			req:  llm.Request{Thinking: llm.ThinkingOff},
			want: map[string]string{"max_tokens": `8192`, "thinking": `{"type":"disabled"}`},
		},
		{
			name: "minimal thinking raises max_tokens above the budget",
			req:  llm.Request{Thinking: llm.ThinkingMinimal, MaxTokens: 1000},
			want: map[string]string{"max_tokens": `2024`, "thinking": `{"type":"enabled","budget_tokens":1024}`},
		},
		{
			name: "medium thinking fits in max_tokens",
			req:  llm.Request{Thinking: llm.ThinkingMedium, MaxTokens: 20000},
			want: map[string]string{"max_tokens": `20000`, "thinking": `{"type":"enabled","budget_tokens":8192}`},
		},
		{
			name: "high thinking with the default cap",
			req:  llm.Request{Thinking: llm.ThinkingHigh},
			want: map[string]string{"max_tokens": `24576`, "thinking": `{"type":"enabled","budget_tokens":16384}`},
		},
		{
			name: "ultra thinking",
			req:  llm.Request{Thinking: llm.ThinkingUltra},
			want: map[string]string{"max_tokens": `40192`, "thinking": `{"type":"enabled","budget_tokens":32000}`},
		},
		{
			name:      "config default cap",
			req:       llm.Request{},
			maxTokens: 1234,
			want:      map[string]string{"max_tokens": `1234`, "thinking": `{"type":"disabled"}`},
		},
		{
			name: "parts: image, empty text and unsigned thinking dropped, empty tool result",
			req: llm.Request{Messages: []llm.Message{
				{Role: llm.RoleUser, Parts: []llm.Part{llm.Text(""), {Type: llm.PartImage, Image: &llm.Image{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}}, llm.Text("what is this?")}},
				{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartThinking, Text: "from another provider"}, {Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "t1", Name: "Glob"}}}},
				{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "t1"}}}},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},{"type":"text","text":"what is this?"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Glob","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}
			]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Turn{Text: []string{"ok"}})
			p := newProvider(t, s.URL(), func(c *Config) { c.MaxTokens = tt.maxTokens })
			req := tt.req
			if req.Messages == nil {
				req.Messages = []llm.Message{llm.UserText("hi")}
			}
			if r := llmtest.Drain(t, p.Stream(callCtx(t), &req)); r.Err != nil {
				t.Fatalf("stream: %v", r.Err)
			}
			body := requestBody(t, s, 0)
			for key, want := range tt.want {
				if diff := cmp.Diff(asJSON(t, want), body[key]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", key, diff)
				}
			}
		})
	}
}

func TestRequestMappingErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  llm.Request
		want string
	}{
		{"unknown thinking level", llm.Request{Thinking: "extreme"}, `unknown thinking level "extreme"`},
		{"unknown role", llm.Request{Messages: []llm.Message{{Role: "system", Parts: []llm.Part{llm.Text("x")}}}}, `message 0: unknown role "system"`},
		{"tool call without call", llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall}}}}}, "part 0: tool_call part without tool call"},
		{"bad schema", llm.Request{Tools: []llm.ToolSpec{{Name: "X", InputSchema: json.RawMessage(`{`)}}}, `tool "X": input schema is not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t)
			p := newProvider(t, s.URL())
			r := llmtest.Drain(t, p.Stream(callCtx(t), &tt.req))
			e, ok := errors.AsType[*llm.Error](r.Err)
			if !ok || e.Kind != llm.KindBadRequest || !strings.Contains(e.Message, tt.want) {
				t.Errorf("err = %v, want a bad_request error containing %q", r.Err, tt.want)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("server received %d requests, want none", n)
			}
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		turn       llmtest.Turn
		kind       llm.ErrorKind
		retryAfter time.Duration
		hint       string
	}{
		{"401", llmtest.Turn{Status: 401}, llm.KindAuth, 0, authHint},
		{"403", llmtest.Turn{Status: 403}, llm.KindAuth, 0, authHint},
		{"429 with Retry-After", llmtest.Turn{Status: 429, RetryAfter: "3"}, llm.KindRateLimit, 3 * time.Second, ""},
		{"529", llmtest.Turn{Status: 529}, llm.KindOverloaded, 0, ""},
		{"500", llmtest.Turn{Status: 500}, llm.KindServer, 0, ""},
		{"400", llmtest.Turn{Status: 400, ErrorMessage: "messages: roles must alternate"}, llm.KindBadRequest, 0, ""},
		{"404 not about a model", llmtest.Turn{Status: 404, ErrorMessage: "Not found"}, llm.KindBadRequest, 0, baseURLHint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, tt.turn)
			p := newProvider(t, s.URL())
			r := llmtest.Drain(t, p.Stream(callCtx(t), userRequest("hi")))
			e, ok := errors.AsType[*llm.Error](r.Err)
			if !ok {
				t.Fatalf("err = %v (%T), want *llm.Error", r.Err, r.Err)
			}
			if e.Kind != tt.kind || e.Status != tt.turn.Status || e.RetryAfter != tt.retryAfter || e.Hint != tt.hint || e.Provider != "anthropic" {
				t.Errorf("error = %+v, want kind %s status %d retry-after %v hint %q", e, tt.kind, tt.turn.Status, tt.retryAfter, tt.hint)
			}
			if tt.turn.ErrorMessage != "" && e.Message != tt.turn.ErrorMessage {
				t.Errorf("message = %q, want the API's %q", e.Message, tt.turn.ErrorMessage)
			}
			if len(r.Deltas) != 0 {
				t.Errorf("deltas before the error: %+v", r.Deltas)
			}
		})
	}
}

func TestModelNotFoundAndListModels(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, llmtest.Turn{Text: []string{"never"}})
	s.Models = []string{"claude-a", "claude-b"}
	p := newProvider(t, s.URL(), func(c *Config) { c.Model = "claude-nope" })

	r := llmtest.Drain(t, p.Stream(callCtx(t), userRequest("hi")))
	e, ok := errors.AsType[*llm.Error](r.Err)
	if !ok || e.Kind != llm.KindModelNotFound || e.Status != 404 || !strings.Contains(e.Message, `"claude-nope"`) {
		t.Fatalf("err = %v, want model_not_found naming claude-nope", r.Err)
	}
	models, err := p.ListModels(callCtx(t))
	if err != nil {
		t.Fatalf("ListModels: %v", err)
	}
	if diff := cmp.Diff([]string{"claude-a", "claude-b"}, models); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestListModelsError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
	}))
	t.Cleanup(srv.Close)
	_, err := newProvider(t, srv.URL).ListModels(callCtx(t))
	if llm.KindOf(err) != llm.KindAuth {
		t.Errorf("err = %v, want auth", err)
	}
}

func TestStreamCut(t *testing.T) {
	t.Parallel()
	// Events: message_start, content_block_start, ping, delta "a" — then the
	// connection drops.
	s := llmtest.NewServer(t, llmtest.Turn{Text: []string{"a", "b", "c"}, CutAfter: 4})
	p := newProvider(t, s.URL())
	r := llmtest.Drain(t, p.Stream(callCtx(t), userRequest("hi")))
	if diff := cmp.Diff(textDeltas("a"), r.Deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	if kind := llm.KindOf(r.Err); kind != llm.KindStream {
		t.Errorf("err = %v (kind %q), want stream", r.Err, kind)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cutAfter int
		deltas   []llm.Event
		kind     llm.ErrorKind
	}{
		{"before any output", 2, nil, llm.KindOverloaded},
		{"after output", 4, textDeltas("a"), llm.KindStream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Turn{Text: []string{"a", "b"}, Status: 529, CutAfter: tt.cutAfter})
			p := newProvider(t, s.URL())
			r := llmtest.Drain(t, p.Stream(callCtx(t), userRequest("hi")))
			if diff := cmp.Diff(tt.deltas, r.Deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			e, ok := errors.AsType[*llm.Error](r.Err)
			if !ok || e.Kind != tt.kind || !strings.Contains(e.Message, "Overloaded") {
				t.Errorf("err = %v, want kind %s mentioning Overloaded", r.Err, tt.kind)
			}
		})
	}
}

// holdAfter serves h but stalls the response after n flushed SSE events
// until the client goes away, then closes gone.
func holdAfter(h http.Handler, n int, gone chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&holdingWriter{ResponseWriter: w, left: n, done: r.Context().Done(), gone: gone}, r)
	})
}

type holdingWriter struct {
	http.ResponseWriter
	left int
	done <-chan struct{}
	gone chan<- struct{}
}

func (w *holdingWriter) Flush() {
	w.ResponseWriter.(http.Flusher).Flush()
	w.left--
	if w.left == 0 {
		<-w.done
		close(w.gone)
	}
}

func TestCancelMidStream(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	srv := httptest.NewServer(holdAfter(llmtest.New(llmtest.Turn{Text: []string{"a", "b"}}).Handler(), 4, gone))
	t.Cleanup(srv.Close)
	p := newProvider(t, srv.URL)

	ctx, cancel := context.WithCancel(callCtx(t))
	defer cancel()
	var deltas []llm.Event
	var streamErr error
	start := time.Now()
	for ev, err := range p.Stream(ctx, userRequest("hi")) {
		if err != nil {
			streamErr = err
			break
		}
		deltas = append(deltas, ev)
		cancel()
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("cancellation took %v", elapsed)
	}
	if diff := cmp.Diff(textDeltas("a"), deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	if kind := llm.KindOf(streamErr); kind != llm.KindCancelled {
		t.Errorf("err = %v (kind %q), want cancelled", streamErr, kind)
	}
	if _, ok := errors.AsType[*llm.Error](streamErr); !ok {
		t.Errorf("err = %T, want *llm.Error", streamErr)
	}
	waitClosed(t, gone, "server never saw the client go away")
}

func TestBreakClosesStream(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	srv := httptest.NewServer(holdAfter(llmtest.New(llmtest.Turn{Text: []string{"a", "b"}}).Handler(), 4, gone))
	t.Cleanup(srv.Close)
	p := newProvider(t, srv.URL)
	for ev, err := range p.Stream(callCtx(t), userRequest("hi")) {
		if err != nil || ev.Delta != "a" {
			t.Fatalf("first item = %+v, %v", ev, err)
		}
		break
	}
	waitClosed(t, gone, "the request stayed open after the consumer stopped")
}

func waitClosed(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testTimeout):
		t.Fatal(msg)
	}
}

func TestNetworkError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := llmtest.Drain(t, newProvider(t, url).Stream(callCtx(t), userRequest("hi")))
	if kind := llm.KindOf(r.Err); kind != llm.KindNetwork {
		t.Errorf("err = %v (kind %q), want network", r.Err, kind)
	}
}

func TestWithRetryRecoversFromRateLimit(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t,
		llmtest.Turn{Status: 429, RetryAfter: "0"},
		llmtest.Turn{Text: []string{"recovered"}},
	)
	var retries []llm.ErrorKind
	var mu sync.Mutex
	p := llm.WithRetry(newProvider(t, s.URL()), llm.RetryPolicy{
		BaseDelay: time.Millisecond,
		OnRetry: func(_ int, _ time.Duration, err *llm.Error) {
			mu.Lock()
			defer mu.Unlock()
			retries = append(retries, err.Kind)
		},
	})
	r := llmtest.Drain(t, p.Stream(callCtx(t), userRequest("hi")))
	if r.Err != nil {
		t.Fatalf("stream: %v", r.Err)
	}
	if got := r.Response.Message.TextContent(); got != "recovered" {
		t.Errorf("text = %q", got)
	}
	if diff := cmp.Diff([]llm.ErrorKind{llm.KindRateLimit}, retries); diff != "" {
		t.Errorf("retries (-want +got):\n%s", diff)
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("server received %d requests, want 2 (the SDK must not retry on its own)", n)
	}
}

func TestAuthHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		cfg           func(*Config)
		apiKey, authz string
	}{
		{"api key", func(c *Config) {}, "sk-ant-test", ""},
		{"auth token", func(c *Config) { c.APIKey, c.AuthToken = "", "tok-123" }, "", "Bearer tok-123"},
		{"api key wins", func(c *Config) { c.AuthToken = "tok-123" }, "sk-ant-test", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Turn{Text: []string{"ok"}})
			if r := llmtest.Drain(t, newProvider(t, s.URL(), tt.cfg).Stream(callCtx(t), userRequest("hi"))); r.Err != nil {
				t.Fatalf("stream: %v", r.Err)
			}
			h := s.Requests()[0].Header
			if h.Get("X-Api-Key") != tt.apiKey || h.Get("Authorization") != tt.authz || h.Get("Anthropic-Version") == "" {
				t.Errorf("x-api-key %q authorization %q anthropic-version %q, want %q %q set", h.Get("X-Api-Key"), h.Get("Authorization"), h.Get("Anthropic-Version"), tt.apiKey, tt.authz)
			}
		})
	}
}

func TestNewRequiresCredentials(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Model: "claude-test"})
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") || !strings.Contains(err.Error(), "ANTHROPIC_AUTH_TOKEN") {
		t.Errorf("err = %v, want one naming ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN", err)
	}
	if llm.KindOf(err) != llm.KindAuth {
		t.Errorf("kind = %q, want auth", llm.KindOf(err))
	}
	if _, err := New(Config{APIKey: "k"}); err == nil {
		t.Error("New without a model succeeded")
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "key")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	want := Config{APIKey: "key", AuthToken: "token", BaseURL: "http://127.0.0.1:1", Model: "claude-x"}
	if diff := cmp.Diff(want, ConfigFromEnv("claude-x")); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestProviderIdentity(t *testing.T) {
	t.Parallel()
	p := newProvider(t, "http://127.0.0.1:1")
	var _ llm.Provider = p
	var _ llm.ModelLister = p
	if p.Name() != "anthropic" || p.Model() != "claude-test" {
		t.Errorf("name %q model %q", p.Name(), p.Model())
	}
}
