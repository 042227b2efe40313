package runtime

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/tool"
)

// callThenDone is the frames of a scenario whose first turn makes one
// tool call (call, a YAML flow mapping) and whose second answers "done".
func callThenDone(call string) string {
	return "\n  - index: 0\n    statements:\n      - " + call + "\n  - index: 1\n    statements:\n      - {kind: text, text: done}\n"
}

var (
	writeFrames  = callThenDone(`{kind: tool_call, tool: Write, id: call_w, input: {path: a.txt, content: x}}`)
	askFrames    = callThenDone(`{kind: tool_call, tool: ask_user, id: call_q, input: {questions: [{question: "Which?", header: Pick, options: [{label: A, description: a}, {label: B, description: b}]}]}}`)
	clientFrames = callThenDone(`{kind: tool_call, tool: open, id: call_o, input: {path: x}}`)
	retryFrames  = callThenDone(`{kind: tool_call, tool: Read, id: call_r, input: {path: missing.txt}}`)
)

// TestServerRequestTimeouts: each kind of request resolves by policy after
// its contract timeout, and not a second before.
func TestServerRequestTimeouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tools   string
		frames  string
		caps    []protocol.RequestType
		timeout time.Duration
		want    protocol.ServerRequestResolved
		// runError is the error the run ends with, if any.
		runError string
	}{
		{"approval", "Write", writeFrames, nil, time.Hour,
			protocol.ServerRequestResolved{RequestID: "call_w", RequestType: protocol.RequestApproval, CallID: "call_w",
				Resolution: protocol.ResolutionDenied, Reason: "Approval request timed out", ResolvedBy: protocol.ResolvedByPolicy}, ""},
		{"client tool", "open", clientFrames, []protocol.RequestType{protocol.RequestClientTool}, time.Minute,
			protocol.ServerRequestResolved{RequestID: "call_o", RequestType: protocol.RequestClientTool, CallID: "call_o",
				Resolution: protocol.ResolutionFailed, Reason: "Client tool request timed out", ResolvedBy: protocol.ResolvedByPolicy}, ""},
		{"user input", "ask_user", askFrames, []protocol.RequestType{protocol.RequestUserInput}, time.Minute,
			protocol.ServerRequestResolved{RequestID: "call_q", RequestType: protocol.RequestUserInput, CallID: "call_q",
				Resolution: protocol.ResolutionFailed, Reason: "User input request timed out", ResolvedBy: protocol.ResolvedByPolicy}, ""},
		{"tool retry", "Read", retryFrames, []protocol.RequestType{protocol.RequestToolRetry}, time.Hour,
			protocol.ServerRequestResolved{RequestID: "retry_call_r_1", RequestType: protocol.RequestToolRetry, CallID: "call_r",
				Resolution: protocol.ResolutionCancelled, Reason: "Tool retry request timed out", ResolvedBy: protocol.ResolvedByPolicy},
			"Run aborted: run aborted after a tool failure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{
					Provider:     scenario(t, tt.tools, tt.frames),
					ApprovalMode: protocol.ApprovalPrompt,
					ClientTools:  []ClientTool{{Name: "open", Description: "open a file"}},
				}, ConnectOptions{})
				if err := h.handle(protocol.Hello{Capabilities: &protocol.Capabilities{ServerRequests: tt.caps}}); err != nil {
					t.Fatal(err)
				}
				if err := h.handle(protocol.Prompt{Content: "go"}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if n := len(ofType[protocol.ServerRequest](h)); n != 1 {
					t.Fatalf("%d server requests raised, want 1: %v", n, h.types())
				}
				time.Sleep(tt.timeout - time.Second)
				synctest.Wait()
				if got := ofType[protocol.ServerRequestResolved](h); len(got) != 0 {
					t.Fatalf("resolved before the timeout: %v", got)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				got := ofType[protocol.ServerRequestResolved](h)
				if len(got) != 1 {
					t.Fatalf("resolved = %v, want one resolution", got)
				}
				if d := cmp.Diff(tt.want, got[0]); d != "" {
					t.Errorf("resolution (-want +got):\n%s", d)
				}
				ends := ofType[protocol.ToolEnd](h)
				if len(ends) != 1 || ends[0].Success {
					t.Errorf("tool_end = %v, want one unsuccessful", ends)
				}
				var errs []string
				for _, e := range ofType[protocol.Error](h) {
					errs = append(errs, e.Message)
				}
				if tt.runError != "" {
					if len(errs) != 1 || !strings.HasPrefix(errs[0], tt.runError) {
						t.Errorf("errors = %q, want one starting %q", errs, tt.runError)
					}
				} else if len(errs) != 0 {
					t.Errorf("errors = %q, want none (the run goes on)", errs)
				}
				if err := h.rt.WaitIdle(context.Background()); err != nil {
					t.Fatal(err)
				}
				if snap := h.rt.Snapshot(); len(snap.State.PendingRequests) != 0 {
					t.Errorf("pending after timeout: %v", snap.State.PendingRequests)
				}
			})
		})
	}
}

