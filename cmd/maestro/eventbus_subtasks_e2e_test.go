package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/proctest"
)

// subtaskPieces: fanout spawns subtasks and waits for them; leaf runs
// Bash.
var subtaskPieces = map[string]string{
	"fanout.yaml": `name: fanout
description: Spawns a subtask, waits for it, then merges.
max_movements: 6
initial_movement: split
movements:
  - name: split
    edit: false
    persona: You split work into subtasks.
    instruction: Spawn the subtask, wait for it, then hand over.
    allowed_tools: [SpawnSubTask]
    rules:
      - {condition: subtasks are running, next: WAIT_SUBTASKS}
      - {condition: every result is in, next: merge}
  - name: merge
    edit: false
    persona: You merge results.
    instruction: Merge the results.
    allowed_tools: [Read]
    rules: []
`,
	"leaf.yaml": `name: leaf
description: A subtask piece running a command.
max_movements: 2
initial_movement: do
movements:
  - name: do
    edit: true
    persona: You do one small part.
    instruction: Do the part and complete.
    allowed_tools: [Bash]
    rules: []
`,
}

// subtaskScenario: one subtask whose Bash call runs until the process
// is killed, WAIT_SUBTASKS, then (resumed) merge and complete.
const subtaskScenario = `schemaVersion: evalops.maestro.scripted-scenario.v1
id: fanout
description: One subtask in Bash for a minute.
metadata: {recordedAt: "2026-11-27T00:00:00Z", toolsExpected: [SpawnSubTask, transition, complete]}
frames:
  - index: 0
    statements:
      - {kind: tool_call, tool: SpawnSubTask, input: {name: alpha, piece: leaf, task: "Sleep."}, expectedResult: success}
  - index: 1
    statements:
      - {kind: tool_call, tool: transition, input: {next: WAIT_SUBTASKS, summary: "Spawned."}}
  - index: 2
    statements:
      - {kind: tool_call, tool: transition, input: {next: merge, summary: "Done."}}
  - index: 3
    statements:
      - {kind: tool_call, tool: complete, input: {status: success, result: "Merged."}}
subtasks:
  - schemaVersion: evalops.maestro.scripted-scenario.v1
    id: leaf
    description: sleeps
    metadata: {recordedAt: "2026-11-27T00:00:00Z", toolsExpected: [Bash, complete]}
    frames:
      - index: 0
        statements:
          - {kind: tool_call, tool: Bash, input: {command: "sleep 60"}}
      - index: 1
        statements:
          - {kind: tool_call, tool: complete, input: {status: success, result: "slept"}}
`

