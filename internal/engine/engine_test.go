package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/sandbox/sandboxtest"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// testTimeout bounds every run in these tests.
const testTimeout = 60 * time.Second

// recorder is the Sink and EventSink of a test run.
type recorder struct {
	mu      sync.Mutex
	events  []protocol.Message
	records []Record
}

// frameValidator checks frames against the protocol's JSON Schemas; it is
// slow to build, so it is built once.
var frameValidator = sync.OnceValues(protocol.NewValidator)

// Event records m after checking that it encodes to a frame valid under the
// protocol's JSON Schemas (an invalid frame is a bug: the test panics with it).
func (r *recorder) Event(m protocol.Message) {
	line, err := protocol.Marshal(m)
	if err == nil {
		var v *protocol.Validator
		if v, err = frameValidator(); err == nil {
			err = v.ValidateServerFrame(line)
		}
	}
	if err != nil {
		panic(fmt.Sprintf("engine emitted an invalid protocol frame %s: %v", line, err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, m)
}

func (r *recorder) Message(llm.Message) {}

func (r *recorder) RunEvent(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
}

// kinds lists the run events' kinds in order.
func (r *recorder) kinds() []EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []EventKind
	for _, rec := range r.records {
		out = append(out, rec.Event.Kind())
	}
	return out
}

// all returns the events of type T.
func all[T Event](r *recorder) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, rec := range r.records {
		if e, ok := rec.Event.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

// recording wraps a provider and keeps every request it was sent, with the
// frame padding of atFrame removed (so a request shows the movement's own
// conversation).
type recording struct {
	llm.Provider
	mu   sync.Mutex
	reqs []llm.Request
}

func (p *recording) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	r := *req
	for len(r.Messages) > 0 && r.Messages[0].Role == llm.RoleAssistant && len(r.Messages[0].Parts) == 0 {
		r.Messages = r.Messages[1:]
	}
	p.mu.Lock()
	p.reqs = append(p.reqs, r)
	p.mu.Unlock()
	return p.Provider.Stream(ctx, req)
}

func (p *recording) requests() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// text is everything a request shows the model: system prompt and
// message text, tool calls and results.
func text(req llm.Request) string {
	var b strings.Builder
	b.WriteString(req.System)
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			b.WriteString("\n")
			b.WriteString(p.Text)
			if p.ToolResult != nil {
				b.WriteString(p.ToolResult.Content)
			}
		}
	}
	return b.String()
}

func toolNames(req llm.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	return out
}

// harness is one engine over a temporary workspace, playing a scenario.
type harness struct {
	t    *testing.T
	ws   string
	root *workspace.Root
	lib  *Library
	rec  *recorder
	prov *recording
	cfg  Config
}

