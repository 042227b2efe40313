package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/protocol"
)

// agentHarness runs testdata/agentmove/review.yaml: its first movement on
// the fake CLI testdata/agentmove/agents/fake-move (a user-defined adapter), the
// others on replay (testdata/agentmove/complete.yaml).
type agentHarness struct {
	t     *testing.T
	ws    string
	state string // the fake CLI's $FAKE_STATE
	rec   *recorder
	prov  *recording
	cfg   Config
	p     *piece.Piece
	// onEvent, when set, sees every protocol event after the recorder.
	onEvent func(protocol.Message)
}

func (h *agentHarness) Event(m protocol.Message) {
	h.rec.Event(m)
	if h.onEvent != nil {
		h.onEvent(m)
	}
}
func (h *agentHarness) Message(llm.Message) {}

func newAgentHarness(t *testing.T) *agentHarness {
	t.Helper()
	root := fruitWorkspace(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "agentmove"))
	if err != nil {
		t.Fatal(err)
	}
	agents := filepath.Join(dir, "agents")
	reg, err := agentcli.Load(agents)
	if err != nil {
		t.Fatalf("load the fake adapter: %v", err)
	}
	def, ok := reg.Get("fake-move")
	if !ok {
		t.Fatalf("fake-move adapter not loaded; ids %v", reg.IDs())
	}
	src, err := os.ReadFile(filepath.Join(dir, "review.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := piece.Parse("review.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	scen, err := replay.Load(filepath.Join(dir, "complete.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h := &agentHarness{t: t, ws: root.Dir(), state: t.TempDir(), rec: &recorder{}, p: p}
	h.prov = &recording{Provider: replay.New(scen)}
	env := append(os.Environ(), "PATH="+agents+string(os.PathListSeparator)+os.Getenv("PATH"), "FAKE_STATE="+h.state)
	h.cfg = Config{
		Provider: h.prov, Workspace: root, Sink: h, Events: WithStatusLines(h.rec, h), RunDir: t.TempDir(),
		Agents: AgentRunnerFunc(func(_ context.Context, id string) (*AgentCLI, error) {
			if id != def.ID {
				return nil, fmt.Errorf("unknown agent %q", id)
			}
			return &AgentCLI{Executor: &agentcli.Executor{Def: def, Env: env, MaxAttempts: 1}}, nil
		}),
	}
	return h
}

func (h *agentHarness) engine() *Engine { return mustNew(h.t, h.cfg) }

// fakeFile reads a file the fake CLI wrote.
func (h *agentHarness) fakeFile(name string) string {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.state, name))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(data)
}

// flow lists the protocol events: each type, and for status lines the
// run events they show ("status:movement …", "status:transition …").
func (r *recorder) flow() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.events {
		if s, ok := m.(protocol.Status); ok {
			out = append(out, "status:"+s.Message)
			continue
		}
		out = append(out, m.MessageType())
	}
	return out
}

func TestAgentMovementDecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		task       string
		wantStatus RunStatus
		wantResult string
		// wantTo is the transition out of review ("" when the run ended
		// in review).
		wantTo     string
		wantForced bool
		wantReason string
		wantSum    string
		// wantLessons are the lessons the agent's [LESSON: …] tags added.
		wantLessons []string
	}{
		{name: "next tag", task: "Check. <reply>The notes look right: apples, pears, plums. [LESSON: plums has one m] [NEXT:finish]</reply>",
			wantStatus: StatusSucceeded, wantResult: "Done.", wantTo: "finish", wantSum: "The notes look right: apples, pears, plums.", wantLessons: []string{"plums has one m"}},
		{name: "last valid tag wins", task: "<reply>Not [NEXT:fix] after all. [NEXT:nowhere] [NEXT:finish]</reply>",
			wantStatus: StatusSucceeded, wantResult: "Done.", wantTo: "finish", wantSum: "Not  after all."},
		{name: "rule condition in the text", task: "<reply>I think THE NOTES  need fixing: plums are misspelt.</reply>",
			wantStatus: StatusSucceeded, wantResult: "Done.", wantTo: "fix", wantSum: "I think THE NOTES  need fixing: plums are misspelt."},
		{name: "status success ends the run", task: "<reply>Three fruits. [STATUS:success]</reply>",
			wantStatus: StatusSucceeded, wantResult: "Three fruits."},
		{name: "status aborted", task: "<reply>No notes to review. [status:aborted]</reply>",
			wantStatus: StatusAborted, wantResult: "No notes to review."},
		{name: "no tag falls back to default_next", task: "<reply>Hmm. [NEXT:nowhere]</reply>",
			wantStatus: StatusAborted, wantResult: "The run was stopped in movement review: " + reasonNoTag + ".", wantReason: reasonNoTag},
		{name: "error result takes the category's failure rule", task: "[fake:fail]",
			wantStatus: StatusSucceeded, wantResult: "Done.", wantTo: "fallback", wantForced: true,
			wantReason: "agent fake-move failed (auth_expired): API Error: 401 invalid api key",
			wantSum:    "Movement review ran on the agent CLI Fake Move, which failed (auth_expired): API Error: 401 invalid api key"},
		{name: "a failure without a failure rule aborts", task: "[fake:crash]",
			wantStatus: StatusAborted,
			wantResult: "The run was stopped: movement review's agent fake-move failed (agent_crashed): Agent exited with code 3: fake-move: segmentation fault, and the movement has no [ERROR] rule.",
			wantReason: "agent fake-move failed (agent_crashed): Agent exited with code 3: fake-move: segmentation fault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newAgentHarness(t)
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			out, err := h.engine().Start(ctx, h.p, tt.task, StartOptions{RunID: "run_agent"})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if out.Status != tt.wantStatus || out.Result != tt.wantResult {
				t.Errorf("outcome %s %q, want %s %q", out.Status, out.Result, tt.wantStatus, tt.wantResult)
			}
			starts := all[MovementStarted](h.rec)
			if len(starts) == 0 || starts[0].Agent != "fake-move" || starts[0].Tools != nil {
				t.Fatalf("movement_started events %+v, want review on agent fake-move first", starts)
			}
			trs := all[Transition](h.rec)
			if tt.wantTo == "" {
				if len(trs) != 0 {
					t.Errorf("transitions %+v, want none", trs)
				}
				if c := all[Complete](h.rec); len(c) != 1 || c[0].Movement != "review" || c[0].Reason != tt.wantReason {
					t.Errorf("complete events %+v, want one in review with reason %q", c, tt.wantReason)
				}
				return
			}
			want := Transition{From: "review", To: tt.wantTo, Summary: tt.wantSum, Forced: tt.wantForced, Reason: tt.wantReason}
			if len(trs) != 1 {
				t.Fatalf("transitions %+v, want one", trs)
			}
			if diff := cmp.Diff(want, trs[0]); diff != "" {
				t.Errorf("transition (-want +got):\n%s", diff)
			}
			var lessons []string
			for _, l := range all[Lessons](h.rec) {
				lessons = append(lessons, l.Added...)
			}
			if diff := cmp.Diff(tt.wantLessons, lessons); diff != "" {
				t.Errorf("lessons (-want +got):\n%s", diff)
			}
			// The next movement (Maestro's loop) is briefed with the
			// agent's output as the handoff.
			reqs := h.prov.requests()
			if len(reqs) != 1 || !strings.Contains(text(reqs[0]), "# Handoff from review\n\n"+strings.TrimSpace(tt.wantSum)) {
				t.Errorf("the next movement's briefing lacks the handoff %q", tt.wantSum)
			}
		})
	}
}

