// Package llmtest provides fake model servers that speak the real wire
// formats — Anthropic Messages (SSE), OpenAI Chat Completions (SSE) and
// OpenAI Responses (SSE) — so that tests drive the official SDKs, and later
// real agent CLIs, without a network. A Server answers each model request
// with the next scripted Turn, in order, whatever endpoint it arrives on.
//
// It is usable in-process (NewServer) and as a standalone process
// (cmd/maestro-fakemodel).
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// ToolCall is a scripted tool call.
type ToolCall struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Input is the JSON object of arguments.
	Input string `json:"input"`
	// Fragments splits Input into this many streamed deltas (default 2),
	// exercising the SDKs' accumulators.
	Fragments int `json:"fragments,omitempty"`
}

// Turn is one scripted response. Either it fails (Status != 0) or it
// streams Thinking, then Text chunks, then ToolCalls, then usage and a stop.
type Turn struct {
	Thinking  string     `json:"thinking,omitempty"`
	Text      []string   `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Usage reported for the turn. InputTokens excludes cache reads and
	// writes (Anthropic semantics); the OpenAI formats report prompt tokens
	// as input + cache reads, as OpenAI does.
	InputTokens      int64 `json:"input_tokens,omitempty"`
	OutputTokens     int64 `json:"output_tokens,omitempty"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`

	// Status, when non-zero, answers the request with this HTTP error in
	// the wire format's error body (400, 401, 404, 429, 500, 529, …).
	Status       int    `json:"status,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	// RetryAfter is sent as the Retry-After header with an error status.
	RetryAfter string `json:"retry_after,omitempty"`
	// CutAfter, when > 0, ends the stream abruptly after that many SSE
	// events (no terminal event), simulating a dropped connection.
	CutAfter int `json:"cut_after,omitempty"`
	// ContextExceeded answers HTTP 400 with the format's own "the prompt
	// does not fit the context window" error: Anthropic's
	// invalid_request_error "prompt is too long: N tokens > M maximum",
	// OpenAI's context_length_exceeded. M is the model's window
	// (Server.ContextWindows, else 200000), N estimated from the body.
	ContextExceeded bool `json:"context_exceeded,omitempty"`
}

// Request is a request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the request body into a generic map.
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Server is a scripted fake model server.
type Server struct {
	// Models, when non-empty, is the list GET /v1/models answers and the
	// set of accepted model ids: a request for another model gets the
	// format's 404 model-not-found error.
	Models []string
	// Loop makes the script start over when it runs out instead of
	// answering 500 "fake model: script exhausted: …".
	Loop bool
	// ContextWindows gives models a context window: GET /v1/models lists
	// it as the model's context_length (as OpenRouter does), and POST
	// /api/show answers with it in Ollama's model_info; Listing picks
	// another server's way of stating it.
	ContextWindows map[string]int64
	// OllamaInfo keeps the windows out of the listing, as Ollama's
	// /v1/models does: only POST /api/show tells them (the same as
	// Listing: ListingOllama).
	OllamaInfo bool
	// Listing is how the server states the windows (ListingStyle).
	Listing ListingStyle

	mu       sync.Mutex
	turns    []Turn
	next     int
	requests []Request

	httpServer *httptest.Server
}

// New returns a server with the given script; serve it with Handler.
func New(turns ...Turn) *Server {
	return &Server{turns: turns}
}

// NewServer starts an in-process server for a test and closes it at the
// end of the test. Its base URL is URL().
func NewServer(t testing.TB, turns ...Turn) *Server {
	t.Helper()
	s := New(turns...)
	s.httpServer = httptest.NewServer(s.Handler())
	t.Cleanup(s.httpServer.Close)
	return s
}

// URL is the base URL of a server started by NewServer (no trailing slash,
// no /v1).
func (s *Server) URL() string { return s.httpServer.URL }

// Enqueue appends turns to the script.
func (s *Server) Enqueue(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// Requests returns the model requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Remaining is the number of unserved turns.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns) - s.next
}

// record adds a request to Requests without taking a turn.
func (s *Server) record(r *http.Request, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
}

func (s *Server) take(r *http.Request, body []byte) (Turn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	if s.next >= len(s.turns) {
		if !s.Loop || len(s.turns) == 0 {
			return Turn{}, false
		}
		s.next = 0
	}
	t := s.turns[s.next]
	s.next++
	return t, true
}

// exhausted is the error a request past the script's last turn gets, in
// the words of the fake model server's user (it said "llmtest: script
// exhausted", naming a package of Maestro's tree).
func (s *Server) exhausted() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turns) == 0 {
		return "fake model: the script has no turns, so it answers no request"
	}
	return fmt.Sprintf("fake model: script exhausted: its %d turn(s) were all played (give maestro-fakemodel --loop to play them again, or a longer script)", len(s.turns))
}