func loadScenario(t testing.TB, name string) *replay.Scenario {
	t.Helper()
	s, err := replay.Load(filepath.Join("testdata", "scenarios", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testLibrary(t testing.TB) *Library {
	t.Helper()
	lib, err := NewLibraryFS(context.Background(), os.DirFS(filepath.Join("testdata", "pieces")), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// fruitWorkspace is a temporary workspace holding notes.txt (three
// fruit), open for the test.
func fruitWorkspace(t *testing.T) *workspace.Root {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("apples\npears\nplums\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func newHarness(t *testing.T, scenario string, tune ...func(*Config)) *harness {
	t.Helper()
	root := fruitWorkspace(t)
	h := &harness{t: t, ws: root.Dir(), root: root, lib: testLibrary(t), rec: &recorder{}}
	h.prov = &recording{Provider: replay.New(loadScenario(t, scenario))}
	h.cfg = Config{
		Provider: h.prov, Workspace: root, Library: h.lib, Sink: h.rec, Events: WithStatusLines(h.rec, h.rec),
		Sandbox: sandboxtest.Off(t, sandbox.Config{}),
	}
	for _, f := range tune {
		f(&h.cfg)
	}
	return h
}

func (h *harness) engine() *Engine { return mustNew(h.t, h.cfg) }

// mustNew is New(cfg), failing the test on an error.
func mustNew(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (h *harness) piece(name string) *piece.Piece {
	h.t.Helper()
	p, ok := h.lib.Get(name)
	if !ok {
		h.t.Fatalf("no test piece %s", name)
	}
	return p
}

func (h *harness) start(name, task string) (*Outcome, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), testTimeout)
	defer cancel()
	return h.engine().Start(ctx, h.piece(name), task, StartOptions{RunID: "run_test"})
}

// mustStart is start for a run that must not fail to start: the test
// stops on an error.
func (h *harness) mustStart(name, task string) *Outcome {
	h.t.Helper()
	out, err := h.start(name, task)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func TestTransitionChainToSuccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "chain", func(c *Config) { c.MaxLessons = 2 })
	out := h.mustStart("chain", "List the fruit in notes.txt.")
	want := &Outcome{RunID: "run_test", Piece: "chain", Status: StatusSucceeded, Result: "Apples, pears and plums.", Movement: "finish", Movements: 3,
		ModelCalls: 4, ToolCalls: 4, CostKnown: true}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	wantKinds := []EventKind{KindRunStarted,
		KindMovementStarted, KindToolsOmitted, KindLessons, KindTransition,
		KindMovementStarted, KindLessons, KindTransition,
		KindMovementStarted, KindComplete}
	if diff := cmp.Diff(wantKinds, h.rec.kinds()); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}
	// Only implemented tools are offered; the others are reported.
	omitted := all[ToolsOmitted](h.rec)
	wantOmitted := []OmittedTool{{"WebSearch", "web access is not configured"}, {"mcp__docs__*", "MCP tools are not available in this build"}}
	if diff := cmp.Diff(wantOmitted, omitted[0].Tools); diff != "" {
		t.Errorf("omitted tools (-want +got):\n%s", diff)
	}
	reqs := h.prov.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	if diff := cmp.Diff([]string{"Read", "transition", "complete"}, toolNames(reqs[0])); diff != "" {
		t.Errorf("gather's tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"complete"}, toolNames(reqs[3])); diff != "" {
		t.Errorf("finish's tools, a movement without rules (-want +got):\n%s", diff)
	}
	// Each movement starts afresh with the task and the handoff.
	if n := len(reqs[2].Messages); n != 1 {
		t.Errorf("shape's first request has %d messages, want 1 (fresh context)", n)
	}
	for _, want := range []string{"# Task", "List the fruit", "# Handoff from gather", "notes.txt lists apples, pears and plums."} {
		if !strings.Contains(text(reqs[2]), want) {
			t.Errorf("shape's request lacks %q", want)
		}
	}
	// Lessons: deduplicated, capped at 2 (the oldest dropped), and in
	// later movements' system prompts.
	if !strings.Contains(reqs[2].System, "- Fruit names are lowercase.") || strings.Count(reqs[2].System, "lowercase") != 1 {
		t.Errorf("shape's system prompt lacks the deduplicated lesson:\n%s", reqs[2].System)
	}
	lessons := all[Lessons](h.rec)
	if diff := cmp.Diff([]string{"Fruit names are lowercase."}, lessons[0].Added); diff != "" {
		t.Errorf("first lessons (-want +got):\n%s", diff)
	}
	st, err := LoadState(h.ws)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Outlines are numbered.", "Keep answers short."}, st.Lessons); diff != "" {
		t.Errorf("kept lessons (-want +got):\n%s", diff)
	}
	if !strings.Contains(reqs[3].System, "Keep answers short.") || strings.Contains(reqs[3].System, "Fruit names") {
		t.Errorf("finish's system prompt does not hold exactly the kept lessons:\n%s", reqs[3].System)
	}
	if st.Status != StatusSucceeded || st.Result != "Apples, pears and plums." || st.Seq != len(h.rec.kinds()) {
		t.Errorf("persisted state: status %s, result %q, seq %d", st.Status, st.Result, st.Seq)
	}
	// The job layout was created, and every run event was also a status line.
	for _, d := range []string{"input", "output", "logs", "subtasks", "skills"} {
		if fi, err := os.Stat(filepath.Join(h.ws, d)); err != nil || !fi.IsDir() {
			t.Errorf("workspace lacks %s/: %v", d, err)
		}
	}
	var statuses int
	for _, ev := range h.rec.events {
		if _, ok := ev.(protocol.Status); ok {
			statuses++
		}
	}
	if statuses != len(h.rec.kinds()) {
		t.Errorf("%d status lines for %d run events", statuses, len(h.rec.kinds()))
	}
}

func TestCompleteAborted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "aborted")
	out := h.mustStart("chain", "List the fruit.")
	if out.Status != StatusAborted || out.Result != "notes.txt is missing; nothing to gather." || out.Reason != "" {
		t.Errorf("outcome = %+v", out)
	}
	c := all[Complete](h.rec)
	if len(c) != 1 || c[0].Status != StatusAborted || c[0].Movement != "gather" {
		t.Errorf("complete events = %+v", c)
	}
}

func TestAskThenResumeAcrossRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "ask")
	out := h.mustStart("ask", "Paint the fence.")
	if out.Status != StatusWaitingHuman || out.Result != "Which colour should the fence be?" {
		t.Fatalf("outcome = %+v", out)
	}
	st, err := LoadState(h.ws)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusWaitingHuman || st.Question != out.Result || len(st.Conversation) != 5 {
		t.Fatalf("persisted state: status %s, question %q, %d conversation messages", st.Status, st.Question, len(st.Conversation))
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()

	// A new engine (as in a new process) over the same run directory.
	if _, err := h.engine().Resume(ctx, ""); !errors.Is(err, ErrNeedsAnswer) {
		t.Errorf("Resume without an answer: %v, want ErrNeedsAnswer", err)
	}
	out, err = h.engine().Resume(ctx, "blue")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusSucceeded || out.Result != "The fence is painted blue." || out.Movements != 1 || out.ModelCalls != 3 {
		t.Errorf("resumed outcome = %+v", out)
	}
	// The movement continued in its own conversation: the answer is the
	// result of its complete(needs_user_input) call.
	reqs := h.prov.requests()
	last := reqs[len(reqs)-1]
	if len(last.Messages) != 5 {
		t.Fatalf("resumed request has %d messages, want the 5 of the paused conversation", len(last.Messages))
	}
	tr := last.Messages[4].Parts[0].ToolResult
	if tr == nil || tr.Name != "complete" || tr.Content != "The user answered: blue" || tr.IsError {
		t.Errorf("answer as tool result = %+v", tr)
	}
	wantKinds := []EventKind{KindRunStarted, KindMovementStarted, KindWaiting, KindResumed, KindMovementStarted, KindComplete}
	if diff := cmp.Diff(wantKinds, h.rec.kinds()); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}
	if s := all[MovementStarted](h.rec); s[1].Entry != EntryAnswer {
		t.Errorf("second movement_started entry = %s", s[1].Entry)
	}
	if _, err := h.engine().Resume(ctx, "red"); !errors.Is(err, ErrFinished) {
		t.Errorf("Resume of a finished run: %v, want ErrFinished", err)
	}
	// Sequence numbers continue across processes.
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	for i, rec := range h.rec.records {
		if rec.Seq != i+1 || rec.RunID != "run_test" {
			t.Errorf("record %d: seq %d run %s", i, rec.Seq, rec.RunID)
		}
	}
}