// TestSnapshotPendingAndInterrupt: a pending approval appears in its list
// and in the unified list; interrupt cancels it and clears the state;
// shutdown makes the runtime not ready. Snapshots validate.
func TestSnapshotPendingAndInterrupt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		v := prototest.Validator(t)
		h := newHarness(t, Config{Provider: scenario(t, "Write", writeFrames), ApprovalMode: protocol.ApprovalPrompt, SessionID: "s1"}, ConnectOptions{})
		check := func(s protocol.Snapshot) {
			t.Helper()
			data, err := protocol.Marshal(protocol.SnapshotEnvelope{Snapshot: s})
			if err != nil {
				t.Fatal(err)
			}
			if err := v.ValidateEnvelope(data); err != nil {
				t.Errorf("snapshot does not validate: %v\n%s", err, data)
			}
		}
		if err := h.handle(protocol.Init{ThinkingLevel: protocol.ThinkingLow}); err != nil {
			t.Fatal(err)
		}
		if err := h.handle(protocol.Prompt{Content: "go"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		s := h.rt.Snapshot()
		check(s)
		if s.LastInit == nil || s.LastInit.ThinkingLevel != protocol.ThinkingLow {
			t.Errorf("last_init = %v", s.LastInit)
		}
		want := []protocol.PendingRequest{{
			ID: "call_w", Kind: protocol.RequestApproval, Status: "pending", Visibility: "user", SessionID: "s1",
			ToolCallID: "call_w", CallID: "call_w", ToolName: "Write", Tool: "Write", DisplayName: "Write",
			SummaryLabel: "Write a.txt", ActionDescription: "Write 1 bytes to a.txt",
			Args: raw(`{"path":"a.txt","content":"x"}`), Source: protocol.SourceLocal,
		}}
		if d := cmp.Diff(want, s.State.PendingRequests); d != "" {
			t.Errorf("pending_requests (-want +got):\n%s", d)
		}
		if len(s.State.PendingApprovals) != 1 || len(s.State.TrackedTools) != 1 || !s.State.IsReady {
			t.Errorf("state = %+v", s.State)
		}
		if s.State.ConnectionCount != 1 || s.State.SubscriberCount != 1 || s.State.ConnectionRole != protocol.RoleController {
			t.Errorf("connection fields = %d %d %q", s.State.ConnectionCount, s.State.SubscriberCount, s.State.ConnectionRole)
		}
		if s.Cursor == 0 {
			t.Error("snapshot cursor is 0")
		}

		if err := h.handle(protocol.Interrupt{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		s = h.rt.Snapshot()
		check(s)
		if len(s.State.PendingRequests) != 0 || len(s.State.PendingApprovals) != 0 || len(s.State.TrackedTools) != 0 ||
			len(s.State.ActiveTools) != 0 || s.State.IsResponding {
			t.Errorf("after interrupt: %+v", s.State)
		}
		if s.State.LastErrorType != protocol.ErrorCancelled {
			t.Errorf("last_error_type = %q, want cancelled", s.State.LastErrorType)
		}
		res := ofType[protocol.ServerRequestResolved](h)
		if len(res) != 1 || res[0].Resolution != protocol.ResolutionCancelled || res[0].ResolvedBy != protocol.ResolvedByRuntime ||
			res[0].Reason != "Interrupted before request completed" {
			t.Errorf("resolutions = %v", res)
		}
		h.rt.Shutdown()
		if s := h.rt.Snapshot(); s.State.IsReady {
			t.Error("is_ready after shutdown")
		}
		if err := h.handle(protocol.Prompt{Content: "again"}); err == nil || err.Error() != msgShuttingDown {
			t.Errorf("prompt after shutdown: %v", err)
		}
	})
}

// TestAnswersAndLegacyPaths covers answers that the golden transcripts do
// not: the legacy client_tool_result for ask_user, and a tool_retry answer
// without decision_action (abort).
func TestAnswersAndLegacyPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		tool       string
		frames     string
		kind       protocol.RequestType
		answer     protocol.Message
		resolution protocol.Resolution
		resolvedBy protocol.ResolvedBy
		// check looks at what else the answer did.
		check func(t *testing.T, h *harness)
	}{
		{"ask_user via client_tool_result", "ask_user", askFrames, protocol.RequestUserInput,
			protocol.ClientToolResult{CallID: "call_q", Content: []protocol.ContentBlock{protocol.TextBlock("A")}},
			protocol.ResolutionAnswered, protocol.ResolvedByClient,
			func(t *testing.T, h *harness) {
				if ends := ofType[protocol.ToolEnd](h); len(ends) != 1 || !ends[0].Success {
					t.Errorf("tool_end = %v", ends)
				}
			}},
		{"tool_retry without decision aborts", "Read", retryFrames, protocol.RequestToolRetry,
			protocol.ServerRequestResponse{RequestID: "retry_call_r_1", RequestType: protocol.RequestToolRetry},
			protocol.ResolutionAborted, protocol.ResolvedByUser,
			func(t *testing.T, h *harness) {
				errs := ofType[protocol.Error](h)
				if len(errs) != 1 || errs[0].ErrorType != protocol.ErrorCancelled || !strings.Contains(errs[0].Message, "aborted") {
					t.Errorf("errors = %v, want the abort classified cancelled", errs)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Provider: scenario(t, tt.tool, tt.frames)}, ConnectOptions{})
				h.handle(protocol.Hello{Capabilities: &protocol.Capabilities{ServerRequests: []protocol.RequestType{tt.kind}}})
				h.handle(protocol.Prompt{Content: "go"})
				synctest.Wait()
				if err := h.handle(tt.answer); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				res := ofType[protocol.ServerRequestResolved](h)
				if len(res) != 1 || res[0].Resolution != tt.resolution || res[0].ResolvedBy != tt.resolvedBy {
					t.Errorf("resolutions = %v", res)
				}
				tt.check(t, h)
			})
		})
	}
}

