package main

import (
	"bufio"
	"bytes"
	"context"

	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// genericAgentsHome is a Maestro home whose agents/ holds the two adapters
// defined only by YAML (internal/agentcli/testdata/generic: a CLI with its
// own JSON Lines shape read by the jsonl mapping parser, an aider-like
// plain-text CLI read by the text parser) and a broken adapter file next to
// them; the environment puts the fake CLIs on PATH.
func genericAgentsHome(t *testing.T) (home string, env []string) {
	t.Helper()
	td, err := filepath.Abs(filepath.Join("..", "..", "internal", "agentcli", "testdata", "generic"))
	if err != nil {
		t.Fatal(err)
	}
	home = t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"fake-jsonl-agent.yaml", "fake-aider.yaml", "broken.yaml"} {
		data, err := os.ReadFile(filepath.Join(td, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, "agents", f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home, append(proctest.NoModelEnv(home), "PATH="+td+string(os.PathListSeparator)+"/usr/bin:/bin")
}

// runWithEnv runs the binary with env and returns stdout, stderr and the
// exit code.
func runWithEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("maestro %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// frames decodes -o jsonl output.
func frames(t *testing.T, out string) []protocol.Message {
	t.Helper()
	var msgs []protocol.Message
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m, err := protocol.DecodeServer(sc.Bytes())
		if err != nil {
			t.Fatalf("decode %s: %v", sc.Text(), err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestRunAgentDefinedByYAML: `maestro run --agent` drives a sixth CLI
// defined only by YAML with the jsonl mapping parser (text, thinking, a
// tool call and per-call usage come through), and an aider-like plain-text
// CLI with the text parser; the broken adapter file next to them changes
// nothing else, and agents list reports it with its line:col.
func TestRunAgentDefinedByYAML(t *testing.T) {
	t.Parallel()
	_, env := genericAgentsHome(t)

	t.Run("jsonl mapping", func(t *testing.T) {
		t.Parallel()
		out, stderr, code := runWithEnv(t, env, "run", "--agent", "fake-jsonl-agent", "-o", "jsonl", "--workspace", t.TempDir(), "run echo hi")
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
		}
		var text, thinking, agentSession string
		var call *protocol.ToolCall
		var end *protocol.ToolEnd
		var usage [][2]int64
		var cost float64
		for _, m := range frames(t, out) {
			switch m := m.(type) {
			case protocol.ResponseChunk:
				if m.IsThinking {
					thinking += m.Content
				} else {
					text += m.Content
				}
			case protocol.SessionInfo:
				if m.AgentSessionID != "" {
					agentSession = m.AgentSessionID
				}
			case protocol.ToolCall:
				call = &m
			case protocol.ToolEnd:
				end = &m
			case protocol.ResponseEnd:
				usage = append(usage, [2]int64{m.Usage.InputTokens, m.Usage.OutputTokens})
				cost += m.Usage.TotalCostUSD
				if m.Usage.ModelID != "fake-gen-1" || m.Usage.Provider != "fake-jsonl-agent" {
					t.Errorf("response_end model %q provider %q", m.Usage.ModelID, m.Usage.Provider)
				}
			}
		}
		// -o jsonl carries the CLI's session id (session_info.agent_session_id).
		if agentSession != "gen-7f3a" {
			t.Errorf("no session_info with the CLI's session id gen-7f3a (got %q)", agentSession)
		}
		if text != "Running a tool. Done: hi" || thinking != "Let me run it." {
			t.Errorf("text %q, thinking %q", text, thinking)
		}
		if call == nil || call.Tool != "shell" || string(call.Args) != `{"cmd":"echo hi"}` || end == nil || !end.Success {
			t.Errorf("tool call %+v, end %+v", call, end)
		}
		if len(usage) != 2 || usage[0] != [2]int64{21, 8} || usage[1] != [2]int64{30, 4} || cost < 0.00219 || cost > 0.00221 {
			t.Errorf("usage %v, cost %v", usage, cost)
		}
	})
	t.Run("text", func(t *testing.T) {
		t.Parallel()
		out, stderr, code := runWithEnv(t, env, "run", "--agent", "fake-aider", "-o", "jsonl", "--workspace", t.TempDir(), "hi there")
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
		}
		var text string
		var usage protocol.Usage
		for _, m := range frames(t, out) {
			switch m := m.(type) {
			case protocol.ResponseChunk:
				text += m.Content
			case protocol.ResponseEnd:
				usage = m.Usage
			}
		}
		if text != "Hello from aider.\nYou said: hi there\n" || usage.InputTokens != 1200 || usage.OutputTokens != 45 || usage.TotalCostUSD != 0.0031 {
			t.Errorf("text %q, usage %+v", text, usage)
		}
	})
	t.Run("text failure", func(t *testing.T) {
		t.Parallel()
		_, stderr, code := runWithEnv(t, env, "run", "--agent", "fake-aider", "--workspace", t.TempDir(), "fail now")
		if code == 0 || !strings.Contains(stderr, "auth_expired") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
	t.Run("agents list", func(t *testing.T) {
		t.Parallel()
		out, stderr, code := runWithEnv(t, env, "agents", "list", "--json")
		if code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
		}
		var listed struct {
			Agents []struct {
				ID, Name, Source, Version string
				Capabilities              map[string]bool
			}
			Invalid []string
		}
		if err := json.Unmarshal([]byte(out), &listed); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		got := map[string]string{}
		for _, a := range listed.Agents {
			got[a.ID] = a.Name + "/" + a.Source + "/" + a.Version
			if len(a.Capabilities) != 29 {
				t.Errorf("%s: %d capability flags, want all 29", a.ID, len(a.Capabilities))
			}
		}
		for id, want := range map[string]string{"fake-jsonl-agent": "Fake JSONL Agent/user file/0.3.1", "fake-aider": "Fake Aider/user file/0.86.1", "claude-code": "Claude Code/built-in/"} {
			if !strings.HasPrefix(got[id], want) {
				t.Errorf("%s: %q, want %q", id, got[id], want)
			}
		}
		if len(listed.Invalid) != 1 || !strings.Contains(listed.Invalid[0], "broken.yaml:5:10: jsonl.text[0].when: required") {
			t.Errorf("invalid: %q", listed.Invalid)
		}
		if _, stderr, code := runWithEnv(t, env, "agents", "list"); code != 0 || !strings.Contains(stderr, "broken.yaml:5:10") {
			t.Errorf("agents list: exit %d, stderr:\n%s", code, stderr)
		}
	})
}