func TestRevisitAbort(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "selfloop")
	out := h.mustStart("selfloop", "Make it work.")
	if out.Status != StatusAborted || !strings.Contains(out.Reason, "movement try revisited 3 times in a row (limit 2)") || out.Movements != 3 {
		t.Errorf("outcome = %+v", out)
	}
	var got []Pressure
	for _, p := range all[Pressure](h.rec) {
		got = append(got, p)
	}
	want := []Pressure{
		{Movement: "try", Source: PressureRevisit, Level: LevelWarn, Count: 1, Limit: 2},
		{Movement: "try", Source: PressureRevisit, Level: LevelPrompt, Count: 2, Limit: 2},
		{Movement: "try", Source: PressureRevisit, Level: LevelAbort, Count: 3, Limit: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pressure events (-want +got):\n%s", diff)
	}
	reqs := h.prov.requests()
	if !strings.Contains(reqs[1].System, "Movement try has been entered 2 times in a row (the run is aborted after 2 revisits)") {
		t.Errorf("second visit lacks the warning:\n%s", reqs[1].System)
	}
	if !strings.Contains(reqs[2].System, "entering it once more aborts the run") {
		t.Errorf("third visit lacks the final warning:\n%s", reqs[2].System)
	}
	if strings.Contains(reqs[0].System, "## Warning") {
		t.Error("the first visit carries a warning")
	}
}