// TestElicit: an mcp_elicitation request is raised with the contract's ids
// and its answer parsed; anything unparsable or failed is a cancel.
func TestElicit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content []protocol.ContentBlock
		isError bool
		want    ElicitationResult
		res     protocol.Resolution
	}{
		{"accept", []protocol.ContentBlock{protocol.TextBlock(`{"action":"accept","content":{"name":"x","n":2,"ok":true,"tags":["a"]}}`)}, false,
			ElicitationResult{Action: "accept", Content: map[string]jsonRaw{"name": raw(`"x"`), "n": raw(`2`), "ok": raw(`true`), "tags": raw(`["a"]`)}}, protocol.ResolutionAnswered},
		{"decline", []protocol.ContentBlock{protocol.TextBlock(`{"action":"decline"}`)}, false, ElicitationResult{Action: "decline"}, protocol.ResolutionAnswered},
		{"garbage", []protocol.ContentBlock{protocol.TextBlock(`yes please`)}, false, ElicitationResult{Action: "cancel"}, protocol.ResolutionAnswered},
		{"nested object", []protocol.ContentBlock{protocol.TextBlock(`{"action":"accept","content":{"a":{"b":1}}}`)}, false, ElicitationResult{Action: "cancel"}, protocol.ResolutionAnswered},
		{"error", []protocol.ContentBlock{protocol.TextBlock(`{"action":"accept"}`)}, true, ElicitationResult{Action: "cancel"}, protocol.ResolutionFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Provider: &capture{}}, ConnectOptions{})
				got := make(chan ElicitationResult, 1)
				go func() {
					r, _ := h.rt.Elicit(context.Background(), ElicitationRequest{ServerName: "docs", RequestID: "7", Mode: "form", Message: "Name?"})
					got <- r
				}()
				synctest.Wait()
				reqs := ofType[protocol.ServerRequest](h)
				if len(reqs) != 1 || reqs[0].RequestID != "mcp_elicitation:docs:7" || reqs[0].Tool != "mcp_elicitation" ||
					reqs[0].Reason != "MCP server requested additional user input" {
					t.Fatalf("requests = %v", reqs)
				}
				if err := h.handle(protocol.ServerRequestResponse{RequestID: "mcp_elicitation:docs:7", RequestType: protocol.RequestMCPElicitation,
					Content: tt.content, IsError: ptr(tt.isError)}); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tt.want, <-got); d != "" {
					t.Errorf("result (-want +got):\n%s", d)
				}
				synctest.Wait()
				if res := ofType[protocol.ServerRequestResolved](h); len(res) != 1 || res[0].Resolution != tt.res {
					t.Errorf("resolution = %v, want %s", res, tt.res)
				}
			})
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		msg   string
		fatal bool
		want  protocol.ErrorType
	}{
		{"Operation aborted", false, protocol.ErrorCancelled},
		{"Request was cancelled by the user", true, protocol.ErrorCancelled},
		{"Rate limit exceeded", false, protocol.ErrorTransient},
		{"upstream timeout talking to the tool", false, protocol.ErrorTransient},
		{"Tool Bash failed", false, protocol.ErrorTool},
		{"Permission denied", true, protocol.ErrorTool},
		{"Could not parse the response", false, protocol.ErrorProtocol},
		{"Invalid JSON", true, protocol.ErrorProtocol},
		{"disk full", true, protocol.ErrorFatal},
		{"disk full", false, protocol.ErrorTool},
	}
	for _, tt := range tests {
		if got := Classify(tt.msg, tt.fatal); got != tt.want {
			t.Errorf("Classify(%q, %v) = %q, want %q", tt.msg, tt.fatal, got, tt.want)
		}
	}
}

