package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// runMaestro runs the binary with args and no model configured (Maestro's
// home at home), and fails t unless it succeeds or fails as wantOK says.
func runMaestro(t *testing.T, home string, wantOK bool, args ...string) (stdout, stderr string) {
	t.Helper()
	return runMaestroEnv(t, proctest.NoModelEnv(home), wantOK, args...)
}

// runMaestroEnv is runMaestro in the environment env.
func runMaestroEnv(t *testing.T, env []string, wantOK bool, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	if (err == nil) != wantOK {
		t.Fatalf("maestro %s: err %v, want success %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, wantOK, out, errBuf.String())
	}
	return string(out), errBuf.String()
}

// failingToolsScenario scripts three native tool calls that fail for
// different reasons, then a text answer.
const failingToolsScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"failing-tools","description":"tool calls that fail",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Bash","Read"]},
"frames":[{"index":0,"statements":[{"kind":"tool_call","tool":"Bash","id":"call_pip","input":{"command":"pip install requests"}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"Read","id":"call_outside","input":{"path":"../x"}}]},
{"index":2,"statements":[{"kind":"tool_call","tool":"Read","id":"call_missing","input":{"path":"missing.txt"}}]},
{"index":3,"statements":[{"kind":"text","text":"done"}]}]}`

// A failed native tool call carries its reason (as the call's last
// tool_output) and an error_code in tool_end on the wire, and the
// terminal shows the reason's first line on the ✗ line (issue 15 item 2).
func TestToolFailuresShowTheirReason(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scenario := writeFile(t, dir, "failing.json", failingToolsScenario)
	home := filepath.Join(dir, "home")
	run := func(t *testing.T, args ...string) (stdout, stderr string) {
		return runMaestro(t, home, true, append([]string{"run", "--replay", scenario, "--workspace", t.TempDir()}, args...)...)
	}
	want := []struct {
		call, code, reason string
	}{
		{"call_pip", "sandbox_violation", "cannot be installed"},
		{"call_outside", "workspace_violation", "outside the workspace"},
		{"call_missing", "not_found", "file not found: missing.txt"},
	}

	t.Run("jsonl", func(t *testing.T) {
		out, _ := run(t, "-o", "jsonl", "fail three times")
		v, err := protocol.NewValidator()
		if err != nil {
			t.Fatal(err)
		}
		reasons, codes := map[string]string{}, map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			if err := v.ValidateServerFrame(sc.Bytes()); err != nil {
				t.Errorf("frame does not validate against the protocol schemas: %s: %v", sc.Bytes(), err)
			}
			var f struct {
				Type      string `json:"type"`
				CallID    string `json:"call_id"`
				Content   string `json:"content"`
				Success   bool   `json:"success"`
				ErrorCode string `json:"error_code"`
			}
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Fatal(err)
			}
			switch f.Type {
			case protocol.TypeToolOutput:
				reasons[f.CallID] = f.Content
			case protocol.TypeToolEnd:
				if f.Success {
					t.Errorf("tool_end of %s: success, want a failure", f.CallID)
				}
				codes[f.CallID] = f.ErrorCode
			}
		}
		for _, w := range want {
			if codes[w.call] != w.code {
				t.Errorf("tool_end of %s: error_code %q, want %q", w.call, codes[w.call], w.code)
			}
			if !strings.Contains(reasons[w.call], w.reason) {
				t.Errorf("last tool_output of %s = %q, want the reason %q", w.call, reasons[w.call], w.reason)
			}
		}
	})
	t.Run("terminal", func(t *testing.T) {
		out, stderr := run(t, "fail three times")
		if strings.TrimSpace(out) != "done" {
			t.Errorf("stdout = %q, want the answer only", out)
		}
		for _, w := range []string{
			`✗ Bash failed \(sandbox_violation\)( \([^)]*\))?: [^\n]*cannot be installed`,
			`✗ Read failed \(workspace_violation\)( \([^)]*\))?: [^\n]*outside the workspace[^\n]*\.\./x`,
			`✗ Read failed \(not_found\)( \([^)]*\))?: file not found: missing\.txt\n`,
		} {
			if !regexp.MustCompile(w).MatchString(stderr) {
				t.Errorf("stderr lacks %s:\n%s", w, stderr)
			}
		}
	})
}

// A replay session is resumable while its scenario scripts more turns,
// and says plainly when it ended instead of printing a resume hint that
// cannot work (issue 15 item 3).
func TestReplayResumeHint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	twoTurns := writeFile(t, dir, "two-turns.json", `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"two-turns","description":"a follow-up turn",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":[]},
"frames":[{"index":0,"statements":[{"kind":"text","text":"first answer"}]},
{"index":1,"statements":[{"kind":"text","text":"second answer"}]}]}`)
	maestro := func(t *testing.T, wantOK bool, args ...string) (stdout, stderr string) {
		return runMaestro(t, home, wantOK, args...)
	}
	hintRE := regexp.MustCompile(`resume with: maestro run --resume (\S+) "…"`)
	const ended = "the replay ended"

	t.Run("the scenario scripts a follow-up turn", func(t *testing.T) {
		out, stderr := maestro(t, true, "run", "--replay", twoTurns, "--workspace", t.TempDir(), "hello")
		m := hintRE.FindStringSubmatch(stderr)
		if strings.TrimSpace(out) != "first answer" || m == nil || strings.Contains(stderr, ended) {
			t.Fatalf("first run: stdout %q, want the first answer and a resume hint:\n%s", out, stderr)
		}
		out, stderr = maestro(t, true, "run", "--resume", m[1], "tell me more")
		if strings.TrimSpace(out) != "second answer" {
			t.Errorf("resumed run: stdout %q, want the scripted follow-up", out)
		}
		if hintRE.MatchString(stderr) || !strings.Contains(stderr, ended) {
			t.Errorf("after the last scripted turn: want no resume hint and %q:\n%s", ended, stderr)
		}
	})
	t.Run("the demo ends", func(t *testing.T) {
		ws := t.TempDir()
		_, stderr := maestro(t, true, "run", "--workspace", ws, "Show me what you can do in this workspace")
		if hintRE.MatchString(stderr) || !strings.Contains(stderr, ended) || !strings.Contains(stderr, "maestro run --workspace") {
			t.Fatalf("after the demo: want no resume hint, %q and how to go on with a real model:\n%s", ended, stderr)
		}
		id := regexp.MustCompile(`session (\S+) · the replay ended`).FindStringSubmatch(stderr)
		if id == nil {
			t.Fatalf("no session id in:\n%s", stderr)
		}
		_, stderr = maestro(t, false, "run", "--resume", id[1], "tell me more")
		if !strings.Contains(stderr, ended) || strings.Contains(stderr, "frame") || hintRE.MatchString(stderr) {
			t.Errorf("resuming the ended demo: want %q, no scenario internals and no resume hint:\n%s", ended, stderr)
		}
	})
}
