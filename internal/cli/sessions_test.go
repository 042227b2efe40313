package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// sessionFixture returns the HOME of a storage tree captured from a real
// CLI (internal/agentcli/testdata/sessions) and its session ids.
func sessionFixture(t *testing.T, dir string) (home, plain, tool string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "agentcli", "testdata", "sessions", dir))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "sessions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Plain, Tool string }
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "home"), m.Plain, m.Tool
}

func TestSessionsCommands(t *testing.T) {
	t.Parallel()
	home, plain, tool := sessionFixture(t, "codex-0.169.0")
	env := map[string]string{"HOME": home}
	const project = "/home/dev/project"

	for _, c := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		notStdout  []string
		jsonOutput func(t *testing.T, out string)
	}{
		{name: "list", args: []string{"sessions", "list", "--agent", "codex", "--cwd", project},
			stdout: []string{"ID", "MSGS", tool + " ", plain + " ", "gpt-5.5", "say hello", "run echo maestro-tool-ok"}},
		{name: "list json", args: []string{"sessions", "list", "--agent", "codex", "--cwd", project, "--json"},
			jsonOutput: func(t *testing.T, out string) {
				var list []agentcli.SessionInfo
				if err := json.Unmarshal([]byte(out), &list); err != nil {
					t.Fatal(err)
				}
				if len(list) != 2 || list[0].ID != tool || list[1].ID != plain || list[1].MessageCount != 4 || list[1].Dir != project {
					t.Errorf("list %+v", list)
				}
			}},
		{name: "list json empty", args: []string{"sessions", "list", "--agent", "codex", "--cwd", "/nowhere", "--json"},
			stdout: []string{"[]"}},
		{name: "show", args: []string{"sessions", "show", "--agent", "codex", tool},
			stdout: []string{"session  " + tool, "dir      " + project, "] user\n  run echo maestro-tool-ok", "→ exec_command {\"cmd\":\"echo maestro-tool-ok\"}",
				"← exec_command [call_tool1]", "maestro-tool-ok", "] assistant (gpt-5.5)\n  Tool said: maestro-tool-ok"}},
		{name: "show json", args: []string{"sessions", "show", "--agent", "codex", plain, "--json"},
			jsonOutput: func(t *testing.T, out string) {
				var tr agentcli.Transcript
				if err := json.Unmarshal([]byte(out), &tr); err != nil {
					t.Fatal(err)
				}
				last := tr.Messages[len(tr.Messages)-1]
				if tr.Session.ID != plain || last.Role != "assistant" || last.Text != "Second turn after resume." || tr.Stats.Records == 0 {
					t.Errorf("transcript %+v", tr)
				}
			}},
		{name: "unknown agent", args: []string{"sessions", "list", "--agent", "nope"}, code: ExitUsage,
			stderr: []string{`--agent "nope": unknown agent`, "claude-code", "codex", "opencode"}},
		{name: "no sessions says where it looked", args: []string{"sessions", "list", "--agent", "codex", "--cwd", "/nowhere"}, code: ExitError,
			stderr: []string{"no codex sessions for /nowhere", "looked in " + filepath.Join(home, ".codex", "sessions")}},
		{name: "claude: no sessions names the project directory", args: []string{"sessions", "list", "--agent", "claude-code", "--cwd", "/nowhere"}, code: ExitError,
			stderr: []string{"looked in " + filepath.Join(home, ".claude", "projects", "-nowhere")}},
		{name: "unknown session", args: []string{"sessions", "show", "--agent", "codex", "01a2-missing"}, code: ExitError,
			stderr: []string{"session not found", "maestro sessions list --agent codex"}},
		// Issue 15 item 5: without --agent, Maestro's own sessions (none here).
		{name: "without --agent: Maestro's own sessions", args: []string{"sessions", "list", "--json"}, stdout: []string{"[]"}},
		{name: "without --agent: none yet", args: []string{"sessions", "list"}, stderr: []string{"no Maestro sessions in", "maestro run"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, env, c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, c.code, r.stdout, r.stderr)
			}
			for _, w := range c.stdout {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if c.jsonOutput != nil {
				c.jsonOutput(t, r.stdout)
			}
		})
	}
}