func TestAgentMovementEventsPromptAndAccounting(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	task := "Check the notes. <reply>Fine: three fruits. [NEXT:finish]</reply>"
	out, err := h.engine().Start(ctx, h.p, task, StartOptions{RunID: "run_agent"})
	if err != nil {
		t.Fatal(err)
	}
	want := &Outcome{RunID: "run_agent", Piece: "agent-review", Status: StatusSucceeded, Result: "Done.", Movement: "finish", Movements: 2,
		Usage: llm.Usage{InputTokens: 12, OutputTokens: 5}, CostUSD: 0.002, CostKnown: true, ModelCalls: 3, ToolCalls: 2} // the CLI's Bash and finish's complete
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	wantKinds := []EventKind{KindRunStarted, KindMovementStarted, KindTransition, KindMovementStarted, KindComplete}
	if diff := cmp.Diff(wantKinds, h.rec.kinds()); diff != "" {
		t.Errorf("run event kinds (-want +got):\n%s", diff)
	}
	// The CLI's events arrive between the movement's start and its
	// transition, in the CLI's order, as protocol events.
	wantFlow := []string{
		"status:piece agent-review: starting at review",
		"status:movement review (1 of at most 6) on agent CLI fake-move",
		"response_start", "response_end", "tool_call", "tool_start", "tool_output", "tool_end",
		"response_start", "response_chunk", "response_end",
		"status:review → finish: Fine: three fruits.",
		"status:movement finish (2 of at most 6)",
	}
	if got := h.rec.flow(); !flowInOrder(got, wantFlow) {
		t.Errorf("protocol event flow:\n got %q\nwant %q (as a subsequence)", got, wantFlow)
	}
	// The prompt: persona (embedded, the adapter has no system-prompt
	// flag), instruction, task, the rules as tags; read-only → --plan.
	prompt := h.fakeFile("prompt")
	for _, s := range []string{"You are a careful reviewer.", "Review notes.txt and say whether the notes are fine.", "# Task\n\n" + task,
		"`[NEXT:fix]` when the notes need fixing", "`[NEXT:finish]` when the notes are fine", "`[STATUS:needs_user_input]`",
		"This movement is read-only"} {
		if !strings.Contains(prompt, s) {
			t.Errorf("the CLI's prompt lacks %q:\n%s", s, prompt)
		}
	}
	for _, s := range []string{"[NEXT:fallback]", "control tool"} {
		if strings.Contains(prompt, s) {
			t.Errorf("the CLI's prompt has %q:\n%s", s, prompt)
		}
	}
	argv := strings.Split(strings.TrimSpace(h.fakeFile("argv")), "\n")
	if !slices.Contains(argv, "--plan") || slices.Contains(argv, "--resume") {
		t.Errorf("argv %q: want --plan (read-only movement) and no --resume", argv)
	}
}

func TestAgentMovementAskAndResumeSession(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	out, err := h.engine().Start(ctx, h.p, "<reply>Which file holds the notes? [STATUS:needs_user_input]</reply>", StartOptions{RunID: "run_agent"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusWaitingHuman || out.Result != "Which file holds the notes?" {
		t.Fatalf("outcome %s %q, want waiting_human with the question", out.Status, out.Result)
	}
	// Another engine (as another process would) continues the CLI session.
	out, err = h.engine().Resume(ctx, "notes.txt <reply>Fine after all. [NEXT:finish]</reply>")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusSucceeded || out.Result != "Done." {
		t.Errorf("outcome after the answer %s %q", out.Status, out.Result)
	}
	argv := h.fakeFile("argv")
	if !strings.Contains(argv, "--resume\n22222222-3333-4444-8555-666666666666\n") {
		t.Errorf("the answer did not resume the CLI session; argv:\n%s", argv)
	}
	if p := h.fakeFile("prompt"); !strings.HasPrefix(p, "The user answered your question: notes.txt") || strings.Contains(p, "# Task") {
		t.Errorf("continuation prompt:\n%s", p)
	}
	trs := all[Transition](h.rec)
	if len(trs) != 1 || trs[0].Summary != "(resumed) Fine after all." {
		t.Errorf("transitions %+v", trs)
	}
}

func TestAgentMovementInterruptKillsProcessGroup(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	runCtx, interrupt := context.WithCancel(ctx)
	pid := make(chan int, 1)
	var at time.Time
	h.onEvent = func(m protocol.Message) {
		if c, ok := m.(protocol.ResponseChunk); ok {
			if n, err := strconv.Atoi(strings.TrimPrefix(c.Content, "child ")); err == nil {
				pid <- n
				at = time.Now()
				interrupt()
			}
		}
	}
	out, err := h.engine().Start(runCtx, h.p, "[fake:hang]", StartOptions{RunID: "run_agent"})
	ended := time.Now()
	if !errors.Is(err, agent.ErrCancelled) {
		t.Fatalf("err %v, want agent.ErrCancelled", err)
	}
	if out.Status != StatusRunning || out.Reason != "interrupted" {
		t.Errorf("outcome %s (%s), want running (interrupted)", out.Status, out.Reason)
	}
	var child int
	select {
	case child = <-pid:
	default:
		t.Fatal("the fake CLI never reported its child")
	}
	if d := ended.Sub(at); d > 2*time.Second {
		t.Errorf("the run ended %v after the interrupt, want < 2s", d)
	}
	// A killed child may linger as a zombie until reaped: only a live one
	// is a failure.
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); err == nil {
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] != "Z" {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Errorf("the CLI's child %d survived the interrupt (state %s)", child, f[0])
		}
	}
	// Resume restarts the movement in the same CLI session, with the
	// user's note.
	h.onEvent = nil
	out, err = h.engine().Resume(ctx, "<reply>Recovered: fine. [NEXT:finish]</reply>")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusSucceeded {
		t.Errorf("outcome after resume %s %q", out.Status, out.Result)
	}
	if argv := h.fakeFile("argv"); !strings.Contains(argv, "--resume\n22222222-3333-4444-8555-666666666666\n") {
		t.Errorf("the restart did not resume the CLI session; argv:\n%s", argv)
	}
	if p := h.fakeFile("prompt"); !strings.Contains(p, "Maestro restarted this movement") || !strings.Contains(p, "(interrupted)") {
		t.Errorf("restart prompt:\n%s", p)
	}
}