func TestCycleAbort(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pingpong")
	out := h.mustStart("pingpong", "Make a thing that passes the check.")
	if out.Status != StatusAborted || !strings.Contains(out.Reason, "movements make and check alternated 3 times (limit 2)") {
		t.Errorf("outcome = %+v", out)
	}
	want := []Pressure{
		{Movement: "make", Source: PressureCycle, Level: LevelWarn, Count: 1, Limit: 2, With: "check"},
		{Movement: "check", Source: PressureCycle, Level: LevelWarn, Count: 1, Limit: 2, With: "make"},
		{Movement: "make", Source: PressureCycle, Level: LevelPrompt, Count: 2, Limit: 2, With: "check"},
		{Movement: "check", Source: PressureCycle, Level: LevelPrompt, Count: 2, Limit: 2, With: "make"},
		{Movement: "make", Source: PressureCycle, Level: LevelAbort, Count: 3, Limit: 2, With: "check"},
	}
	if diff := cmp.Diff(want, all[Pressure](h.rec)); diff != "" {
		t.Errorf("pressure events (-want +got):\n%s", diff)
	}
	if reqs := h.prov.requests(); !strings.Contains(reqs[2].System, "Movements make and check have alternated 1 times") {
		t.Errorf("make's second visit lacks the cycle warning:\n%s", reqs[2].System)
	}
}

func TestMaxMovements(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "capped")
	out := h.mustStart("capped", "Go back and forth.")
	if out.Status != StatusAborted || out.Movements != 3 || !strings.Contains(out.Reason, "max_movements reached: 3 movements ran and the piece allows 3") {
		t.Errorf("outcome = %+v", out)
	}
	if n := len(h.prov.requests()); n != 3 {
		t.Errorf("%d model calls, want 3", n)
	}
}

