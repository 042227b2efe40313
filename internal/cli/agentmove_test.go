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
	// No model is configured, and none is called: the replay demo the
	// session holds is not announced, badged or costed as the run's.
	for _, bad := range []string{"replay", "REPLAY", "scripted"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr says %q of a run only on an agent CLI:\n%s", bad, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "model: none configured, and none needed") {
		t.Errorf("stderr does not say that no model is needed:\n%s", r.stderr)
	}
	r = runCLI(t, env, "run", "--piece", "agent-solo", "-w", t.TempDir(), "-o", "jsonl", "<reply>Three fruits. [STATUS:success]</reply>")
	if r.code != 0 || strings.Contains(r.stderr, "replay") ||
		!strings.Contains(r.stderr, "No model configured, and none is needed: every movement of piece agent-solo runs on an agent CLI (fake-move)") {
		t.Errorf("-o jsonl: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	// The replay asked for keeps its badge.
	r = runCLI(t, env, "run", "--model", "replay/demo", "--piece", "agent-solo", "-w", t.TempDir(), "<reply>Three fruits. [STATUS:success]</reply>")
	if r.code != 0 || !strings.Contains(r.stderr, "▶ REPLAY") {
		t.Errorf("--model replay/demo: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	r = runCLI(t, env, "run", "--piece", "agent-solo", "-w", t.TempDir(), "[fake:crash]")
	if r.code != ExitError || !strings.Contains(r.stdout, "agent fake-move failed (agent_crashed)") {
		t.Fatalf("crash: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
