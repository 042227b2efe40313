package proctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SkipOrFail stops tb because something it needs is missing on this
// machine (a tool, a kernel feature, a privilege): it skips tb with a loud
// reason, or fails it when the environment variable CI is "true", because
// CI must run every test (scripts/install-deps.sh and
// scripts/install-agent-clis.sh install what the tests need).
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s (CI=true requires it)", msg)
	}
	tb.Skipf("!!! NOT RUN: %s (with CI=true this is a failure)", msg)
}

// AgentCLIEnv names a directory that overrides where AgentCLI looks for the
// agent CLIs.
const AgentCLIEnv = "MAESTRO_AGENT_CLIS"

// AgentCLI returns the binary of the agent CLI name (claude, codex, …)
// that scripts/install-agent-clis.sh installed into .cache/agent-clis at
// the top of the module (or $MAESTRO_AGENT_CLIS). When it is missing it
// calls SkipOrFail.
func AgentCLI(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv(AgentCLIEnv)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			tb.Fatalf("find the agent CLIs: %v", err)
		}
		dir = filepath.Join(root, ".cache", "agent-clis")
	}
	bin := filepath.Join(dir, "bin", name)
	if st, err := os.Stat(bin); err == nil && !st.IsDir() {
		return bin
	}
	SkipOrFail(tb, "AGENT CLI %q NOT INSTALLED at %s: run scripts/install-agent-clis.sh (integration tier skipped)", name, bin)
	return ""
}

// moduleRoot returns the nearest directory holding go.mod, from the
// working directory (a test runs in its package's directory) upwards.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// CheckSkipOrFail checks a test that calls SkipOrFail: it runs the test
// named test of this test binary again, with childEnv=1 and env added to
// its environment, once with CI unset, once with CI=false and once with
// CI=true. The child must be skipped in the first two and fail in the
// third, and print every want each time. The test itself does its work
// only when childEnv is 1.
func CheckSkipOrFail(t *testing.T, test, childEnv string, env []string, want ...string) {
	t.Helper()
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
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v")
			cmd.Env = append(append(os.Environ(), childEnv+"=1", "CI="+tc.ci), env...)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != tc.wantFail {
				t.Fatalf("child with CI=%q: err = %v, want failure %v; output:\n%s", tc.ci, err, tc.wantFail, out)
			}
			for _, w := range append([]string{tc.want}, want...) {
				if !strings.Contains(string(out), w) {
					t.Errorf("child with CI=%q output lacks %q:\n%s", tc.ci, w, out)
				}
			}
		})
	}
}