func TestContextPressure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pressure", func(c *Config) { c.ContextWindow = 10_000 })
	out := h.mustStart("pressure", "What do the notes list?")
	if out.Status != StatusSucceeded || out.Movement != "report" || out.Usage.InputTokens != 7000+8400+9400+900 {
		t.Errorf("outcome = %+v", out)
	}
	want := []Pressure{
		{Movement: "dig", Source: PressureContext, Level: LevelWarn, Percent: 72, Tokens: 7200, Window: 10_000},
		{Movement: "dig", Source: PressureContext, Level: LevelPrompt, Percent: 86, Tokens: 8600, Window: 10_000},
		{Movement: "dig", Source: PressureContext, Level: LevelForce, Percent: 96, Tokens: 9600, Window: 10_000},
	}
	if diff := cmp.Diff(want, all[Pressure](h.rec)); diff != "" {
		t.Errorf("pressure events (-want +got):\n%s", diff)
	}
	tr := all[Transition](h.rec)
	if len(tr) != 1 || tr[0].From != "dig" || tr[0].To != "report" || !tr[0].Forced || tr[0].Reason != reasonContext {
		t.Fatalf("transitions = %+v", tr)
	}
	reqs := h.prov.requests()
	// 70 %: a note rides on the next tool result; 85 %: the model is asked
	// to summarise and transition.
	if !strings.Contains(text(reqs[1]), "The context window is 72% full (7200 of 10000 tokens). Work economically") {
		t.Errorf("second request lacks the 70%% note:\n%s", text(reqs[1]))
	}
	if !strings.Contains(text(reqs[2]), "The context window is 86% full") || !strings.Contains(text(reqs[2]), "call transition now with a complete summary") {
		t.Errorf("third request lacks the 85%% note:\n%s", text(reqs[2]))
	}
	// 95 %: the pending Read was not run, and report got the summary.
	if got := reqs[3].Messages; len(got) != 1 {
		t.Errorf("report starts with %d messages, want a fresh context", len(got))
	}
	for _, want := range []string{"# Handoff from dig", "Maestro ended movement dig before it called transition: the context window is full.",
		"So far: the notes list apples, pears and plums.", "Read ×2, Glob ×1"} {
		if !strings.Contains(text(reqs[3]), want) {
			t.Errorf("report's request lacks %q:\n%s", want, text(reqs[3]))
		}
	}
	var refused bool
	for _, ev := range h.rec.events {
		if e, ok := ev.(protocol.ToolEnd); ok && !e.Success {
			refused = true
		}
	}
	if !refused {
		t.Error("the Read of the forced batch was not refused")
	}
}

// barrier is a provider for subtasks: every call waits until n calls are
// in flight at once, so a test only passes when n subtasks run in
// parallel. A bounded context stops it otherwise.
type barrier struct {
	llm.Provider
	n       int
	mu      sync.Mutex
	arrived int
	release chan struct{}
}

func (b *barrier) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		b.mu.Lock()
		b.arrived++
		if b.arrived == b.n {
			close(b.release)
		}
		b.mu.Unlock()
		select {
		case <-b.release:
		case <-ctx.Done():
			yield(llm.Event{}, &llm.Error{Kind: llm.KindCancelled, Message: "barrier: not every subtask ran at once"})
			return
		}
		for ev, err := range b.Provider.Stream(ctx, req) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