// TestClientToolNameTaken: a client tool named like a tool of the session
// (here the built-in Write) is left out with an error, and the prompt runs
// with the built-in; before, adding it panicked and killed the process at
// the first prompt of a client that negotiated client_tool.
func TestClientToolNameTaken(t *testing.T) {
	t.Parallel()
	p := &capture{}
	h := newHarness(t, Config{Provider: p, ClientTools: []ClientTool{{Name: "Write"}, {Name: "open"}}}, ConnectOptions{})
	if err := h.handle(protocol.Hello{Capabilities: &protocol.Capabilities{ServerRequests: []protocol.RequestType{protocol.RequestClientTool}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.handle(protocol.Prompt{Content: "go"}); err != nil {
		t.Fatal(err)
	}
	h.waitType(protocol.TypeResponseEnd, 1)
	var errs []string
	for _, e := range ofType[protocol.Error](h) {
		errs = append(errs, e.Message)
	}
	want := []string{"Client tool Write is left out: a tool of this session has that name; rename it in --client-tools"}
	if d := cmp.Diff(want, errs); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
	var names []string
	for _, s := range p.last().Tools {
		names = append(names, s.Name)
	}
	if d := cmp.Diff([]string{"Read", "Write", "open"}, names); d != "" {
		t.Errorf("tools offered (-want +got):\n%s", d)
	}
}

// TestClientToolNames: names the model APIs would refuse (spaces, dots,
// over 64 bytes) or that take MCP's namespace are refused when the
// runtime is made, not at every prompt by the provider.
func TestClientToolNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"open_in-editor2", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"open file", false},
		{"open.file", false},
		{"ouvrir_é", false},
		{"mcp__x__y", false},
	} {
		_, err := New(Config{Provider: &capture{}, Tools: func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil },
			ClientTools: []ClientTool{{Name: tt.name}}})
		if (err == nil) != tt.ok {
			t.Errorf("client tool %q: err = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
