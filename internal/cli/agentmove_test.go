package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunPieceWithAgentMovement runs `maestro run --piece` on a piece whose
// movement names a user-defined agent CLI (internal/engine's fake-move).
func TestRunPieceWithAgentMovement(t *testing.T) {
	t.Parallel()
	agents, err := filepath.Abs("../engine/testdata/agentmove/agents")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	def, err := os.ReadFile(filepath.Join(agents, "fake-move.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "agents", "fake-move.yaml"), string(def))
	writeFile(t, filepath.Join(home, "pieces", "agent-solo.yaml"), `name: agent-solo
description: One movement on the fake agent CLI.
max_movements: 3
initial_movement: answer
movements:
  - name: answer
    agent: fake-move
    edit: false
    persona: You answer.
    instruction: Answer the task.
    allowed_tools: [Read]
    rules: []
`)
	env := map[string]string{"MAESTRO_HOME": home, "PATH": agents + string(os.PathListSeparator) + "/usr/bin:/bin"}
	r := runCLI(t, env, "run", "--piece", "agent-solo", "-w", t.TempDir(), "<reply>Three fruits. [STATUS:success]</reply>")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "Three fruits." || !strings.Contains(r.stderr, "on agent CLI fake-move") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "run", "--piece", "agent-solo", "-w", t.TempDir(), "[fake:crash]")
	if r.code != ExitError || !strings.Contains(r.stdout, "agent fake-move failed (agent_crashed)") {
		t.Fatalf("crash: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
