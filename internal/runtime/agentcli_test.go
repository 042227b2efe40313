package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// The agent CLI tests use the fake CLIs of internal/agentcli/testdata:
// user-adapter/fake-agent (a user-defined adapter speaking Claude's
// stream-json) and relay-fake/fake-claude-relay (Claude Code's permission
// relay, replaying a captured exchange). No real CLI runs here.

const fakeSession = "11111111-2222-4333-8444-555555555555"

func testdataPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "agentcli", "testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// loadDef returns an agent definition: the built-ins plus the user
// adapter in testdata, loaded as ~/.maestro/agents is.
func loadDef(t *testing.T, id string) *agentcli.Definition {
	t.Helper()
	reg, err := agentcli.Load(testdataPath(t, "user-adapter"))
	if err != nil {
		t.Fatal(err)
	}
	def, ok := reg.Get(id)
	if !ok {
		t.Fatalf("no agent definition %q (have %v)", id, reg.IDs())
	}
	return def
}

// wrapped returns a wrapper (testdata/start-logger, through a symlink)
// that logs "<pid> <argv>" per start to the returned log and execs bin (so
// the logged pid leads the CLI's process group).
func wrapped(t *testing.T, bin string) (wrapper, log string) {
	t.Helper()
	dir := t.TempDir()
	wrapper = filepath.Join(dir, "cli")
	if err := os.Symlink(testdataPath(t, "start-logger"), wrapper); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "target")); err != nil {
		t.Fatal(err)
	}
	return wrapper, filepath.Join(dir, "starts.log")
}

// cliHarness starts a runtime whose prompts run on the agent CLI def
// (binary bin) and a connection that negotiated approvals and raw events.
func cliHarness(t *testing.T, def *agentcli.Definition, bin string, mode protocol.ApprovalMode, env ...string) (*harness, *AgentCLI) {
	t.Helper()
	cfg, a := cliConfig(t, def, bin, mode, env...)
	h := newHarness(t, cfg, ConnectOptions{ID: LocalConnectionID, Local: true, Capabilities: &protocol.Capabilities{
		ServerRequests: []protocol.RequestType{protocol.RequestApproval}, RawAgentEvents: ptr(true)}})
	return h, a
}

// cliConfig is the configuration of a runtime whose prompts run on the
// CLI def at bin.
func cliConfig(t *testing.T, def *agentcli.Definition, bin string, mode protocol.ApprovalMode, env ...string) (Config, *AgentCLI) {
	a := &AgentCLI{
		Executor: &agentcli.Executor{Def: def, Path: bin, MaxAttempts: 1, Env: append(os.Environ(), env...)},
		Dir:      t.TempDir(),
	}
	return Config{
		ProviderName: a.ProviderName(),
		Model:        a.ModelName(),
		Tools:        func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil },
		Turn:         a.Turn,
		ApprovalMode: mode,
		Executor:     protocol.ExecutorLive,
	}, a
}

// settle waits until the collector has every frame published so far.
func (h *harness) settle() {
	h.t.Helper()
	cursor := h.rt.Snapshot().Cursor
	h.waitFor("every published frame", func(fs []protocol.Message) bool { return int64(len(fs)) >= cursor })
}

// idleWithin waits until the run is over, within d (else it fails naming
// what did not end and the frames so far), then settles.
func (h *harness) idleWithin(d time.Duration, what string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := h.rt.WaitIdle(ctx); err != nil {
		h.t.Fatalf("%s did not end within %v: %v; frames: %v", what, d, err, h.types())
	}
	h.settle()
}

// turn sends a prompt and waits (bounded) until the run is over; it
// returns the frame types the prompt produced.
func (h *harness) turn(p protocol.Prompt) []string {
	h.t.Helper()
	before := len(h.all())
	if err := h.handle(p); err != nil {
		h.t.Fatalf("prompt: %v", err)
	}
	h.idleWithin(20*time.Second, "the turn")
	var types []string
	for _, m := range h.all()[before:] {
		if m.MessageType() != protocol.TypeRawAgentEvent {
			types = append(types, m.MessageType())
		}
	}
	return types
}

func readStarts(t *testing.T, log string) [][]string {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for l := range strings.Lines(string(data)) {
		out = append(out, strings.Fields(l))
	}
	return out
}