// startSubtaskRun starts maestro run --piece fanout on the bus and
// returns once its subtask's Bash call runs.
func startSubtaskRun(t *testing.T) (context.Context, *bustest.Server, string, []string, *exec.Cmd, *proctest.Buffer) {
	t.Helper()
	ctx, srv, _, home := busSetup(t, 120*time.Second)
	srv.CreateStream()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "pieces"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range subtaskPieces {
		if err := os.WriteFile(filepath.Join(home, "pieces", name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	scenario := filepath.Join(dir, "fanout.yaml")
	if err := os.WriteFile(scenario, []byte(subtaskScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	env := busEnv(t, home, srv.URL())
	cmd := exec.CommandContext(ctx, binary, "run", "--workspace", t.TempDir(), "--sandbox", "off", "--replay", scenario, "--piece", "fanout", "go")
	cmd.Env = env
	stderr := &proctest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv.WaitFor(func(m bustest.Message) bool { return strings.Contains(string(m.Event.Data()), `"tool_name":"Bash"`) })
	return ctx, srv, home, env, cmd, stderr
}

// A piece run SIGKILLed while its subtask runs a command: the subtask
// session started on the bus (its log has no ready), and the process
// that resumes the run closes it (call in flight CANCELLED, closed
// ERROR) before the parent's closed ERROR and resumed. Before, the
// subtask never published started and stayed open on the bus for ever.
func TestEventBusKilledPieceRunClosesItsSubtask(t *testing.T) {
	t.Parallel()
	ctx, srv, home, env, cmd, stderr := startSubtaskRun(t)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	dirs := sessionDirs(t, home)
	if len(dirs) != 1 {
		t.Fatalf("sessions: %v\n%s", dirs, stderr)
	}
	parent := filepath.Base(dirs[0])

	resume := exec.CommandContext(ctx, binary, "run", "--resume", parent, "--sandbox", "off", "continue")
	resume.Env = env
	if out, err := resume.CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	// Up to the resumed run's closed (the process published it, and
	// what came before it, before it exited).
	msgs := srv.WaitFor(func(m bustest.Message) bool {
		return strings.Contains(string(m.Event.Data()), "MAESTRO_CLOSE_REASON_COMPLETED")
	})
	bySession := map[string][]string{}
	var order []string
	for _, m := range msgs {
		var d struct {
			Reason string `json:"close_reason"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(m.Event.Data(), &d); err != nil {
			t.Fatal(err)
		}
		// An event's id starts with its session log's id.
		id, _, _ := strings.Cut(m.Event.ID(), ".")
		typ := strings.TrimPrefix(strings.TrimPrefix(m.Event.Type(), "maestro.events."), "maestro.sessions.session.")
		switch {
		case d.Reason != "":
			typ += "(" + strings.TrimPrefix(d.Reason, "MAESTRO_CLOSE_REASON_") + ")"
			order = append(order, id)
		case d.Status == "MAESTRO_TOOL_CALL_STATUS_CANCELLED":
			typ += "(CANCELLED)"
		}
		bySession[id] = append(bySession[id], typ)
	}
	if len(bySession) != 2 {
		t.Fatalf("events of %d sessions, want the parent and its subtask: %v", len(bySession), bySession)
	}
	wantParent := "started tool_call.attempted tool_call.completed tool_call.attempted tool_call.completed closed(ERROR) resumed tool_call.attempted tool_call.completed tool_call.attempted tool_call.completed closed(COMPLETED)"
	wantSub := "started tool_call.attempted tool_call.completed(CANCELLED) closed(ERROR)"
	for id, types := range bySession {
		got, want := strings.Join(types, " "), wantSub
		if id == parent {
			want = wantParent
		}
		if got != want {
			t.Errorf("session %s (parent %s):\n got %s\nwant %s", id, parent, got, want)
		}
	}
	if len(order) != 3 || order[0] == parent || order[1] != parent {
		t.Errorf("closed events of %v, want the subtask's before the parent's (%s)", order, parent)
	}
}

// Ctrl-C (SIGINT) while the piece run waits for its subtask: exit 130,
// and on the bus the subtask and the parent both close USER_STOPPED.
// Before, the parent closed COMPLETED: no agent turn was running, so no
// error event said the run was interrupted.
func TestEventBusInterruptedPieceRunClosesUserStopped(t *testing.T) {
	t.Parallel()
	_, srv, home, _, cmd, stderr := startSubtaskRun(t)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d (%v), want 130\n%s", code, err, stderr)
	}
	dirs := sessionDirs(t, home)
	if len(dirs) != 1 {
		t.Fatalf("sessions: %v", dirs)
	}
	parent := filepath.Base(dirs[0])
	msgs := srv.WaitFor(func(m bustest.Message) bool {
		return strings.HasPrefix(m.Event.ID(), parent+".") && m.Event.Type() == eventbus.TypeSessionClosed
	})
	closed := map[string]string{}
	for _, m := range msgs {
		if m.Event.Type() != eventbus.TypeSessionClosed {
			continue
		}
		var d struct {
			Reason string `json:"close_reason"`
		}
		json.Unmarshal(m.Event.Data(), &d)
		id, _, _ := strings.Cut(m.Event.ID(), ".")
		closed[id] = d.Reason
	}
	if len(closed) != 2 {
		t.Fatalf("closed sessions %v, want the parent %s and its subtask", closed, parent)
	}
	for id, reason := range closed {
		if reason != "MAESTRO_CLOSE_REASON_USER_STOPPED" {
			t.Errorf("session %s (parent %s) closed %s, want MAESTRO_CLOSE_REASON_USER_STOPPED", id, parent, reason)
		}
	}
}
