package config

import (
	"strings"
	"testing"
)

// compact_at: is a share of the context window; a value outside (0, 1]
// is refused naming the key and the value. budget_usd_month: is a
// non-negative amount; a negative one is refused naming the key.
func TestParseCompactAt(t *testing.T) {
	t.Parallel()
	compactAt := func(c Config) float64 { return c.CompactAt }
	budget := func(c Config) float64 { return c.BudgetUSDMonth }
	for _, tc := range []struct {
		yaml string
		get  func(Config) float64
		want float64
		err  string
	}{
		{"", compactAt, 0, ""},
		{"compact_at: 0.6\n", compactAt, 0.6, ""},
		{"compact_at: 1\n", compactAt, 1, ""},
		{"compact_at: 1.5\n", compactAt, 0, "compact_at: a share of the context window, 0 < compact_at ≤ 1 (e.g. 0.85), got 1.5"},
		{"compact_at: -0.2\n", compactAt, 0, "compact_at: a share of the context window"},
		// 0 is outside the range too: it was taken as unset (0.85).
		{"compact_at: 0\n", compactAt, 0, "line 1: compact_at: a share of the context window, 0 < compact_at ≤ 1 (e.g. 0.85), got 0"},
		{"compact_at:\n", compactAt, 0, ""},
		{"", budget, 0, ""},
		{"budget_usd_month: 250\n", budget, 250, ""},
		{"budget_usd_month: 12.5\n", budget, 12.5, ""},
		{"budget_usd_month: -1\n", budget, 0, "budget_usd_month"},
	} {
		cfg, err := Parse([]byte(tc.yaml))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error %v, want %q", tc.yaml, err, tc.err)
			}
		case err != nil || tc.get(cfg) != tc.want:
			t.Errorf("Parse(%q) = %g, %v; want %g", tc.yaml, tc.get(cfg), err, tc.want)
		}
	}
}
