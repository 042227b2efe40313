package sandboxtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/sandbox"
)

// TestBwrapSkipsOrFailsInCI runs the test binary again with a missing
// bubblewrap: without CI the child test is skipped loudly, with CI=true it
// fails.
func TestBwrapSkipsOrFailsInCI(t *testing.T) {
	if os.Getenv("SANDBOXTEST_CHILD") == "1" {
		Bwrap(t, sandbox.Config{BwrapPath: "/nonexistent/bwrap"})
		return
	}
	t.Parallel()
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP"},
		{"false", false, "--- SKIP"},
		{"true", true, "--- FAIL"},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBwrapSkipsOrFailsInCI$", "-test.v")
			cmd.Env = append(os.Environ(), "SANDBOXTEST_CHILD=1", "CI="+tc.ci)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != tc.wantFail {
				t.Fatalf("child with CI=%q: err = %v, want failure %v; output:\n%s", tc.ci, err, tc.wantFail, out)
			}
			for _, want := range []string{tc.want, "BUBBLEWRAP UNAVAILABLE", "not found at /nonexistent/bwrap"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("child with CI=%q output lacks %q:\n%s", tc.ci, want, out)
				}
			}
		})
	}
}

func TestOff(t *testing.T) {
	t.Parallel()
	if got := Off(t, sandbox.Config{}).Kind(); got != sandbox.KindOff {
		t.Errorf("Off().Kind() = %q", got)
	}
}
