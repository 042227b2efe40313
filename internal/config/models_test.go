package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// models: gives per-model context windows; a negative one is refused
// naming the key, unknown keys name their line.
func TestParseModels(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("models:\n  qwen3: {context_window: 32768}\n  other: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ContextWindows("openai"); !cmp.Equal(got, map[string]int64{"qwen3": 32768}) {
		t.Errorf("ContextWindows = %v", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"models:\n  qwen3: {context_window: -1}\n", "models.qwen3.context_window: must be positive"},
		{"models:\n  qwen3: {window: 5}\n", "line 2"},
	} {
		if _, err := Parse([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// A key written as --model writes it, provider/ prefix included, named no
// model: the run got the 128,000-token default, silently. It applies to
// that provider's model; the bare key still works, and a key with another
// prefix stays the id a server may name its model (OpenRouter's
// "anthropic/claude-…" behind the openai provider).
func TestContextWindowsTakeTheProviderPrefix(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`models:
  anthropic/claude-x: {context_window: 1000}
  openai/gpt-y: {context_window: 2000}
  qwen3: {context_window: 3000}
  openai/qwen3: {context_window: 4000}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		provider string
		want     map[string]int64
	}{
		{"anthropic", map[string]int64{"claude-x": 1000, "anthropic/claude-x": 1000, "openai/gpt-y": 2000, "qwen3": 3000, "openai/qwen3": 4000}},
		{"openai", map[string]int64{"gpt-y": 2000, "anthropic/claude-x": 1000, "openai/gpt-y": 2000, "qwen3": 4000, "openai/qwen3": 4000}},
	} {
		if got := cfg.ContextWindows(tc.provider); !cmp.Equal(got, tc.want) {
			t.Errorf("ContextWindows(%q) = %v, want %v", tc.provider, got, tc.want)
		}
	}
}