func TestSubtasksInParallel(t *testing.T) {
	t.Parallel()
	leaf := &barrier{Provider: replay.New(loadScenario(t, "leaf")), n: 3, release: make(chan struct{})}
	var mu sync.Mutex
	var asked []string
	h := newHarness(t, "fanout", func(c *Config) {
		c.SubtaskProvider = func(s SubtaskRecord) (llm.Provider, error) {
			mu.Lock()
			asked = append(asked, s.Name)
			mu.Unlock()
			return leaf, nil
		}
	})
	out := h.mustStart("fanout", "Count the letters.")
	if out.Status != StatusSucceeded || out.Result != "All three parts are counted." {
		t.Fatalf("outcome = %+v", out)
	}
	slices.Sort(asked)
	if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, asked); diff != "" {
		t.Errorf("subtasks (-want +got):\n%s", diff)
	}
	for i, name := range []string{"01-alpha", "02-beta", "03-gamma"} {
		data, err := os.ReadFile(filepath.Join(h.ws, "subtasks", name+".md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"- Status: succeeded", "part done", "- Piece: leaf"} {
			if !strings.Contains(string(data), want) {
				t.Errorf("subtask %d's file lacks %q:\n%s", i+1, want, data)
			}
		}
		// Each subtask keeps its own state and transcript.
		if st, err := LoadState(filepath.Join(h.ws, "subtasks", name)); err != nil || st.Status != StatusSucceeded || st.Depth != 1 {
			t.Errorf("subtask %s state: %+v, %v", name, st, err)
		}
	}
	reqs := h.prov.requests()
	// The split movement resumed after WAIT_SUBTASKS with every result.
	resumed := text(reqs[2])
	for _, want := range []string{"# Subtask results", "Subtask 1: alpha (piece leaf): succeeded", "Subtask 3: gamma", "part done",
		"(Full report: subtasks/02-beta.md)", "# Your summary before waiting for the subtasks", "Spawned alpha, beta and gamma."} {
		if !strings.Contains(resumed, want) {
			t.Errorf("resumed split lacks %q:\n%s", want, resumed)
		}
	}
	if strings.Contains(text(reqs[3]), "# Subtask results") {
		t.Error("the results were delivered twice")
	}
	if n := len(all[SubtaskFinished](h.rec)); n != 3 {
		t.Errorf("%d subtask_finished events", n)
	}
	w := all[Waiting](h.rec)
	if len(w) != 1 || w[0].For != "subtasks" {
		t.Errorf("waiting events = %+v", w)
	}
	ms := all[MovementStarted](h.rec)
	if len(ms) != 3 || ms[1].Movement != "split" || ms[1].Entry != EntrySubtasks || ms[1].Revisits != 0 {
		t.Errorf("movements = %+v", ms)
	}
	// A subtask cannot spawn subtasks. Its log is an ordinary session
	// log, linked from the parent's state and subtask_finished event.
	parent, err := LoadState(h.ws)
	if err != nil {
		t.Fatal(err)
	}
	log := parent.Subtasks[0].Log
	if parent.Subtasks[0].Name != "alpha" || parent.Subtasks[0].Session == "" || log != "subtasks/01-alpha/logs/"+parent.Subtasks[0].Session+"/events.jsonl" {
		t.Errorf("subtask 1's log link: %+v", parent.Subtasks[0])
	}
	for _, f := range all[SubtaskFinished](h.rec) {
		if f.ID == 1 && (f.Log != log || f.Session != parent.Subtasks[0].Session) {
			t.Errorf("subtask_finished links %q %q, the state %q", f.Session, f.Log, log)
		}
	}
	data, err := os.ReadFile(filepath.Join(h.ws, filepath.FromSlash(log)))
	if err != nil || !strings.Contains(string(data), `"reason":"a subtask cannot spawn subtasks"`) {
		t.Errorf("subtask log lacks the omitted SpawnSubTask: %v\n%s", err, data)
	}
}

func TestWaitWithoutSubtasksIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "fanout")
	r := h.engine().newRun(h.piece("fanout"), &State{})
	ctl := &movementCtl{}
	m, _ := h.piece("fanout").Movement("split")
	res, err := newTransition(m, ctl, r.subs.canWait).Run(t.Context(), toolCall(`{"next":"WAIT_SUBTASKS","summary":"wait"}`))
	if err != nil || !res.IsError || !strings.Contains(res.Content, "no subtask is running") || ctl.decision() != nil {
		t.Errorf("result = %+v, %v; decision %v", res, err, ctl.decision())
	}
}

func TestVerifyFeedbackReachesExecute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "feedback")
	out := h.mustStart("feedback", "Write out.txt with the word final.")
	if out.Status != StatusSucceeded {
		t.Fatalf("outcome = %+v", out)
	}
	reqs := h.prov.requests()
	const finding = "1. out.txt:1 says draft; expected the word final."
	if strings.Contains(text(reqs[0]), finding) {
		t.Error("the first execute already has the finding")
	}
	first := text(llm.Request{System: reqs[4].System, Messages: reqs[4].Messages[:1]})
	for _, want := range []string{"# Feedback from verify", "verify sent the work back to this movement", finding} {
		if !strings.Contains(first, want) {
			t.Errorf("execute's first request after verify lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "# Latest feedback") {
		t.Error("the feedback is shown twice")
	}
	if data, _ := os.ReadFile(filepath.Join(h.ws, "out.txt")); string(data) != "final\n" {
		t.Errorf("out.txt = %q", data)
	}
}

// A movement entered twice says once which of its tools this build lacks
// (issue 15 item 7).
func TestToolsOmittedSaidOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "feedback")
	if out, err := h.start("feedback", "Write out.txt with the word final."); err != nil || out.Status != StatusSucceeded {
		t.Fatalf("outcome = %+v, %v", out, err)
	}
	entries := 0
	for _, ms := range all[MovementStarted](h.rec) {
		if ms.Movement == "execute" {
			entries++
		}
	}
	want := []ToolsOmitted{{Movement: "execute", Tools: []OmittedTool{{"WebFetch", "web access is not configured"}}}}
	if diff := cmp.Diff(want, all[ToolsOmitted](h.rec)); entries != 2 || diff != "" {
		t.Errorf("execute entered %d times (want 2); tools_omitted events (-want +got):\n%s", entries, diff)
	}
}

