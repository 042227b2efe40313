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

func TestIntegrationAgentCLIs(t *testing.T) {
	t.Parallel()
	eachCLI(t, func(t *testing.T, s cliSetup, home, work string) {
		// A bound per CLI run, not an expectation: OpenCode's ~16 s of CPU
		// per run took over 3 min of wall time under a load of 40 on 2 cores.
		const runTimeout = 5 * time.Minute

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

		// The sessions the turns stored, listed and read back.
		checkStoredSessions(t, s, home, work, turns.runs)

		// HTTP errors map to categories.
		for _, c := range []struct {
			status int
			want   Category
		}{{400, InvalidRequest}, {401, AuthExpired}} {
			f := newFakeModel(t, llmtest.Turn{Status: c.status})
			f.Main.Loop = true // CLIs that retry get the same answer
			o := runCLI(t, s, t.TempDir(), work, f, Invocation{Prompt: "say hello"}, runTimeout)
			if o.err != nil {
				t.Fatalf("HTTP %d: %v", c.status, o.err)
			}
			if o.res.Err == nil || o.res.Err.Category != c.want {
				t.Errorf("HTTP %d: agent error %v, want category %s", c.status, o.res.Err, c.want)
			}
		}

		// Interrupt ends the CLI within 2 s.
		f := newFakeModel(t)
		f.Hang = true
		// The CLI's start-up until its model call may take minutes on a
		// loaded machine: the same bound as cmd/maestro's interrupt tests.
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		runCtx, interrupt := context.WithCancel(ctx)
		x := &Executor{Def: mustDef(t, s.ID), Path: proctest.AgentCLI(t, s.Bin), MaxAttempts: 1}
		x.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		intEnv := s.Env(t, home, f.URL)
		done := make(chan time.Time, 1)
		var runErr error
		go func() {
			_, runErr = x.Run(runCtx, Request{Invocation: Invocation{Prompt: "say hello", Dir: work, Model: s.Model, Env: intEnv}}, func(Event) {})
			done <- time.Now()
		}()
		select {
		case <-f.Arrived:
		case <-ctx.Done():
			t.Fatal("interrupt: the model call never arrived")
		}
		at := time.Now()
		interrupt()
		select {
		case end := <-done:
			if d := end.Sub(at); d > 2*time.Second {
				t.Errorf("interrupt: the CLI ended %v after the interrupt, want < 2s", d)
			}
			if !errors.Is(runErr, ErrInterrupted) {
				t.Errorf("interrupt: err %v", runErr)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("interrupt: the CLI still runs 5 s after the interrupt")
		}
	})
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
// in the thinking turn, in each CLI's wire format: an Anthropic thinking
// block with its signature, a Responses reasoning summary, Chat
// Completions reasoning_content, a Gemini thought part.
const thinkingText = "The user wants a greeting; answer briefly."

// dashPrompt is the prompt of the thinking turn: an option look-alike,
// which must reach the model as the user's text.
const dashPrompt = "-x"

// TestIntegrationThinking runs one turn whose model call streams reasoning
// before the answer (its prompt is dashPrompt), and checks which CLIs
// surface it (Gemini CLI's stream-json drops thoughts; see
// docs/agent-clis.md) and the cost each reports. With
// MAESTRO_CAPTURE_FIXTURES=1 it writes the stream to
// testdata/<cli>-<version>/thinking-turn.{jsonl,exit}.
func TestIntegrationThinking(t *testing.T) {
	t.Parallel()
	want := map[string]struct {
		surfaces bool // the CLI puts the reasoning on its stream
		costs    bool // the CLI reports a cost (Claude total_cost_usd, OpenCode part cost)
	}{
		"claude-code": {true, true},
		"codex":       {true, false},
		"gemini-cli":  {false, false},
		"opencode":    {true, true},
		"qwen-code":   {true, false},
	}
	for _, s := range setups {
		t.Run(s.ID, func(t *testing.T) {
			t.Parallel()
			bin := proctest.AgentCLI(t, s.Bin)
			w, ok := want[s.ID]
			if !ok {
				t.Fatalf("no thinking expectation for %s", s.ID)
			}
			f := newFakeModel(t, llmtest.Turn{Thinking: thinkingText, Text: []string{"Hello after thinking."}, InputTokens: 15, OutputTokens: 9})
			// The prompt is an option look-alike: this launch is also the
			// "-x" case of the dash prompts (see TestIntegrationDashPrompts).
			o := runCLI(t, s, t.TempDir(), t.TempDir(), f, Invocation{Prompt: dashPrompt}, 180*time.Second)
			if o.err != nil || o.res.Err != nil || o.res.ExitCode != 0 {
				t.Fatalf("thinking turn: err %v, agent error %v, exit %d\n%s", o.err, o.res.Err, o.res.ExitCode, o.raw)
			}
			if reqs := f.Main.Requests(); len(reqs) == 0 || !bytes.Contains(reqs[0].Body, []byte(`"`+dashPrompt+`"`)) {
				t.Errorf("prompt %q did not reach the model as the user's text", dashPrompt)
			}
			if o.text != "Hello after thinking." || o.res.Result == nil || o.res.Result.Text != "Hello after thinking." {
				t.Errorf("thinking turn: text %q, result %+v", o.text, o.res.Result)
			}
			wantThinking := ""
			if w.surfaces {
				wantThinking = thinkingText
			}
			if o.thinking != wantThinking {
				t.Errorf("thinking turn: thinking %q, want %q (surfaces=%v)\n%s", o.thinking, wantThinking, w.surfaces, o.raw)
			}
			if cost := o.res.Result.CostUSD; (cost > 0) != w.costs {
				t.Errorf("thinking turn: cost %v, want a cost: %v", cost, w.costs)
			}
			if os.Getenv("MAESTRO_CAPTURE_FIXTURES") == "1" {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				det := Detect(ctx, mustDef(t, s.ID), filepath.Dir(bin))
				if det.Version == "" {
					t.Fatalf("capture: %s version: %v", s.ID, det.Err)
				}
				base := filepath.Join("testdata", s.ID+"-"+det.Version, "thinking-turn")
				writeFile(t, base+".jsonl", string(o.raw))
				writeFile(t, base+".exit", fmt.Sprintf("%d\n", o.res.ExitCode))
				t.Logf("captured %s.jsonl", base)
			}
		})
	}
}

// Permission levels are tested through the binary, on every CLI, in
// cmd/maestro's TestAgentCLIPermissionE2E (edit creates the file, read-only
// creates none and reports the refusal): the same CLI runs here again
// would double the tier's cost for nothing more.

// TestIntegrationDashPrompts runs a prompt that begins with "-" (YAML
// front matter) on every CLI: it reaches the model as the user's text and
// the turn succeeds. The other dash prompt, the option look-alike "-x",
// is the prompt of TestIntegrationThinking's turn, which checks the same.
func TestIntegrationDashPrompts(t *testing.T) {
	t.Parallel()
	const prompt, seen = "---\ntitle: maestro\n---\nsay hello", "title: maestro"
	eachCLI(t, func(t *testing.T, s cliSetup, home, work string) {
		hello := llmtest.Turn{Text: []string{"Hello."}, InputTokens: 12, OutputTokens: 2}
		f := newFakeModel(t, hello, hello, hello)
		o := runCLI(t, s, home, work, f, Invocation{Prompt: prompt}, 240*time.Second)
		if o.err != nil || o.res.Err != nil || o.res.ExitCode != 0 || o.text != "Hello." {
			t.Fatalf("prompt %q: err %v, agent error %v, exit %d, text %q\n%s", prompt, o.err, o.res.Err, o.res.ExitCode, o.text, o.raw)
		}
		reqs := f.Main.Requests()
		if len(reqs) == 0 || !bytes.Contains(reqs[0].Body, []byte(seen)) {
			t.Errorf("prompt %q did not reach the model as the user's text", prompt)
		}
	})
}