func TestAgentMovementWithoutRunner(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	h.cfg.Agents = nil
	out, err := h.engine().Start(t.Context(), h.p, "anything", StartOptions{})
	if !errors.Is(err, ErrAgentCLI) || out.Status != StatusFailed {
		t.Errorf("Start without Config.Agents: %s, %v; want failed with ErrAgentCLI", out.Status, err)
	}
	h = newAgentHarness(t)
	h.p.Movements[0].Agent = "no-such-agent"
	out, err = h.engine().Start(t.Context(), h.p, "anything", StartOptions{})
	if !errors.Is(err, ErrAgentCLI) || !strings.Contains(fmt.Sprint(err), `unknown agent "no-such-agent"`) || out.Status != StatusFailed {
		t.Errorf("Start with an unknown agent: %s, %v", out.Status, err)
	}
}

// A read-only movement on an adapter without a read-only mode
// (capabilities.read_only_mode false) is refused by the capability gate:
// the status line before the failure said it "runs with the adapter's
// default permissions".
func TestAgentMovementReadOnlyWithoutMode(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	inner := h.cfg.Agents
	h.cfg.Agents = AgentRunnerFunc(func(ctx context.Context, id string) (*AgentCLI, error) {
		cli, err := inner.AgentCLI(ctx, id)
		if err != nil {
			return nil, err
		}
		def, x := *cli.Executor.Def, *cli.Executor
		def.Args.ReadOnly, def.Capabilities.ReadOnlyMode = nil, false
		x.Def = &def
		return &AgentCLI{Executor: &x, Base: cli.Base}, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	out, err := h.engine().Start(ctx, h.p, "Check the notes. <reply>Fine. [NEXT:finish]</reply>", StartOptions{RunID: "run_agent"})
	if out.Status != StatusFailed || !strings.Contains(fmt.Sprint(out.Result, err), "no read-only mode") {
		t.Errorf("outcome %s %q, %v; want failed: no read-only mode", out.Status, out.Result, err)
	}
	for _, l := range h.rec.flow() {
		if strings.Contains(l, "default permissions") {
			t.Errorf("%q, and the gate refused the run", l)
		}
	}
}

// flowInOrder reports whether want is a subsequence of got; a status
// entry of want matches a status line that starts with it.
func flowInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && (g == want[i] || (strings.HasPrefix(want[i], "status:") && strings.HasPrefix(g, want[i]))) {
			i++
		}
	}
	return i == len(want)
}

