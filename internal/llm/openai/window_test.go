package openai

import (
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// An OpenAI-compatible server states a local model's window in its
// listing, Ollama in /api/show; the configuration wins over both; a model
// the server does not describe gets the default with a notice.
func TestContextWindowSources(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		ollama     bool
		configured map[string]int64
		model      string
		want       llm.Window
	}{
		{"listing", false, nil, "local-x", llm.Window{Tokens: 32768, Source: llm.WindowProvider}},
		{"ollama model info", true, nil, "local-x", llm.Window{Tokens: 32768, Source: llm.WindowProvider}},
		{"config wins", false, map[string]int64{"local-x": 8192}, "local-x", llm.Window{Tokens: 8192, Source: llm.WindowConfig}},
		{"not described", false, nil, "other", llm.Window{Tokens: llm.DefaultContextWindow, Source: llm.WindowDefault}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			srv.Models = []string{"local-x", "other"}
			srv.ContextWindows = map[string]int64{"local-x": 32768}
			srv.OllamaInfo = tc.ollama
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
