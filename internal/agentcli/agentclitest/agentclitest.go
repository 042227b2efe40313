// Package agentclitest finds the real agent CLIs (Claude Code, Codex,
// Gemini CLI, OpenCode, Qwen Code) that scripts/install-agent-clis.sh
// installs for the integration tests of any package.
package agentclitest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Bin returns the path of the installed CLI binary name ("claude",
// "codex", …) in $MAESTRO_AGENT_CLIS/bin, else in .cache/agent-clis/bin
// of the module the test runs in. A missing CLI skips the test loudly, and
// fails it when CI=true.
func Bin(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(dir(t), "bin", name)
	if st, err := os.Stat(bin); err == nil && !st.IsDir() {
		return bin
	}
	msg := fmt.Sprintf("AGENT CLI %q NOT INSTALLED at %s: run scripts/install-agent-clis.sh (integration test skipped)", name, bin)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// dir is where the CLIs are installed: $MAESTRO_AGENT_CLIS, else
// .cache/agent-clis beside the go.mod above the test's directory.
func dir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("MAESTRO_AGENT_CLIS"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("find the agent CLIs: %v", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, ".cache", "agent-clis")
		}
		if filepath.Dir(d) == d {
			t.Fatalf("find the agent CLIs: no go.mod above %s", wd)
		}
	}
}
