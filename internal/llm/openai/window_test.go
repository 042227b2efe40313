package openai

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// An OpenAI-compatible server states a local model's window in its
// listing (context_length, vLLM's max_model_len), llama.cpp in /props
// (not the larger trained length of its listing), LM Studio in its native
// model info (the loaded length, not the larger maximum), Ollama in
// /api/show; the configuration wins over all; a model the server does
// not describe gets the default with a notice.
func TestContextWindowSources(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		ollama     bool
		listing    llmtest.ListingStyle
		configured map[string]int64
		model      string
		want       llm.Window
	}{
		{"listing", false, llmtest.ListingContextLength, nil, "local-x", llm.Window{Tokens: 32768, Source: llm.WindowProvider}},
		{"ollama model info", true, llmtest.ListingContextLength, nil, "local-x", llm.Window{Tokens: 32768, Source: llm.WindowProvider}},
		{"ollama listing style", false, llmtest.ListingOllama, nil, "local-x", llm.Window{Tokens: 32768, Source: llm.WindowProvider}},
		{"vllm max_model_len", false, llmtest.ListingVLLM, nil, "local-x", llm.Window{Tokens: 32768, Source: llm.WindowProvider}},
		{"llama.cpp props", false, llmtest.ListingLlamaCpp, nil, "local-x", llm.Window{Tokens: 32768, Source: llm.WindowProvider}},
		{"lm studio loaded length", false, llmtest.ListingLMStudio, nil, "local-x", llm.Window{Tokens: 32768, Source: llm.WindowProvider}},
		{"config wins", false, llmtest.ListingContextLength, map[string]int64{"local-x": 8192}, "local-x", llm.Window{Tokens: 8192, Source: llm.WindowConfig}},
		{"not described", false, llmtest.ListingContextLength, nil, "other", llm.Window{Tokens: llm.DefaultContextWindow, Source: llm.WindowDefault}},
		{"lm studio not described", false, llmtest.ListingLMStudio, nil, "other", llm.Window{Tokens: llm.DefaultContextWindow, Source: llm.WindowDefault}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			srv.Models = []string{"local-x", "other"}
			srv.ContextWindows = map[string]int64{"local-x": 32768}
			srv.OllamaInfo = tc.ollama
			srv.Listing = tc.listing
			p, err := New(Config{BaseURL: srv.URL() + "/v1", Model: tc.model, ContextWindows: tc.configured})
			if err != nil {
				t.Fatal(err)
			}
			w := p.ContextWindow(t.Context())
			if w.Tokens != tc.want.Tokens || w.Source != tc.want.Source {
				t.Errorf("window %+v, want %+v", w, tc.want)
			}
			if (w.Notice != "") != (tc.want.Source == llm.WindowDefault) || (w.Notice != "" && !strings.Contains(w.Notice, tc.model)) {
				t.Errorf("notice %q", w.Notice)
			}
		})
	}
}

// A llama.cpp server whose /props does not say (an older build) leaves
// the listing's trained length, meta.n_ctx_train.
func TestContextWindowLlamaCppTrained(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Models = []string{"local-x"}
	srv.ContextWindows = map[string]int64{"local-x": 32768}
	srv.Listing = llmtest.ListingLlamaCpp
	mux := http.NewServeMux()
	mux.HandleFunc("GET /props", http.NotFound)
	mux.Handle("/", srv.Handler())
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	p, err := New(Config{BaseURL: front.URL + "/v1", Model: "local-x"})
	if err != nil {
		t.Fatal(err)
	}
	if w := p.ContextWindow(t.Context()); w.Tokens != 4*32768 || w.Source != llm.WindowProvider {
		t.Errorf("window %+v, want the trained length %d from the listing", w, 4*32768)
	}
}
