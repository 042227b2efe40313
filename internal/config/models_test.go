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
	if got := cfg.ContextWindows(); !cmp.Equal(got, map[string]int64{"qwen3": 32768}) {
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
