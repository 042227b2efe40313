package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
)

// TestReplayScenarioScriptsSubtasks: a replay scenario that scripts its
// subtasks (subtasks:, docs/replay.md) offers SpawnSubTask with no
// SubtaskProvider, and subtask n plays the n-th script; also wrapped in
// llm.WithRetry, as maestro run --replay gives it (SpawnSubTask was then
// not offered: "a replay run needs a script per subtask").
func TestReplayScenarioScriptsSubtasks(t *testing.T) {
	t.Parallel()
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprint("wrapped=", wrapped), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "fanout", func(c *Config) {
				c.Provider = replay.New(scriptedFanout(t))
				if wrapped {
					c.Provider = llm.WithRetry(c.Provider, llm.RetryPolicy{})
				}
			})
			out, err := h.start("fanout", "Count the letters.")
			if err != nil || out.Status != StatusSucceeded {
				t.Fatalf("outcome = %+v, %v", out, err)
			}
			for _, f := range []struct{ file, want string }{{"01-alpha", "alpha counted"}, {"02-beta", "beta counted"}, {"03-gamma", "gamma counted"}} {
				data, err := os.ReadFile(filepath.Join(h.ws, "subtasks", f.file+".md"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), "- Status: succeeded") || !strings.Contains(string(data), f.want) {
					t.Errorf("subtask %s's result lacks %q:\n%s", f.file, f.want, data)
				}
			}
		})
	}
}

// scriptedFanout is the fanout scenario scripting its three subtasks
// (alpha, beta, gamma), each completing at once.
func scriptedFanout(t *testing.T) *replay.Scenario {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "scenarios", "fanout.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(src)
	b.WriteString("subtasks:\n")
	for _, name := range []string{"alpha", "beta", "gamma"} {
		fmt.Fprintf(&b, `  - schemaVersion: %s
    id: leaf-%s
    description: Subtask %s.
    metadata: {recordedAt: "2026-11-26T00:00:00Z", toolsExpected: [complete]}
    frames:
      - index: 0
        statements:
          - {kind: tool_call, tool: complete, input: {status: success, result: "%s counted"}}
`, replay.SchemaVersion, name, name, name)
	}
	s, err := replay.Parse([]byte(b.String()), "fanout-scripted.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