func TestEditFalseIsNotOfferedWriteOrEdit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "readonly")
	out, err := h.start("readonly", "Write out.txt.")
	if err != nil || out.Status != StatusSucceeded {
		t.Fatalf("outcome = %+v, %v", out, err)
	}
	reqs := h.prov.requests()
	if diff := cmp.Diff([]string{"Read", "Glob", "Bash", "transition", "complete"}, toolNames(reqs[0])); diff != "" {
		t.Errorf("look's tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Read", "Write", "Edit", "complete"}, toolNames(reqs[2])); diff != "" {
		t.Errorf("write's tools (-want +got):\n%s", diff)
	}
	if tr := reqs[1].Messages[2].Parts[0].ToolResult; tr == nil || !tr.IsError || !strings.Contains(tr.Content, `unknown tool "Write"`) {
		t.Errorf("look's Write call = %+v", tr)
	}
	if data, _ := os.ReadFile(filepath.Join(h.ws, "out.txt")); string(data) != "written\n" {
		t.Errorf("out.txt = %q", data)
	}
}

func TestAllowedCommandsEnforced(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "cmds")
	out, err := h.start("cmds", "List the files.")
	if err != nil || out.Status != StatusSucceeded {
		t.Fatalf("outcome = %+v, %v", out, err)
	}
	reqs := h.prov.requests()
	if !strings.Contains(reqs[0].Tools[0].Description, "Allowed commands: ls.") {
		t.Errorf("Bash description: %s", reqs[0].Tools[0].Description)
	}
	results := map[string]*llm.ToolResult{}
	for _, p := range reqs[1].Messages[2].Parts {
		results[p.ToolResult.CallID] = p.ToolResult
	}
	if r := results["call_ls"]; r == nil || r.IsError || !strings.Contains(r.Content, "notes.txt") {
		t.Errorf("ls = %+v", r)
	}
	if r := results["call_cat"]; r == nil || !r.IsError || !strings.Contains(r.Content, "command rejected by the sandbox policy") || !strings.Contains(r.Content, "cat") {
		t.Errorf("cat = %+v", r)
	}
}

func TestRemindersThenDefaultNext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "talk")
	out := h.mustStart("talk", "Say hello.")
	if out.Status != StatusSucceeded || out.Result != "Hello, and goodbye." || out.Reason != reasonReminders {
		t.Errorf("outcome = %+v", out)
	}
	rem := all[Reminder](h.rec)
	if diff := cmp.Diff([]Reminder{{"reply", 1, 2}, {"reply", 2, 2}}, rem); diff != "" {
		t.Errorf("reminders (-want +got):\n%s", diff)
	}
	reqs := h.prov.requests()
	if !strings.Contains(text(reqs[1]), "Reminder 1 of 2: movement reply ends only through a tool call") {
		t.Errorf("second request lacks the reminder:\n%s", text(reqs[1]))
	}
	if !strings.Contains(text(reqs[2]), "If you reply without a tool call again, Maestro ends the movement and the run completes with your last reply as its result.") {
		t.Errorf("last reminder does not say what happens next:\n%s", text(reqs[2]))
	}
}