// TestSessionsShowClaude reads a Claude Code session through the command,
// HOME coming from the command's environment.
func TestSessionsShowClaude(t *testing.T) {
	t.Parallel()
	home, plain, _ := sessionFixture(t, "claude-code-2.1.330")
	r := runCLI(t, map[string]string{"HOME": home}, "sessions", "show", "--agent", "claude-code", plain)
	for _, w := range []string{"] user\n  say hello", "Hello from the fake model.", "] user\n  and again", "Second turn after resume.", "claude-opus"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
		}
	}
	if r.code != 0 {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
	// Without HOME there is nowhere to look.
	r = runCLI(t, map[string]string{}, "sessions", "show", "--agent", "claude-code", plain)
	if r.code != ExitError || !strings.Contains(r.stderr, "HOME is not set") {
		t.Errorf("no HOME: exit %d: %s", r.code, r.stderr)
	}
}

// A piece run stays "running" in its state when its process ends without
// finishing it (Ctrl-C leaves it so, for --resume to restart the
// movement; a kill or a closed terminal too): `sessions list` said
// "general: running" of sessions nobody ran. It asks the session's lock.
// So for a run killed while it waited for its subtasks ("waiting_subtasks"
// for ever): a local run's subtasks stop with its process.
func TestSessionsStatusAsksWhetherAProcessRunsIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ left, reason string }{
		{"running", "maestro run --resume restarts the movement"},
		{"waiting_subtasks", "maestro run --resume ends the unfinished subtasks as interrupted"},
	} {
		t.Run(tc.left, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			env := map[string]string{"MAESTRO_HOME": home}
			if r := runCLI(t, env, "run", "--piece", "general", "--workspace", t.TempDir(), "x"); r.code != 0 {
				t.Fatalf("piece run: exit %d: %s", r.code, r.stderr)
			}
			entries, _ := os.ReadDir(filepath.Join(home, "sessions"))
			if len(entries) != 1 {
				t.Fatalf("%d sessions", len(entries))
			}
			dir := filepath.Join(home, "sessions", entries[0].Name())
			statePath := filepath.Join(dir, "runs", "1", "logs", "run-state.json")
			data, err := os.ReadFile(statePath)
			if err != nil {
				t.Fatal(err)
			}
			var st map[string]any
			if err := json.Unmarshal(data, &st); err != nil {
				t.Fatal(err)
			}
			st["status"] = tc.left // as a Ctrl-C or a kill leaves it
			data, _ = json.Marshal(st)
			if err := os.WriteFile(statePath, data, 0o600); err != nil {
				t.Fatal(err)
			}
			status := func() (string, string) {
				t.Helper()
				r := runCLI(t, env, "sessions", "list", "--json")
				var list []struct{ Status, Reason string }
				if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 {
					t.Fatalf("list: %v %q %s", err, r.stdout, r.stderr)
				}
				return list[0].Status, list[0].Reason
			}
			if got, reason := status(); got != "interrupted" || !strings.Contains(reason, tc.reason) {
				t.Errorf("no process runs it: status %q, reason %q; want interrupted, %q", got, reason, tc.reason)
			}
			// A process holding the session's log runs it.
			f, err := os.Open(filepath.Join(dir, "events.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			if got, _ := status(); got != tc.left {
				t.Errorf("a process runs it: status %q, want %s", got, tc.left)
			}
		})
	}
}