func TestRegistryAgents(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("testdata", "agentmove", "agents"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := agentcli.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cli, err := RegistryAgents(reg, dir, nil, "fake-move/big").AgentCLI(ctx, "fake-move")
	if err != nil || cli.Executor.Path != filepath.Join(dir, "fake-move") || cli.Base.Model != "big" {
		t.Errorf("fake-move: %+v, %v", cli, err)
	}
	if cli, err := RegistryAgents(reg, dir, nil, "anthropic/claude").AgentCLI(ctx, "fake-move"); err != nil || cli.Base.Model != "" {
		t.Errorf("another provider's model reached the CLI: %+v, %v", cli, err)
	}
	if _, err := RegistryAgents(reg, dir, nil, "").AgentCLI(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "fake-move") {
		t.Errorf("unknown agent: %v, want the known ids", err)
	}
	if _, err := RegistryAgents(reg, t.TempDir(), nil, "").AgentCLI(ctx, "claude-code"); err == nil || !strings.Contains(err.Error(), "install it") {
		t.Errorf("missing binary: %v", err)
	}
}

// Config.Agent runs every movement on that agent CLI, those written for
// Maestro's own loop included: a piece with no agent: at all runs a on the
// CLI (its reply meets a's rule), then b on the CLI (no rule met: its
// default_next completes), and never calls the model.
func TestConfigAgentRunsEveryMovement(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	h.cfg.Agent = "fake-move"
	p := plainTwoMovements(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	out, err := h.engine().Start(ctx, p, "<reply>All is well.</reply>", StartOptions{RunID: "run_agent"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusSucceeded || out.Movement != "b" {
		t.Errorf("outcome %s in %s (%q), want succeeded in b", out.Status, out.Movement, out.Result)
	}
	var on []string
	for _, s := range all[MovementStarted](h.rec) {
		on = append(on, s.Movement+"@"+s.Agent)
	}
	if diff := cmp.Diff([]string{"a@fake-move", "b@fake-move"}, on); diff != "" {
		t.Errorf("movements (-want +got):\n%s", diff)
	}
	if n := len(h.prov.requests()); n != 0 {
		t.Errorf("%d model calls, want none (every movement on the CLI)", n)
	}
}

// TestConfigResumeAgentSession: with Config.ResumeAgentSession the run's
// first movement resumes that CLI session (--resume ID, the fake answers
// "(resumed) …" in it) and the next movement starts its CLI afresh; an
// adapter that cannot resume fails the run with ErrAgentCLI, before the
// CLI runs.
func TestConfigResumeAgentSession(t *testing.T) {
	t.Parallel()
	const stored = "33333333-4444-4555-8666-777777777777"
	p := plainTwoMovements(t)
	t.Run("resumes", func(t *testing.T) {
		t.Parallel()
		h := newAgentHarness(t)
		h.cfg.Agent, h.cfg.ResumeAgentSession = "fake-move", stored
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		out, err := h.engine().Start(ctx, p, "<reply>All is well.</reply>", StartOptions{RunID: "run_agent"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != StatusSucceeded {
			t.Fatalf("outcome %s (%q), want succeeded", out.Status, out.Result)
		}
		trs := all[Transition](h.rec)
		if len(trs) == 0 || trs[0].Summary != "(resumed) All is well." {
			t.Errorf("the first movement did not answer in the resumed session: transitions %+v", trs)
		}
		sessions, err := loadAgentSessions(runPath{base: h.cfg.RunDir})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range sessions {
			got[s.Movement] = s.SessionID
		}
		if diff := cmp.Diff(map[string]string{"a": stored, "b": "22222222-3333-4444-8555-666666666666"}, got); diff != "" {
			t.Errorf("CLI sessions by movement (-want +got):\n%s", diff)
		}
		if argv := h.fakeFile("argv"); strings.Contains(argv, "--resume") {
			t.Errorf("the second movement resumed a session; argv:\n%s", argv)
		}
	})
	t.Run("adapter without resume", func(t *testing.T) {
		t.Parallel()
		h := newAgentHarness(t)
		h.cfg.Agent, h.cfg.ResumeAgentSession = "fake-move", stored
		cli, err := h.cfg.Agents.AgentCLI(t.Context(), "fake-move")
		if err != nil {
			t.Fatal(err)
		}
		cli.Executor.Def.Capabilities.Resume = false // this harness's own definition
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		_, err = h.engine().Start(ctx, p, "<reply>All is well.</reply>", StartOptions{RunID: "run_agent"})
		if !errors.Is(err, ErrAgentCLI) || !strings.Contains(err.Error(), "cannot resume") {
			t.Errorf("run on an adapter without resume: %v, want ErrAgentCLI saying it cannot resume", err)
		}
		if _, err := os.Stat(filepath.Join(h.state, "argv")); !os.IsNotExist(err) {
			t.Errorf("the CLI ran: %v", err)
		}
	})
}

// plainTwoMovements is a piece of two movements written for Maestro's own
// loop: a (its rule "all is well" leads to b), then b (no rule: its
// default_next completes).
func plainTwoMovements(t *testing.T) *piece.Piece {
	t.Helper()
	p, err := piece.Parse("plain.yaml", []byte(`name: plain
description: Two movements of Maestro's own loop.
max_movements: 4
initial_movement: a
movements:
  - name: a
    edit: false
    persona: You check.
    instruction: Check.
    allowed_tools: [Read]
    rules:
      - condition: all is well
        next: b
  - name: b
    edit: false
    persona: You report.
    instruction: Report.
    allowed_tools: [Read]
    rules: []
    default_next: COMPLETE
`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
