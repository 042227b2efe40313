package cli

import (
	"strings"
	"testing"
)

// TestResumeUnknownSession: --resume of no session names the id and says
// how to list the sessions, in run and headless (both said a bare
// "session not found: ID").
func TestResumeUnknownSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"headless", "--resume", "nosuchsession"}, "session not found: nosuchsession; list them with maestro sessions list"},
		{[]string{"run", "--resume", "nosuchsession", "hi"}, "session not found: nosuchsession; list them with maestro sessions list"},
		{[]string{"headless", "--resume", "nos"}, `session not found: "nos"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, nil, tc.args...)
			if r.code != ExitError || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "maestro sessions list") {
				t.Fatalf("exit %d, want %d with %q:\n%s", r.code, ExitError, tc.want, r.stderr)
			}
			if tc.args[0] == "headless" && !strings.Contains(r.stdout, "maestro sessions list") {
				t.Fatalf("the error event does not say how to list the sessions:\n%s", r.stdout)
			}
		})
	}
}
