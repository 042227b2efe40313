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
	dir, err := os.MkdirTemp("", "maestro-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, err = proctest.Build(context.Background(), "cmd/maestro", dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
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
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	err = cmd.Wait()
	took := time.Since(sent)
	if took > time.Second {
		t.Errorf("maestro took %v to stop after SIGINT, want < 1s", took)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit = %v, want 130; stderr:\n%s", err, stderr.String())
	}
	// Nothing of the command is left running.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte("sleep\x00"+marker)) {
			t.Errorf("the Bash command survived the interrupt: %s", p)
		}
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
