package sandboxtest

import (
	"os"
	"testing"

	"github.com/maestro-run/maestro/internal/proctest"
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
	proctest.CheckSkipOrFail(t, "TestBwrapSkipsOrFailsInCI", "SANDBOXTEST_CHILD", nil,
		"BUBBLEWRAP UNAVAILABLE", "not found at /nonexistent/bwrap")
}

func TestOff(t *testing.T) {
	t.Parallel()
	if got := Off(t, sandbox.Config{}).Kind(); got != sandbox.KindOff {
		t.Errorf("Off().Kind() = %q", got)
	}
}