func TestAgentCLITurnsAndResume(t *testing.T) {
	t.Parallel()
	bin, log := wrapped(t, testdataPath(t, "user-adapter/fake-agent"))
	h, a := cliHarness(t, loadDef(t, "fake-agent"), bin, protocol.ApprovalPrompt)
	h.waitType(protocol.TypeSessionInfo, 1)
	if r := ofType[protocol.Ready](h); len(r) != 1 || r[0].Provider != "fake-agent" || r[0].Model != "default" {
		t.Errorf("ready = %+v", r)
	}

	got := h.turn(protocol.Prompt{Content: "hello"})
	// Issue 16: the CLI's session id also comes as session_info's
	// agent_session_id, where an embedder finds it.
	want := []string{"status", "session_info", "response_start", "response_chunk", "response_end"}
	if !slices.Equal(got, want) {
		t.Errorf("first turn frames = %v, want %v", got, want)
	}
	if si := ofType[protocol.SessionInfo](h); len(si) != 2 || si[1].AgentSessionID != fakeSession || !reflect.DeepEqual(si[1].SessionID, si[0].SessionID) {
		t.Errorf("session_info = %+v, want the startup one, then one with agent_session_id %s", si, fakeSession)
	}
	if st := ofType[protocol.Status](h); len(st) == 0 || st[len(st)-1].Message != "Fake Agent session "+fakeSession {
		t.Errorf("statuses = %+v, want the CLI session announced", st)
	}
	ends := ofType[protocol.ResponseEnd](h)
	if len(ends) != 1 || ends[0].Usage.Provider != "fake-agent" || ends[0].Usage.InputTokens != 3 || ends[0].Usage.TotalCostUSD != 0.001 {
		t.Errorf("response_end = %+v", ends)
	}
	if s := h.rt.Snapshot().State; s.IsResponding {
		t.Errorf("after the turn: still responding")
	}
	if a.Session() != fakeSession {
		t.Errorf("session to resume = %q, want %q", a.Session(), fakeSession)
	}

	// The second prompt resumes the CLI session (no second announcement).
	got = h.turn(protocol.Prompt{Content: "again"})
	if want := []string{"response_start", "response_chunk", "response_end"}; !slices.Equal(got, want) {
		t.Errorf("second turn frames = %v, want %v", got, want)
	}
	chunks := ofType[protocol.ResponseChunk](h)
	if len(chunks) != 2 || chunks[1].Content != "fake says: again" {
		t.Errorf("chunks = %+v", chunks)
	}
	starts := readStarts(t, log)
	if len(starts) != 2 {
		t.Fatalf("CLI starts = %q, want 2", starts)
	}
	if slices.Contains(starts[0], "--resume") {
		t.Errorf("first start resumed: %q", starts[0])
	}
	if i := slices.Index(starts[1], "--resume"); i < 0 || i+1 >= len(starts[1]) || starts[1][i+1] != fakeSession {
		t.Errorf("second start = %q, want --resume %s", starts[1], fakeSession)
	}
}

func TestAgentCLIErrorCategory(t *testing.T) {
	t.Parallel()
	h, _ := cliHarness(t, loadDef(t, "fake-agent"), testdataPath(t, "user-adapter/fake-agent"), protocol.ApprovalPrompt)
	got := h.turn(protocol.Prompt{Content: "fail-auth"})
	errs := ofType[protocol.Error](h)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Message, "auth_expired: ") || errs[0].ErrorType != protocol.ErrorFatal || errs[0].Fatal {
		t.Errorf("frames %v, errors %+v: want one non-fatal auth_expired error", got, errs)
	}
}

func TestAgentCLIStartFailure(t *testing.T) {
	t.Parallel()
	h, _ := cliHarness(t, loadDef(t, "fake-agent"), filepath.Join(t.TempDir(), "missing-cli"), protocol.ApprovalPrompt)
	h.turn(protocol.Prompt{Content: "hello"})
	errs := ofType[protocol.Error](h)
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "agent CLI fake-agent: start fake-agent") {
		t.Errorf("errors = %+v", errs)
	}
}

