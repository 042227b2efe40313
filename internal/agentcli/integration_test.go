package agentcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli/agentclitest"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// The integration tier runs the five real CLIs, installed by
// scripts/install-agent-clis.sh into .cache/agent-clis (or
// $MAESTRO_AGENT_CLIS), against the fake model server with an isolated
// HOME. No request leaves 127.0.0.1. Missing CLIs skip loudly, and fail
// the test when CI=true.

// eachCLI runs test in parallel for every CLI setup (each a subtest that
// needs its CLI installed, see proctest.AgentCLI), with a fresh home and
// workspace.
func eachCLI(t *testing.T, test func(t *testing.T, s cliSetup, home, work string)) {
	for _, s := range setups {
		t.Run(s.ID, func(t *testing.T) {
			t.Parallel()
			proctest.AgentCLI(t, s.Bin)
			test(t, s, t.TempDir(), t.TempDir())
		})
	}
}

// cliSetup is how one CLI is pointed at the fake server.
type cliSetup = agentclitest.Setup

// setups are the five built-in CLIs.
var setups = agentclitest.Setups()

// fakeModel is the fake model server of the tier.
type fakeModel = agentclitest.FakeModel

func newFakeModel(t *testing.T, turns ...llmtest.Turn) *fakeModel {
	return agentclitest.NewFakeModel(t, turns...)
}

func writeFile(t testing.TB, path, content string) { agentclitest.WriteFile(t, path, content) }

type runOutcome struct {
	res      *RunResult
	err      error
	types    []string
	text     string
	thinking string
	// raw is the CLI's stdout as read, one line per parsed line.
	raw    []byte
	tools  []protocol.ToolCall
	ends   []protocol.ToolEnd
	output string
}

func runCLI(t *testing.T, s cliSetup, home, work string, f *fakeModel, inv Invocation, timeout time.Duration) runOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	x := &Executor{Def: mustDef(t, s.ID), Path: proctest.AgentCLI(t, s.Bin), MaxAttempts: 1}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TMPDIR=" + filepath.Join(home, "tmp"), "NO_COLOR=1"}
	_ = os.MkdirAll(filepath.Join(home, "tmp"), 0o755)
	x.Env = env
	// The CLI's settings go on the invocation so they override the
	// definition's own environment defaults.
	inv.Env = append(inv.Env, s.Env(t, home, f.URL)...)
	inv.Dir, inv.Model = work, s.Model
	start := time.Now()
	defer func() { t.Logf("%s %q: %v", s.ID, inv.Prompt, time.Since(start).Round(time.Millisecond)) }()
	var o runOutcome
	o.res, o.err = x.Run(ctx, Request{Invocation: inv}, func(ev Event) {
		if ev.Raw != nil {
			o.raw = append(append(o.raw, ev.Raw...), '\n')
		}
		for _, m := range ev.Messages {
			o.types = append(o.types, m.MessageType())
			switch m := m.(type) {
			case protocol.ResponseChunk:
				if m.IsThinking {
					o.thinking += m.Content
				} else {
					o.text += m.Content
				}
			case protocol.ToolCall:
				o.tools = append(o.tools, m)
			case protocol.ToolEnd:
				o.ends = append(o.ends, m)
			case protocol.ToolOutput:
				o.output += m.Content
			}
		}
	})
	if ctx.Err() != nil && !errors.Is(o.err, ErrInterrupted) {
		t.Fatalf("%s did not finish within %v", s.ID, timeout)
	}
	return o
}

// thinkingWant is, per CLI, whether it puts the model's reasoning on its
// stream (Gemini CLI's stream-json drops thoughts; see docs/agent-clis.md)
// and whether it reports a cost (Claude total_cost_usd, OpenCode part
// cost).
var thinkingWant = map[string]struct{ surfaces, costs bool }{
	"claude-code": {true, true},
	"codex":       {true, false},
	"gemini-cli":  {false, false},
	"opencode":    {true, true},
	"qwen-code":   {true, false},
}