// A compaction summary is logged after the messages it kept, but replaces
// those before them: `sessions show` printed it last, after the kept
// messages it precedes in the model's conversation. It is shown where the
// replaced messages end, marked, in the text and in --json.
func TestSessionsShowPlacesCompactionSummary(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	sess, err := session.NewStore(filepath.Join(home, "sessions")).Create(session.Meta{Workspace: t.TempDir(), Provider: "openai", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	text := func(role llm.Role, s string) llm.Message {
		return llm.Message{Role: role, Parts: []llm.Part{{Type: llm.PartText, Text: s}}}
	}
	summary := func(s string, kept int) llm.Message {
		m := text(llm.RoleUser, s)
		m.Compaction = &llm.Compaction{Kept: kept, TokensBefore: 900, TokensAfter: 300}
		return m
	}
	for _, m := range []llm.Message{
		text(llm.RoleUser, "u1"), text(llm.RoleAssistant, "a1"), text(llm.RoleUser, "u2"), text(llm.RoleAssistant, "a2"),
		summary("S1", 2), // replaces u1 a1, keeps u2 a2
		text(llm.RoleUser, "u3"), text(llm.RoleAssistant, "a3"),
		summary("S2", 2), // replaces S1 u2 a2, keeps u3 a3
		text(llm.RoleUser, "u4"), text(llm.RoleAssistant, "a4"),
	} {
		sess.Message(m)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MAESTRO_HOME": home}

	r := runCLI(t, env, "sessions", "show", sess.ID(), "--json")
	var out struct {
		Messages []struct {
			Text       string
			Compaction *struct{ Kept, Replaced int }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v: %s %s", err, r.stdout, r.stderr)
	}
	var order []string
	for _, m := range out.Messages {
		if m.Compaction != nil {
			m.Text += fmt.Sprintf("(replaced %d, kept %d)", m.Compaction.Replaced, m.Compaction.Kept)
		}
		order = append(order, m.Text)
	}
	if got, want := strings.Join(order, " "), "u1 a1 S1(replaced 2, kept 2) u2 a2 S2(replaced 3, kept 2) u3 a3 u4 a4"; got != want {
		t.Errorf("--json order:\n got %s\nwant %s", got, want)
	}

	r = runCLI(t, env, "sessions", "show", sess.ID())
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := []string{"  u1\n", "  a1\n",
		"compaction: from here the model reads this summary instead of the 2 message(s) above, then the 2 below (about 900 → 300 tokens)\n  S1\n",
		"  u2\n", "  a2\n",
		"compaction: from here the model reads this summary instead of the 3 message(s) above, then the 2 below (about 900 → 300 tokens)\n  S2\n",
		"  u3\n", "  a3\n", "  u4\n", "  a4\n"}
	at := 0
	for _, w := range want {
		i := strings.Index(r.stdout[at:], w)
		if i < 0 {
			t.Fatalf("stdout lacks %q after offset %d:\n%s", w, at, r.stdout)
		}
		at += i + len(w)
	}
}

// An agent CLI session's model is "default" (the CLI keeps its own), but
// its stream names the model of each answer (response_end usage): `sessions
// show` labelled every answer "assistant (default)".
func TestSessionsShowAgentCLIModel(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	sess, err := session.NewStore(filepath.Join(home, "sessions")).Create(session.Meta{Workspace: t.TempDir(), Provider: "claude-code", Model: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for i, model := range []string{"claude-opus-5-5", ""} {
		sess.Message(llm.UserText(fmt.Sprintf("u%d", i)))
		sess.Event(protocol.ResponseEnd{ResponseID: "r", Usage: protocol.Usage{ModelID: model}})
		sess.Message(llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text(fmt.Sprintf("a%d", i))}})
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "sessions", "show", sess.ID())
	for _, want := range []string{"] assistant (claude-opus-5-5)\n  a0\n", "] assistant (default)\n  a1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// A piece whose every movement runs on an agent CLI, run with no model
// configured, holds the bundled replay demo as its session's model,
// unused: `sessions list` and `show` said "replay builtin:demo". They name
// the agent CLIs its movements ran on; a piece one of whose movements ran
// on Maestro's own loop keeps the session's executor.
func TestSessionsAgentOnlyPiece(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		agents []string // per movement started; "" is Maestro's own loop
		want   string
	}{
		{"agent CLIs only", []string{"claude-code", "codex", "claude-code"}, "agent CLIs claude-code, codex"},
		{"one agent CLI", []string{"codex"}, "agent CLI codex"},
		{"own loop too", []string{"claude-code", ""}, "replay builtin:demo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			sess, err := session.NewStore(filepath.Join(home, "sessions")).Create(session.Meta{Workspace: t.TempDir(),
				Provider: "replay", Model: "maestro-replay-v1", ExecutorType: protocol.ExecutorReplay, Replay: "builtin:demo", Title: "do it"})
			if err != nil {
				t.Fatal(err)
			}
			sink := engine.SessionEvents(sess)
			for i, agent := range tc.agents {
				sink.RunEvent(engine.Record{RunID: sess.ID() + ".1", Seq: i, Event: engine.MovementStarted{Movement: "m", Number: i + 1, Agent: agent}})
			}
			if err := sess.Close(); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"MAESTRO_HOME": home}
			for _, args := range [][]string{{"sessions", "list"}, {"sessions", "show", sess.ID()}} {
				if r := runCLI(t, env, args...); r.code != 0 || !strings.Contains(r.stdout, "  "+tc.want+"  ") && !strings.Contains(r.stdout, "executor  "+tc.want+"\n") {
					t.Errorf("%s: exit %d, want executor %q:\n%s%s", args, r.code, tc.want, r.stdout, r.stderr)
				}
			}
			r := runCLI(t, env, "sessions", "list", "--json")
			var list []struct {
				Executor string
				Agents   []string
			}
			if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 {
				t.Fatalf("list --json: %v %q %s", err, r.stdout, r.stderr)
			}
			if agentOnly := !slices.Contains(tc.agents, ""); agentOnly != (list[0].Executor == "agent_cli" && len(list[0].Agents) > 0) {
				t.Errorf("list --json: executor %q, agents %q; want agent_cli and its CLIs: %v", list[0].Executor, list[0].Agents, agentOnly)
			}
		})
	}
}
