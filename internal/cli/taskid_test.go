package cli

import (
	"strings"
	"testing"
)

// TestTaskIDNegative: a negative (or too large) number where a tasks subcommand takes its
// task id says a task id was expected; pflag read it as flags ("unknown
// shorthand flag: '1' in -1"). A number after the id (comment text) and
// other unknown flags keep pflag's word.
func TestTaskIDNegative(t *testing.T) {
	t.Parallel()
	const want = "expected a task id (a positive whole number"
	for _, tc := range []struct {
		args  []string
		found string // "": not a task id error
	}{
		{[]string{"show", "-1"}, `"-1"`},
		{[]string{"show", "-1.5"}, `"-1.5"`},
		{[]string{"logs", "-f", "-2"}, `"-2"`},
		{[]string{"comment", "-3", "hi"}, `"-3"`},
		{[]string{"cancel", "-4"}, `"-4"`},
		{[]string{"retry", "-5"}, `"-5"`},
		{[]string{"download", "-6"}, `"-6"`},
		{[]string{"show", "abc"}, `"abc"`},
		{[]string{"show", "99999999999999999999"}, `"99999999999999999999": too large for a task id`},
		{[]string{"show", "-x"}, ""},
		{[]string{"comment", "3", "-1"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			// No server listens there: a usage error is found first.
			args := append([]string{"tasks", "--server", "http://127.0.0.1:1"}, tc.args...)
			code, _, errOut := runTasksCLI(t, nil, args...)
			if code != ExitUsage || !strings.Contains(errOut, "Run 'maestro tasks "+tc.args[0]+" --help' for usage.") {
				t.Fatalf("exit %d, want %d:\n%s", code, ExitUsage, errOut)
			}
			if got := strings.Contains(errOut, want); got != (tc.found != "") || !strings.Contains(errOut, tc.found) {
				t.Fatalf("want task id error %v (found %s):\n%s", tc.found != "", tc.found, errOut)
			}
		})
	}
}