// TestIntegrationAgentCLIs runs each real CLI as few times as its checks
// allow (each launch costs seconds of CPU, OpenCode's 15-20 s): a plain
// turn whose model call streams reasoning first, its resume, a tool turn,
// then one launch per HTTP error, whose prompts begin with "-" (YAML front
// matter, an option look-alike). The interrupt of a real
// CLI is tested through the binary, on every CLI, in cmd/maestro's
// TestAgentCLIInterruptE2E (run/SIGINT: no process of the CLI's group
// runs 2 s after Ctrl-C); the executor's kill itself in
// TestInterruptKillsProcessGroup.
func TestIntegrationAgentCLIs(t *testing.T) {
	t.Parallel()
	eachCLI(t, func(t *testing.T, s cliSetup, home, work string) {
		// A bound per CLI run, not an expectation: OpenCode's ~16 s of CPU
		// per run took over 3 min of wall time under a load of 40 on 2 cores.
		const runTimeout = 5 * time.Minute
		w, ok := thinkingWant[s.ID]
		if !ok {
			t.Fatalf("no thinking expectation for %s", s.ID)
		}

		// A plain turn, its resume and a tool turn in one HOME: the
		// stream of each is checked here, then the two sessions they
		// stored are read back through the CLI's SessionStore. (One set of
		// launches serves both; they were two tests that ran the same
		// three turns.)
		turns := runSessionTurns(t, s, home, work)
		o := turns.plain
		if o.text != "Hello from the fake model." || o.res.Result == nil || o.res.Result.Text != "Hello from the fake model." {
			t.Errorf("plain turn: text %q, result %+v", o.text, o.res.Result)
		}
		if !containsInOrder(o.types, "response_start", "response_chunk", "response_end") {
			t.Errorf("plain turn events: %v", o.types)
		}
		// The plain turn's model call streams reasoning (thinkingText)
		// before the answer: which CLIs surface it, and the cost each
		// reports.
		wantThinking := ""
		if w.surfaces {
			wantThinking = thinkingText
		}
		if o.thinking != wantThinking {
			t.Errorf("plain turn: thinking %q, want %q (surfaces=%v)\n%s", o.thinking, wantThinking, w.surfaces, o.raw)
		}
		if o.res.Result != nil && (o.res.Result.CostUSD > 0) != w.costs {
			t.Errorf("plain turn: cost %v, want a cost: %v", o.res.Result.CostUSD, w.costs)
		}
		captureThinkingTurn(t, s, o)

		// Resume: same session (runSessionTurns checks it), history
		// replayed to the model.
		if o = turns.resume; o.text != "Second turn after resume." {
			t.Errorf("resume: text %q", o.text)
		}
		if reqs := turns.resumeModel.Main.Requests(); len(reqs) == 0 || !bytes.Contains(reqs[0].Body, []byte("Hello from the fake model.")) {
			t.Errorf("resume: the model did not receive the earlier turn")
		}

		// Tool-call turn.
		o = turns.tool
		if len(o.tools) != 1 || len(o.ends) != 1 || !o.ends[0].Success || !strings.Contains(o.output, "maestro-tool-ok") {
			t.Errorf("tool turn: calls %+v, ends %+v, output %q", o.tools, o.ends, o.output)
		}
		if o.text != "Tool said: maestro-tool-ok" {
			t.Errorf("tool turn: text %q", o.text)
		}
		if !containsInOrder(o.types, "tool_call", "tool_start", "tool_end", "response_start", "response_end") {
			t.Errorf("tool turn events: %v", o.types)
		}
		// At the default level (edit) the CLI's shell tool writes in the
		// workspace (the read-only level's refusal is cmd/maestro's
		// TestAgentCLIPermissionE2E).
		if data, err := os.ReadFile(filepath.Join(work, toolFile)); err != nil || string(data) != "maestro-tool-ok\n" {
			t.Errorf("tool turn at edit level: %s holds %q (%v), want maestro-tool-ok", toolFile, data, err)
		}

		// The sessions the turns stored, listed and read back.
		checkStoredSessions(t, s, home, work, turns.runs)

		// HTTP errors map to categories. The prompts begin with "-" (YAML
		// front matter, an option look-alike): each reaches the model as
		// the user's text.
		for _, c := range []struct {
			status       int
			want         Category
			prompt, seen string
		}{
			{400, InvalidRequest, "---\ntitle: maestro\n---\nsay hello", "title: maestro"},
			{401, AuthExpired, dashPrompt, `"` + dashPrompt + `"`},
		} {
			f := newFakeModel(t, llmtest.Turn{Status: c.status})
			f.Main.Loop = true // CLIs that retry get the same answer
			o := runCLI(t, s, t.TempDir(), work, f, Invocation{Prompt: c.prompt}, runTimeout)
			if o.err != nil {
				t.Fatalf("HTTP %d: %v", c.status, o.err)
			}
			if o.res.Err == nil || o.res.Err.Category != c.want {
				t.Errorf("HTTP %d: agent error %v, want category %s", c.status, o.res.Err, c.want)
			}
			if !anyRequestHas(f, c.seen) {
				t.Errorf("HTTP %d: prompt %q did not reach the model as the user's text", c.status, c.prompt)
			}
		}
	})
}

// anyRequestHas reports whether a main request to f carried text.
func anyRequestHas(f *fakeModel, text string) bool {
	for _, r := range f.Main.Requests() {
		if bytes.Contains(r.Body, []byte(text)) {
			return true
		}
	}
	return false
}

// captureThinkingTurn, with MAESTRO_CAPTURE_FIXTURES=1, writes the stream
// of the plain turn (whose model call streams reasoning) to
// testdata/<cli>-<version>/thinking-turn.{jsonl,exit}; TestFixtures'
// expectations for it then take the plain turn's text and usage.
func captureThinkingTurn(t *testing.T, s cliSetup, o runOutcome) {
	t.Helper()
	if os.Getenv("MAESTRO_CAPTURE_FIXTURES") != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	det := Detect(ctx, mustDef(t, s.ID), filepath.Dir(proctest.AgentCLI(t, s.Bin)))
	if det.Version == "" {
		t.Fatalf("capture: %s version: %v", s.ID, det.Err)
	}
	base := filepath.Join("testdata", s.ID+"-"+det.Version, "thinking-turn")
	writeFile(t, base+".jsonl", string(o.raw))
	writeFile(t, base+".exit", fmt.Sprintf("%d\n", o.res.ExitCode))
	t.Logf("captured %s.jsonl", base)
}

// containsInOrder reports whether want appears in got as a subsequence.
func containsInOrder(got []string, want ...string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// thinkingText is the reasoning the fake model streams before its answer
// in the plain turn, in each CLI's wire format: an Anthropic thinking
// block with its signature, a Responses reasoning summary, Chat
// Completions reasoning_content, a Gemini thought part.
const thinkingText = "The user wants a greeting; answer briefly."

// dashPrompt is the prompt of the HTTP 401 launch: an option look-alike,
// which must reach the model as the user's text.
const dashPrompt = "-x"

// Permission levels: the edit level (the default) lets the tool turn's
// shell command write in the workspace (TestIntegrationAgentCLIs); the
// read-only level is tested through the binary, on every CLI, in
// cmd/maestro's TestAgentCLIPermissionE2E (no file, the refusal reported).