// interruptWithin interrupts and checks the run is over within 2 s, with
// the own loop's cancelled error.
func (h *harness) interruptWithin() {
	h.t.Helper()
	at := time.Now()
	if err := h.handle(protocol.Interrupt{}); err != nil {
		h.t.Fatal(err)
	}
	h.idleWithin(5*time.Second, "the interrupted run")
	if d := time.Since(at); d > 2*time.Second {
		h.t.Errorf("the run ended %v after the interrupt, want < 2s", d)
	}
	errs := ofType[protocol.Error](h)
	if len(errs) == 0 || errs[len(errs)-1].ErrorType != protocol.ErrorCancelled {
		h.t.Errorf("errors = %+v, want a cancelled error last", errs)
	}
}

func TestAgentCLIInterruptKillsProcessGroup(t *testing.T) {
	t.Parallel()
	bin, log := wrapped(t, testdataPath(t, "user-adapter/fake-agent"))
	h, _ := cliHarness(t, loadDef(t, "fake-agent"), bin, protocol.ApprovalPrompt)
	if err := h.handle(protocol.Prompt{Content: "hang"}); err != nil {
		t.Fatal(err)
	}
	// fake-agent reports the child it left in its process group.
	var child int
	h.waitFor("the CLI's child", func(fs []protocol.Message) bool {
		for _, f := range fs {
			if ev, ok := f.(protocol.RawAgentEvent); ok && ev.EventType == "fake-agent" {
				var c struct {
					Subtype string `json:"subtype"`
					PID     int    `json:"pid"`
				}
				if json.Unmarshal(ev.Event, &c) == nil && c.Subtype == "child" {
					child = c.PID
					return true
				}
			}
		}
		return false
	})
	h.interruptWithin()
	leader, err := strconv.Atoi(readStarts(t, log)[0][0])
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{leader, child} {
		if proctest.Alive(pid, 500*time.Millisecond) {
			t.Errorf("process %d of the CLI's group survived the interrupt", pid)
		}
	}
}

// TestAgentCLIInterruptAfterFailedResult: a CLI that reported a failed
// result and then did not exit, interrupted: the turn ends cancelled. The
// failed result was taken for an answer that arrived before the exit, and
// the turn ended as a success (maestro run exited 0).
func TestAgentCLIInterruptAfterFailedResult(t *testing.T) {
	t.Parallel()
	h, _ := cliHarness(t, loadDef(t, "fake-agent"), testdataPath(t, "user-adapter/fake-agent"), protocol.ApprovalPrompt)
	if err := h.handle(protocol.Prompt{Content: "error-then-hang"}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the failed result", func(fs []protocol.Message) bool {
		for _, f := range fs {
			if _, ok := f.(protocol.Error); ok {
				return true
			}
		}
		return false
	})
	h.interruptWithin() // and the cancelled error last
}

// relayHarness runs the fake Claude Code relay; log is its log file.
func relayHarness(t *testing.T, mode protocol.ApprovalMode) (*harness, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "fake.log")
	h, _ := cliHarness(t, loadDef(t, "claude-code"), testdataPath(t, "relay-fake/fake-claude-relay"), mode, "FAKE_LOG="+log)
	return h, log
}

func TestAgentCLIApprovalRelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		mode        protocol.ApprovalMode
		answer      *bool // nil: no server request expected
		wantSuccess bool
		wantAnswer  string
	}{
		{name: "approved", mode: protocol.ApprovalPrompt, answer: ptr(true), wantSuccess: true, wantAnswer: `"behavior":"allow"`},
		{name: "denied", mode: protocol.ApprovalPrompt, answer: ptr(false), wantAnswer: `"behavior":"deny","message":"Denied by user"`},
		{name: "auto", mode: protocol.ApprovalAuto, wantSuccess: true, wantAnswer: `"behavior":"allow"`},
		{name: "fail", mode: protocol.ApprovalFail, wantAnswer: `"behavior":"deny","message":"Denied by approval policy"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, log := relayHarness(t, tt.mode)
			if err := h.handle(protocol.Prompt{Content: "create the file"}); err != nil {
				t.Fatal(err)
			}
			if tt.answer != nil {
				h.waitType(protocol.TypeServerRequest, 1)
				req := ofType[protocol.ServerRequest](h)[0]
				if req.RequestType != protocol.RequestApproval || req.RequestID != "toolu_perm1" || req.CallID != "toolu_perm1" ||
					req.Tool != "Bash" || !strings.Contains(string(req.Args), `"command":"touch maestro-relay-ok.txt"`) ||
					!strings.HasPrefix(req.Reason, "Create a file") || req.SummaryLabel != "Run touch maestro-relay-ok.txt" {
					t.Errorf("server_request = %+v", req)
				}
				calls := ofType[protocol.ToolCall](h)
				if len(calls) != 1 || calls[0].CallID != req.CallID {
					t.Errorf("tool_call before the request = %+v", calls)
				}
				if err := h.handle(protocol.ServerRequestResponse{RequestID: req.RequestID, RequestType: protocol.RequestApproval, Approved: tt.answer}); err != nil {
					t.Fatal(err)
				}
			}
			h.idleWithin(20*time.Second, "the turn")
			ends := ofType[protocol.ToolEnd](h)
			wantApprovalID := ""
			if tt.answer != nil {
				wantApprovalID = "toolu_perm1"
			}
			if len(ends) != 1 || ends[0].Success != tt.wantSuccess || ends[0].ApprovalRequestID != wantApprovalID {
				t.Errorf("tool_end = %+v, want success %v, approval_request_id %q", ends, tt.wantSuccess, wantApprovalID)
			}
			if n := len(ofType[protocol.ServerRequest](h)); (n == 1) != (tt.answer != nil) {
				t.Errorf("%d server requests", n)
			}
			if res := ofType[protocol.ServerRequestResolved](h); tt.answer != nil &&
				(len(res) != 1 || res[0].ResolvedBy != protocol.ResolvedByUser || (res[0].Resolution == protocol.ResolutionApproved) != *tt.answer) {
				t.Errorf("server_request_resolved = %+v", res)
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tt.wantAnswer) {
				t.Errorf("the CLI got:\n%s\nwant an answer with %s", data, tt.wantAnswer)
			}
		})
	}
}

func TestAgentCLIApprovalTimeoutDenies(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "fake.log")
	a := &AgentCLI{Executor: &agentcli.Executor{Def: loadDef(t, "claude-code"), Path: testdataPath(t, "relay-fake/fake-claude-relay"),
		MaxAttempts: 1, Env: append(os.Environ(), "FAKE_LOG="+log)}, Dir: t.TempDir()}
	h := newHarness(t, Config{ProviderName: a.ProviderName(), Model: a.ModelName(), Tools: func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil },
		Turn: a.Turn, Timeouts: Timeouts{Approval: time.Millisecond}}, ConnectOptions{})
	h.turn(protocol.Prompt{Content: "create the file"})
	res := ofType[protocol.ServerRequestResolved](h)
	if len(res) != 1 || res[0].Resolution != protocol.ResolutionDenied || res[0].ResolvedBy != protocol.ResolvedByPolicy {
		t.Errorf("server_request_resolved = %+v", res)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"behavior":"deny","message":"Approval request timed out"`) {
		t.Errorf("the CLI got:\n%s", data)
	}
}

func TestAgentCLIInterruptCancelsApproval(t *testing.T) {
	t.Parallel()
	h, log := relayHarness(t, protocol.ApprovalPrompt)
	if err := h.handle(protocol.Prompt{Content: "create the file"}); err != nil {
		t.Fatal(err)
	}
	h.waitType(protocol.TypeServerRequest, 1)
	h.interruptWithin()
	res := ofType[protocol.ServerRequestResolved](h)
	if len(res) != 1 || res[0].Resolution != protocol.ResolutionCancelled || res[0].ResolvedBy != protocol.ResolvedByRuntime ||
		res[0].Reason != "Interrupted before request completed" {
		t.Errorf("server_request_resolved = %+v", res)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(data)) {
		if k, v, _ := strings.Cut(strings.TrimSpace(l), ": "); k == "pid" || k == "child" {
			pid, _ := strconv.Atoi(v)
			if proctest.Alive(pid, 500*time.Millisecond) {
				t.Errorf("process %d of the CLI's group survived the interrupt", pid)
			}
		}
		if strings.Contains(l, "control_response") {
			t.Errorf("a cancelled request was answered: %s", l)
		}
	}
}

