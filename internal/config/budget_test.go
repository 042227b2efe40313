package config

import (
	"strings"
	"testing"
)

// budget_usd_month: is a non-negative amount; a negative one is refused
// naming the key.
func TestParseBudgetUSDMonth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml string
		want float64
		err  string
	}{
		{"", 0, ""},
		{"budget_usd_month: 250\n", 250, ""},
		{"budget_usd_month: 12.5\n", 12.5, ""},
		{"budget_usd_month: -1\n", 0, "budget_usd_month"},
	} {
		cfg, err := Parse([]byte(tc.yaml))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error %v, want %q", tc.yaml, err, tc.err)
			}
		case err != nil || cfg.BudgetUSDMonth != tc.want:
			t.Errorf("Parse(%q) = %g, %v; want %g", tc.yaml, cfg.BudgetUSDMonth, err, tc.want)
		}
	}
}