// A movement with text_answer: result whose model answers in text after
// the reminders ends the run with that answer as its result, recorded as
// such in the run's complete event; the tool call made before counts
// (issue 15 item 1). Without text_answer, default_next (ABORT) applies.
func TestTextAnswerAfterReminders(t *testing.T) {
	t.Parallel()
	const answer = "notes.txt lists three fruit: apples, pears and plums."
	for _, tc := range []struct {
		piece  string
		status RunStatus
		reason string
		result string
	}{
		{"answer", StatusSucceeded, reasonTextAnswer, answer},
		{"answer-strict", StatusAborted, reasonReminders, "The run was stopped in movement look: " + reasonReminders + "."},
	} {
		t.Run(tc.piece, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "answer")
			out := h.mustStart(tc.piece, "How many fruit are in notes.txt?")
			if out.Status != tc.status || out.Result != tc.result || out.Reason != tc.reason {
				t.Errorf("outcome = %+v, want status %s, result %q, reason %q", out, tc.status, tc.result, tc.reason)
			}
			if out.ToolCalls != 1 || out.ModelCalls != 4 {
				t.Errorf("tool calls %d, model calls %d; want the Read call and 4 model calls to count", out.ToolCalls, out.ModelCalls)
			}
			done := all[Complete](h.rec)
			if len(done) != 1 || done[0].Reason != tc.reason || done[0].Result != tc.result {
				t.Errorf("complete events = %+v, want one with reason %q", done, tc.reason)
			}
			if got := len(all[Reminder](h.rec)); got != 2 {
				t.Errorf("%d reminders, want 2", got)
			}
		})
	}
}

func TestAgentMovementFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "aborted")
	out, err := h.start("external", "Delegate it.")
	if !errors.Is(err, ErrAgentCLI) || out.Status != StatusFailed || !strings.Contains(out.Result, `names the agent CLI "claude-code"`) {
		t.Errorf("outcome = %+v, err = %v", out, err)
	}
	if n := len(h.prov.requests()); n != 0 {
		t.Errorf("%d model calls", n)
	}
}

func TestStartRejectsExistingRunAndInvalidPiece(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "aborted")
	if _, err := h.start("chain", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.start("chain", "x"); !errors.Is(err, ErrRunExists) {
		t.Errorf("second Start: %v, want ErrRunExists", err)
	}
	bad := *h.piece("chain")
	bad.InitialMovement = "nowhere"
	_, err := newHarness(t, "aborted").engine().Start(t.Context(), &bad, "x", StartOptions{})
	var perr *piece.Errors
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), "initial_movement") {
		t.Errorf("invalid piece: %v", err)
	}
}

func toolCall(input string) tool.Call {
	return tool.Call{ID: "call_1", Input: json.RawMessage(input)}
}

// cancelOnFrame cancels a context when the run's n-th model call starts.
type cancelOnFrame struct {
	recorder
	n      int
	seen   int
	cancel context.CancelFunc
}

func (c *cancelOnFrame) Event(m protocol.Message) {
	c.recorder.Event(m)
	if _, ok := m.(protocol.ResponseStart); ok {
		c.mu.Lock()
		c.seen++
		hit := c.seen == c.n
		c.mu.Unlock()
		if hit {
			c.cancel()
		}
	}
}

func TestInterruptedRunRestartsItsMovement(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sink := &cancelOnFrame{n: 3, cancel: cancel}
	h := newHarness(t, "chain", func(c *Config) { c.Sink = sink })
	out, err := h.engine().Start(ctx, h.piece("chain"), "List the fruit.", StartOptions{})
	if !errors.Is(err, agent.ErrCancelled) || out.Status != StatusRunning || out.Reason != "interrupted" || out.Movement != "shape" {
		t.Fatalf("interrupted: %+v, %v", out, err)
	}
	// shape's call was cut short; a resume restarts shape from its start,
	// with the handoff, and plays its frame again.
	resumeChain(t, h, 3, "restarted shape", "# Handoff from gather", "# Restart", "interrupted")
}
