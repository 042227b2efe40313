package cli

import (
	"strings"
	"testing"
)

// TestFlagValueErrors: a value its flag's type refuses is a usage error
// naming the flag, the value and what was expected; pflag's own words
// ("strconv.ParseInt: parsing …: invalid syntax") were printed.
func TestFlagValueErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--max-connections", "abc"}, `--max-connections "abc": expected a whole number`},
		{[]string{"run", "--max-iterations", "x", "hi"}, `--max-iterations "x": expected a whole number`},
		{[]string{"serve", "--max-connections", "99999999999999999999"}, `--max-connections "99999999999999999999": out of range (expected a whole number)`},
		{[]string{"serve", "--session-stale-after", "5"}, `--session-stale-after "5": expected a duration such as 30s, 5m or 1h30m`},
		{[]string{"tasks", "list", "--json=maybe"}, `--json "maybe": expected true or false`},
		{[]string{"run", "--workspace"}, `flag needs an argument: --workspace`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, map[string]string{}, tc.args...)
			first, _, _ := strings.Cut(r.stderr, "\n")
			if r.code != ExitUsage || first != "maestro: "+tc.want || !strings.Contains(r.stderr, "--help' for usage") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and first line %q", r.code, r.stderr, ExitUsage, "maestro: "+tc.want)
			}
		})
	}
}
