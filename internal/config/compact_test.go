package config

import (
	"strings"
	"testing"
)

// compact_at: is a share of the context window; a value outside (0, 1]
// is refused naming the key and the value.
func TestParseCompactAt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml string
		want float64
		err  string
	}{
		{"", 0, ""},
		{"compact_at: 0.6\n", 0.6, ""},
		{"compact_at: 1\n", 1, ""},
		{"compact_at: 1.5\n", 0, "compact_at: a share of the context window, 0 < compact_at ≤ 1 (e.g. 0.85), got 1.5"},
		{"compact_at: -0.2\n", 0, "compact_at: a share of the context window"},
	} {
		cfg, err := Parse([]byte(tc.yaml))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error %v, want %q", tc.yaml, err, tc.err)
			}
		case err != nil || cfg.CompactAt != tc.want:
			t.Errorf("Parse(%q) = %g, %v; want %g", tc.yaml, cfg.CompactAt, err, tc.want)
		}
	}
}
