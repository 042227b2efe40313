package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// binary is the maestro binary built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	// m.Run, then the PostgreSQL cluster (if started) stops.
	proctest.MainWithMaestro(&binary, func() int { return pg.Main(m) })
}

// The README's main job: no keys, the bundled replay demo, exit 0.
func TestMainJobOnEmbeddedDefaults(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--workspace", ws, "Show me what you can do in this workspace")
	cmd.Env = proctest.NoModelEnv(t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("main job failed: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "REPLAY") || !strings.Contains(string(out), "replay") {
		t.Errorf("the demo does not say it is a replay:\nstdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(ws, "hello-maestro", "README.md")); err != nil {
		t.Errorf("the demo did no real work: %v", err)
	}
}

// markedProcesses are the pids of the running `sleep marker` processes.
func markedProcesses(marker string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte("sleep\x00"+marker)) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// SIGINT during a long Bash call ends it within 1 s and the session log
// records the cancellation.
func TestSIGINTDuringBash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scenario := filepath.Join(dir, "sleep.json")
	// A unique duration marks the sleep so the test can look for leftovers.
	const marker = "37.125"
	os.WriteFile(scenario, []byte(`{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"sleepy","description":"a long command",
"metadata":{"recordedAt":"2026-11-22T00:00:00Z","toolsExpected":["Bash"]},
"frames":[{"index":0,"statements":[{"kind":"tool_call","tool":"Bash","id":"call_sleep","input":{"command":"echo started && sleep `+marker+`"}}]},
{"index":1,"statements":[{"kind":"text","text":"never reached"}]}]}`), 0o600)
	home := filepath.Join(dir, "home")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--replay", scenario, "--workspace", t.TempDir(), "-o", "jsonl", "sleep please")
	cmd.Env = proctest.NoModelEnv(home)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the command is really running: its first output arrives.
	sessionID := ""
	sc := bufio.NewScanner(stdout)
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		if err := v.ValidateServerFrame(sc.Bytes()); err != nil {
			t.Errorf("frame does not validate against the protocol schemas: %s: %v", sc.Bytes(), err)
		}
		var f map[string]any
		json.Unmarshal(sc.Bytes(), &f)
		if f["type"] == "ready" {
			sessionID, _ = f["session_id"].(string)
		}
		if f["type"] == "tool_output" && strings.Contains(fmt.Sprint(f["content"]), "started") {
			break
		}
	}
	if sessionID == "" {
		t.Fatalf("no ready frame / tool output before EOF; stderr:\n%s", stderr.String())
	}
	// "started" is printed before the shell starts the sleep: wait for it.
	sleeps := markedProcesses(marker)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	appear := time.NewTimer(30 * time.Second)
	defer appear.Stop()
	for len(sleeps) == 0 {
		select {
		case <-tick.C:
			sleeps = markedProcesses(marker)
		case <-appear.C:
			t.Fatalf("found no process of the Bash command (sleep %s) 30 s after its output", marker)
		}
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	// The bound is on the command's end, watched while maestro exits: not
	// on maestro's exit, which writes the session log after it (CPU work
	// that took 1.4 s at 4 % of a core).
	for _, pid := range sleeps {
		if proctest.Alive(pid, max(time.Second-time.Since(sent), 0)) {
			t.Errorf("the Bash command (pid %d) still ran 1 s after SIGINT", pid)
		}
	}
	t.Logf("the Bash command ended %v after SIGINT", time.Since(sent).Round(time.Millisecond))
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit = %v, want 130; stderr:\n%s", err, stderr.String())
	}
	// Nothing of the command is left running.
	if left := markedProcesses(marker); len(left) > 0 {
		t.Errorf("the Bash command survived the interrupt: pids %v", left)
	}
	// The session log records the cancellation.
	log, err := os.ReadFile(filepath.Join(home, "sessions", sessionID, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var cancelled, toolFailed bool
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var rec struct {
			Event map[string]any `json:"event"`
		}
		json.Unmarshal([]byte(line), &rec)
		switch rec.Event["type"] {
		case "error":
			cancelled = cancelled || rec.Event["error_type"] == "cancelled"
		case "tool_end":
			toolFailed = toolFailed || (rec.Event["call_id"] == "call_sleep" && rec.Event["success"] == false)
		}
	}
	if !cancelled || !toolFailed {
		t.Errorf("session log lacks the cancellation (error cancelled: %v, tool_end failed: %v):\n%s", cancelled, toolFailed, log)
	}
}