// Handler serves the fake API:
//
//	POST /v1/messages          Anthropic Messages (streaming)
//	POST /v1/chat/completions  OpenAI Chat Completions (streaming)
//	POST /v1/responses         OpenAI Responses (streaming)
//	GET  /v1/models            model list, in the format the headers suggest
//	POST /api/show             Ollama's model info (context windows)
//	GET  /props                llama.cpp's server properties (Listing)
//	GET  /api/v0/models/{id}   LM Studio's model info (Listing)
//
// The /v1 prefix is optional, for clients configured with a bare base URL.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, prefix := range []string{"/v1", ""} {
		mux.HandleFunc("POST "+prefix+"/messages", s.modelCall(s.serveAnthropic))
		mux.HandleFunc("POST "+prefix+"/chat/completions", s.modelCall(s.serveChat))
		mux.HandleFunc("POST "+prefix+"/responses", s.modelCall(s.serveResponses))
		mux.HandleFunc("GET "+prefix+"/models", s.serveModels)
	}
	mux.HandleFunc("POST /api/show", s.serveOllamaShow)
	mux.HandleFunc("GET /props", s.serveLlamaCppProps)
	mux.HandleFunc("GET /api/v0/models/{model}", s.serveLMStudioModel)
	mux.HandleFunc(GeminiRoute, s.serveGeminiRoute)
	return mux
}

type format func(w http.ResponseWriter, r *http.Request, req map[string]any, turn Turn)