// A Maestro session resumed after a restart: the first prompt resumes the
// stored CLI session; when the CLI no longer has it, a fresh one starts
// seeded with the logged conversation, and its id goes to OnSession.
func TestAgentCLIResumeStoredSession(t *testing.T) {
	t.Parallel()
	const gone = "22222222-2222-4333-8444-555555555555" // fake-agent knows only 1111…
	for _, tc := range []struct {
		name, stored string
		wantIDs      []string
		wantReseed   bool
	}{
		{"kept", fakeSession, nil, false},
		{"gone", gone, []string{fakeSession}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin, log := wrapped(t, testdataPath(t, "user-adapter/fake-agent"))
			h, a := cliHarness(t, loadDef(t, "fake-agent"), bin, protocol.ApprovalPrompt)
			var ids []string
			a.SessionID = tc.stored
			a.History = []llm.Message{
				llm.UserText("what is the colour"),
				{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("it is teal")}},
			}
			a.OnSession = func(id string) { ids = append(ids, id) }
			h.turn(protocol.Prompt{Content: "and now"})

			starts := readStarts(t, log)
			if i := slices.Index(starts[0], "--resume"); i < 0 || i+1 >= len(starts[0]) || starts[0][i+1] != tc.stored {
				t.Errorf("first start = %q, want --resume %s", starts[0], tc.stored)
			}
			chunks := ofType[protocol.ResponseChunk](h)
			if len(chunks) != 1 {
				t.Fatalf("chunks = %+v, want 1", chunks)
			}
			seeded := strings.Contains(chunks[0].Content, "User: what is the colour") &&
				strings.Contains(chunks[0].Content, "Assistant: it is teal") && strings.HasSuffix(chunks[0].Content, "and now")
			if seeded != tc.wantReseed || (!tc.wantReseed && chunks[0].Content != "fake says: and now") {
				t.Errorf("the CLI got %q; want the logged conversation in it: %v", chunks[0].Content, tc.wantReseed)
			}
			if !slices.Equal(ids, tc.wantIDs) {
				t.Errorf("OnSession got %q, want %q", ids, tc.wantIDs)
			}
			if a.Session() != fakeSession {
				t.Errorf("session to resume = %q, want %q", a.Session(), fakeSession)
			}
		})
	}
}

// A CLI session id given as is (maestro run --agent X --resume ID, no
// Maestro conversation to seed a fresh one) that the CLI does not know
// fails the turn; it was kept as the session's CLI session, so that
// --resume of the Maestro session said the CLI session "no longer exists"
// of one that never did. The id is dropped (OnSession gets ""), and the
// next prompt starts a new CLI session.
func TestAgentCLIResumeUnknownID(t *testing.T) {
	t.Parallel()
	const unknown = "22222222-2222-4333-8444-555555555555" // fake-agent knows only 1111…
	bin, log := wrapped(t, testdataPath(t, "user-adapter/fake-agent"))
	h, a := cliHarness(t, loadDef(t, "fake-agent"), bin, protocol.ApprovalAuto)
	var ids []string
	a.SessionID = unknown
	a.OnSession = func(id string) { ids = append(ids, id) }
	h.turn(protocol.Prompt{Content: "hi"})
	if errs := ofType[protocol.Error](h); len(errs) != 1 || !strings.HasPrefix(errs[0].Message, "session_not_found: ") {
		t.Fatalf("errors = %+v, want the one session_not_found", errs)
	}
	if !slices.Equal(ids, []string{""}) || a.Session() != "" {
		t.Errorf("OnSession got %q, session to resume %q; want the unknown id dropped", ids, a.Session())
	}
	h.turn(protocol.Prompt{Content: "again"})
	starts := readStarts(t, log)
	if len(starts) != 2 || slices.Contains(starts[1], "--resume") {
		t.Errorf("starts = %q; want the second without --resume", starts)
	}
	if !slices.Equal(ids, []string{"", fakeSession}) || a.Session() != fakeSession {
		t.Errorf("OnSession got %q, session to resume %q; want the new session %s", ids, a.Session(), fakeSession)
	}
	for _, s := range ofType[protocol.Status](h) {
		if strings.Contains(s.Message, "no longer exists") {
			t.Errorf("status %q: the session never existed", s.Message)
		}
	}
}