func (s *Server) modelCall(serve format) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "body is not JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		// A model the server does not have is refused before the script
		// is read, as a real API refuses it: whatever the next turn
		// scripts (an error status too), and without taking that turn.
		if model, _ := req["model"].(string); len(s.Models) > 0 && !slices.Contains(s.Models, model) {
			s.record(r, body)
			serve(w, r, req, Turn{Status: http.StatusNotFound, ErrorMessage: fmt.Sprintf("model: %s", model)})
			return
		}
		turn, ok := s.take(r, body)
		if !ok {
			turn = Turn{Status: http.StatusInternalServerError, ErrorMessage: s.exhausted()}
		}
		if turn.ContextExceeded {
			model, _ := req["model"].(string)
			turn = s.tooLong(r.URL.Path, model, len(body), turn)
		}
		serve(w, r, req, turn)
	}
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	type anthropicModel struct {
		ID          string `json:"id"`
		Type        string `json:"type"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
	type openaiModel struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
		// ContextLength is the model's window, when known.
		ContextLength int64 `json:"context_length,omitempty"`
		// MaxModelLen is vLLM's field for it.
		MaxModelLen int64 `json:"max_model_len,omitempty"`
		// Meta is llama.cpp's model metadata (n_ctx_train).
		Meta map[string]int64 `json:"meta,omitempty"`
	}
	if r.Header.Get("anthropic-version") != "" {
		data := []anthropicModel{}
		for _, m := range s.Models {
			data = append(data, anthropicModel{ID: m, Type: "model", DisplayName: m, CreatedAt: "2026-01-01T00:00:00Z"})
		}
		first, last := "", ""
		if len(data) > 0 {
			first, last = data[0].ID, data[len(data)-1].ID
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
		return
	}
	data := []openaiModel{}
	for _, m := range s.Models {
		e := openaiModel{ID: m, Object: "model", Created: 1767225600, OwnedBy: "llmtest"}
		n := s.ContextWindows[m]
		switch {
		case n == 0 || s.OllamaInfo:
		case s.Listing == ListingContextLength:
			e.ContextLength = n
		case s.Listing == ListingVLLM:
			e.MaxModelLen = n
		case s.Listing == ListingLlamaCpp:
			e.OwnedBy, e.Meta = "llamacpp", map[string]int64{"n_vocab": 32000, "n_ctx_train": trainedWindow(n)}
		}
		data = append(data, e)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

// ListingStyle is how a fake OpenAI-compatible server states a model's
// context window, as the local servers each do (docs/compaction.md).
type ListingStyle string

const (
	// ListingContextLength: context_length in the /v1/models entry
	// (OpenRouter's style).
	ListingContextLength ListingStyle = ""
	// ListingVLLM: max_model_len in the /v1/models entry (vLLM).
	ListingVLLM ListingStyle = "vllm"
	// ListingLlamaCpp: llama.cpp's server: the entry's meta.n_ctx_train is
	// the trained length (four times the window here), GET /props
	// answers the window the server runs with as
	// default_generation_settings.n_ctx.
	ListingLlamaCpp ListingStyle = "llamacpp"
	// ListingLMStudio: LM Studio: nothing in /v1/models; its native GET
	// /api/v0/models/{id} answers max_context_length (four times the
	// window here) and, the model being loaded, loaded_context_length.
	ListingLMStudio ListingStyle = "lmstudio"
	// ListingOllama: Ollama: nothing in /v1/models, POST /api/show
	// answers model_info "<arch>.context_length" (as OllamaInfo).
	ListingOllama ListingStyle = "ollama"
)

// trainedWindow is the length a fake model was trained for, larger than
// the window the server runs it with.
func trainedWindow(n int64) int64 { return 4 * n }

// serveLlamaCppProps answers llama.cpp's GET /props: the window of the
// model it serves (the first with one) as default_generation_settings.n_ctx.
func (s *Server) serveLlamaCppProps(w http.ResponseWriter, r *http.Request) {
	if s.Listing != ListingLlamaCpp {
		http.NotFound(w, r)
		return
	}
	model := r.URL.Query().Get("model")
	if model == "" && len(s.Models) > 0 {
		model = s.Models[0]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"default_generation_settings": map[string]any{"n_ctx": s.ContextWindows[model]},
		"total_slots":                 1,
		"model_path":                  "/models/" + model + ".gguf",
	})
}

// serveLMStudioModel answers LM Studio's GET /api/v0/models/{model}.
func (s *Server) serveLMStudioModel(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("model")
	n, ok := s.ContextWindows[model]
	if s.Listing != ListingLMStudio || !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": fmt.Sprintf("model %q not found", model)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": model, "object": "model", "type": "llm", "arch": "llama", "state": "loaded",
		"max_context_length": trainedWindow(n), "loaded_context_length": n,
	})
}

// window is the context window of model (200000 when not configured).
func (s *Server) window(model string) int64 {
	if n := s.ContextWindows[model]; n > 0 {
		return n
	}
	return 200_000
}

// tooLong turns a ContextExceeded turn into the format's error: status
// 400 and the message the API sends (path tells Anthropic from OpenAI).
func (s *Server) tooLong(path, model string, size int, turn Turn) Turn {
	window := s.window(model)
	tokens := max(int64(size/4), window+1)
	turn.Status = http.StatusBadRequest
	if strings.HasSuffix(path, "/messages") {
		turn.ErrorMessage = fmt.Sprintf("prompt is too long: %d tokens > %d maximum", tokens, window)
	} else {
		turn.ErrorMessage = fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. "+
			"Please reduce the length of the messages.", window, tokens)
	}
	return turn
}

// serveOllamaShow answers Ollama's POST /api/show for a model with a
// configured window: its model_info carries "<arch>.context_length".
func (s *Server) serveOllamaShow(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
	n, ok := s.ContextWindows[req.Model]
	if !ok || !s.OllamaInfo && s.Listing != ListingOllama && s.Listing != ListingContextLength {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf("model '%s' not found", req.Model)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"modelfile":  "FROM " + req.Model,
		"parameters": "",
		"details":    map[string]any{"format": "gguf", "family": "llama"},
		"model_info": map[string]any{"general.architecture": "llama", "llama.context_length": n},
	})
}

// sse writes Server-Sent Events and honours Turn.CutAfter.
type sse struct {
	w        http.ResponseWriter
	flusher  http.Flusher
	sent     int
	cutAfter int
}

func newSSE(w http.ResponseWriter, cutAfter int) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, flusher: f, cutAfter: cutAfter}
}

// send writes one event (event may be "" for data-only events, as OpenAI
// Chat uses). It returns false once the stream has been cut; the handler
// must then return without writing anything else.
func (e *sse) send(event string, data any) bool {
	if e.cutAfter > 0 && e.sent >= e.cutAfter {
		e.cut()
		return false
	}
	var payload []byte
	switch d := data.(type) {
	case string:
		payload = []byte(d)
	default:
		var err error
		payload, err = json.Marshal(d)
		if err != nil {
			panic(err)
		}
	}
	if event != "" {
		fmt.Fprintf(e.w, "event: %s\n", event)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", payload)
	if e.flusher != nil {
		e.flusher.Flush()
	}
	e.sent++
	return true
}

// cut drops the connection without a terminal event.
func (e *sse) cut() {
	if e.flusher != nil {
		e.flusher.Flush()
	}
	if hj, ok := e.w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// fragments splits s into about n nearly equal pieces (n >= 1) without
// cutting a UTF-8 character in half.
func fragments(s string, n int) []string { return splitUTF8(s, n) }

// callID returns the call's id or a generated one.
func callID(tc ToolCall, prefix string, i int) string {
	if tc.ID != "" {
		return tc.ID
	}
	return fmt.Sprintf("%s_%03d", prefix, i)
}
