package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/store/storetest"
)

func code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// TestControllerLease follows wire contract §8.5 with several connections.
func TestControllerLease(t *testing.T) {
	t.Parallel()
	clk := storetest.NewClockAt(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	rt := newBare(t, Config{Now: clk.Now})
	ctx := context.Background()

	a, err := rt.Connect(ConnectOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Connect(ConnectOptions{ID: "b"}); !errors.Is(err, ErrLeaseHeld) || code(err) != CodeConflict ||
		err.Error() != "Controller lease is already held by another connection" {
		t.Fatalf("second controller: %v", err)
	}
	if _, err := rt.Connect(ConnectOptions{ID: "a"}); !errors.Is(err, ErrDuplicateConnection) {
		t.Errorf("duplicate id: %v", err)
	}
	v, err := rt.Connect(ConnectOptions{ID: "v", Role: protocol.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Connect(ConnectOptions{ID: "v2", Role: protocol.RoleViewer,
		Capabilities: &protocol.Capabilities{ServerRequests: []protocol.RequestType{protocol.RequestApproval, protocol.RequestMCPElicitation}}}); code(err) != CodeBadRequest ||
		err.Error() != "viewer headless connections cannot negotiate mcp_elicitation requests" {
		t.Errorf("viewer with mcp_elicitation: %v", err)
	}
	if err := v.Handle(ctx, protocol.Init{}); code(err) != CodeForbidden || err.Error() != msgViewerCannotSend {
		t.Errorf("viewer init: %v", err)
	}
	if err := v.Handle(ctx, protocol.Hello{Role: protocol.RoleViewer}); err != nil {
		t.Errorf("viewer hello: %v", err)
	}

	b, err := rt.Connect(ConnectOptions{ID: "b", TakeControl: true})
	if err != nil {
		t.Fatalf("take control: %v", err)
	}
	if err := a.Handle(ctx, protocol.Init{}); code(err) != CodeConflict || err.Error() != "Controller lease is currently held by another connection" {
		t.Errorf("old controller after takeover: %v", err)
	}
	s := rt.Snapshot()
	if id, _ := s.State.ControllerConnectionID.Get(); id != "b" {
		t.Errorf("controller = %v, want b", s.State.ControllerConnectionID)
	}
	granted := map[string]bool{}
	for _, c := range s.State.Connections {
		granted[c.ConnectionID] = c.ControllerLeaseGranted
		exp, _ := c.LeaseExpiresAt.Get()
		if exp != "2026-05-01T12:00:45.000Z" {
			t.Errorf("%s lease_expires_at = %v, want last seen + 45 s", c.ConnectionID, c.LeaseExpiresAt)
		}
	}
	if d := cmp.Diff(map[string]bool{"a": false, "v": false, "b": true}, granted); d != "" {
		t.Errorf("controller_lease_granted (-want +got):\n%s", d)
	}

	// Nobody holds the lease once b leaves: the next controller to send
	// claims it.
	b.Close()
	if err := a.Handle(ctx, protocol.Init{}); err != nil {
		t.Errorf("controller after the holder left: %v", err)
	}
	if id, _ := rt.Snapshot().State.ControllerConnectionID.Get(); id != "a" {
		t.Errorf("lease not claimed by a")
	}

	// A connection idle past the lease with no attached stream is swept;
	// one with an attached subscription stays.
	sub, _ := v.Subscribe(SubscribeOptions{From: FromNow})
	clk.Advance(46 * time.Second)
	if got := rt.SweepConnections(); !cmp.Equal(got, []string{"a"}) {
		t.Errorf("swept %v, want [a]", got)
	}
	sub.SetAttached(false)
	clk.Advance(46 * time.Second)
	if got := rt.SweepConnections(); !cmp.Equal(got, []string{"v"}) {
		t.Errorf("swept %v, want [v]", got)
	}
	if s := rt.Snapshot(); s.State.ConnectionCount != 0 || !s.State.ControllerConnectionID.IsNull() {
		t.Errorf("after the sweep: %d connections, controller %v", s.State.ConnectionCount, s.State.ControllerConnectionID)
	}
}

// TestHelloRoles: a stdio hello claims or releases the lease by role.
func TestHelloRoles(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Provider: &capture{}}, ConnectOptions{})
	if err := h.handle(protocol.Prompt{Content: "x"}); err != nil {
		t.Fatal(err)
	}
	h.rt.WaitIdle(context.Background())
	// prompt before hello: the undetermined role acts as controller.
	if id, _ := h.rt.Snapshot().State.ControllerConnectionID.Get(); id != LocalConnectionID {
		t.Errorf("controller after a prompt = %q", id)
	}
	if err := h.handle(protocol.Hello{Role: protocol.RoleViewer}); err != nil {
		t.Fatal(err)
	}
	if s := h.rt.Snapshot(); !s.State.ControllerConnectionID.IsNull() || s.State.ConnectionRole != protocol.RoleViewer {
		t.Errorf("after a viewer hello: controller %v role %q", s.State.ControllerConnectionID, s.State.ConnectionRole)
	}
	if err := h.handle(protocol.Hello{}); err != nil {
		t.Errorf("hello without a role keeps the role: %v", err)
	}
	if err := h.handle(protocol.Hello{Role: protocol.RoleController}); err == nil || err.Error() != msgRoleCannotChange {
		t.Errorf("role change: %v", err)
	}
}

// TestViewerCapabilitiesByTransport: a viewer may never negotiate
// mcp_elicitation or user_input; tool_retry is refused on stdio (the
// local connection) only, not over HTTP (wire contract §8.5), whether it
// comes with Connect, Update or hello.
func TestViewerCapabilitiesByTransport(t *testing.T) {
	t.Parallel()
	caps := func(ts ...protocol.RequestType) *protocol.Capabilities {
		return &protocol.Capabilities{ServerRequests: append([]protocol.RequestType{protocol.RequestApproval}, ts...)}
	}
	tests := []struct {
		name  string
		local bool
		req   protocol.RequestType
		want  string // "" = accepted
	}{
		{"http tool_retry", false, protocol.RequestToolRetry, ""},
		{"http user_input", false, protocol.RequestUserInput, "viewer headless connections cannot negotiate user_input requests"},
		{"http mcp_elicitation", false, protocol.RequestMCPElicitation, "viewer headless connections cannot negotiate mcp_elicitation requests"},
		{"stdio tool_retry", true, protocol.RequestToolRetry, "viewer headless connections cannot negotiate tool_retry requests"},
		{"stdio user_input", true, protocol.RequestUserInput, "viewer headless connections cannot negotiate user_input requests"},
	}
	check := func(t *testing.T, what string, err error, want string) {
		t.Helper()
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", what, err)
		case want != "" && (code(err) != CodeBadRequest || err.Error() != want):
			t.Errorf("%s: %v, want 400 %q", what, err, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := newBare(t, Config{})
			ctx := context.Background()
			if !tt.local {
				_, err := rt.Connect(ConnectOptions{ID: "v", Role: protocol.RoleViewer, Capabilities: caps(tt.req)})
				check(t, "connect", err, tt.want)
				v, err := rt.Connect(ConnectOptions{ID: "v2", Role: protocol.RoleViewer})
				if err != nil {
					t.Fatal(err)
				}
				check(t, "update", v.Update(ConnectOptions{Capabilities: caps(tt.req)}), tt.want)
				check(t, "hello", v.Handle(ctx, protocol.Hello{Role: protocol.RoleViewer, Capabilities: caps(tt.req)}), tt.want)
				return
			}
			l, err := rt.Connect(ConnectOptions{ID: LocalConnectionID, Local: true})
			if err != nil {
				t.Fatal(err)
			}
			check(t, "hello", l.Handle(ctx, protocol.Hello{Role: protocol.RoleViewer, Capabilities: caps(tt.req)}), tt.want)
			_, err = rt.Connect(ConnectOptions{ID: "l2", Local: true, Role: protocol.RoleViewer, Capabilities: caps(tt.req)})
			check(t, "connect", err, tt.want)
		})
	}
}

// TestSystemPromptAndThinking: init replaces and extends the system prompt
// and sets the thinking level the model receives.
func TestSystemPromptAndThinking(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		inits []protocol.Init
		want  string
	}{
		{"default", nil, "default"},
		{"append", []protocol.Init{{AppendSystemPrompt: ptr("more")}}, "default\n\nmore"},
		{"replace then append", []protocol.Init{{AppendSystemPrompt: ptr("lost")}, {SystemPrompt: ptr("new"), AppendSystemPrompt: ptr("more")}}, "new\n\nmore"},
		{"replace with empty then append", []protocol.Init{{SystemPrompt: ptr("")}, {AppendSystemPrompt: ptr("only")}}, "only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &capture{}
			h := newHarness(t, Config{Provider: p, SystemPrompt: func(context.Context) string { return "default" }}, ConnectOptions{})
			for _, in := range tt.inits {
				h.handle(in)
			}
			h.handle(protocol.Init{ThinkingLevel: protocol.ThinkingHigh})
			h.handle(protocol.Prompt{Content: "x"})
			h.rt.WaitIdle(context.Background())
			req := p.last()
			if req == nil {
				t.Fatal("the model was not called")
			}
			if req.System != tt.want || req.Thinking != llm.ThinkingHigh {
				t.Errorf("system %q thinking %q, want %q high", req.System, req.Thinking, tt.want)
			}
		})
	}
}

// TestAttachmentLimits: size and length limits, "~", images as image
// parts and text as a text part of the user message.
func TestAttachmentLimits(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ws := t.TempDir()
	write := func(dir, name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(ws, "big.txt", strings.Repeat("x", 3<<20))
	write(ws, "long.txt", "αβγδεζηθ")
	write(home, "pic.jpg", "\xff\xd8\xff")
	p := &capture{}
	h := newHarness(t, Config{Provider: p, Cwd: ws, Home: home, MaxAttachmentBytes: 2 << 20, MaxAttachmentChars: 5}, ConnectOptions{})
	h.handle(protocol.Prompt{Content: "look", Attachments: []string{"big.txt", "long.txt", "~/pic.jpg"}})
	h.rt.WaitIdle(context.Background())
	h.waitType(protocol.TypeResponseEnd, 1)
	msgs := h.notes()
	if d := cmp.Diff([]string{"Attachment too large (3MB): big.txt", "Loaded 2 attachment(s)"}, msgs); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	req := p.last()
	parts := req.Messages[len(req.Messages)-1].Parts
	if len(parts) != 3 || parts[0].Text != "look" || !strings.Contains(parts[1].Text, "αβγδε\n</attachment>") ||
		parts[2].Type != llm.PartImage || parts[2].Image.MediaType != "image/jpeg" {
		t.Errorf("user message parts = %+v", parts)
	}
}

// TestAttachmentNotRegular: a FIFO, a device and a directory given as
// attachments are refused at once with the contract's "not readable"
// error and the prompt runs; before, the FIFO blocked the run (and the
// runtime's shutdown) for ever, and a device was read to its end, which
// for /dev/zero is when memory runs out (/dev/null stands for it here: the
// kind is taken from the opened descriptor either way).
func TestAttachmentNotRegular(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("fine"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &capture{}
	h := newHarness(t, Config{Provider: p, Cwd: ws, Home: t.TempDir(), MaxAttachmentBytes: 1 << 20, MaxAttachmentChars: 100}, ConnectOptions{})
	t.Cleanup(func() {
		// Unblocks a reader stuck in open(2) of the FIFO (the defect), so
		// that the harness can close.
		if f, err := os.OpenFile(filepath.Join(ws, "pipe"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	h.handle(protocol.Prompt{Content: "look", Attachments: []string{"pipe", "/dev/null", "dir", "ok.txt"}})
	h.waitWithin(5*time.Second, "the prompt's response_end", func(fs []protocol.Message) bool {
		return slices.ContainsFunc(fs, func(m protocol.Message) bool { return m.MessageType() == protocol.TypeResponseEnd })
	})
	msgs := h.notes()
	want := []string{"Attachment not readable: pipe", "Attachment not readable: /dev/null", "Attachment not readable: dir", "Loaded 1 attachment(s)"}
	if d := cmp.Diff(want, msgs); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
}

// fakeUtilities records calls.
type fakeUtilities struct {
	mu    sync.Mutex
	calls []string
	emit  func(protocol.Message)
}

func (f *fakeUtilities) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeUtilities) CommandStart(_ context.Context, owner string, req protocol.UtilityCommandStart) error {
	f.record("start " + owner + " " + req.CommandID)
	f.emit(protocol.UtilityCommandStarted{CommandID: req.CommandID, Command: req.Command, ShellMode: protocol.ShellModeShell, TerminalMode: protocol.TerminalPipe, OwnerConnectionID: owner})
	return nil
}
func (f *fakeUtilities) CommandTerminate(owner string, req protocol.UtilityCommandTerminate) error {
	f.record("terminate " + owner + " " + req.CommandID)
	return &Error{Message: "Headless command " + req.CommandID + " is owned by another connection", Code: 403}
}
func (f *fakeUtilities) CommandStdin(owner string, req protocol.UtilityCommandStdin) error {
	f.record("stdin " + owner)
	return nil
}
func (f *fakeUtilities) CommandResize(owner string, req protocol.UtilityCommandResize) error {
	f.record("resize " + owner)
	return nil
}
func (f *fakeUtilities) FileSearch(_ context.Context, req protocol.UtilityFileSearch) (protocol.UtilityFileSearchResults, error) {
	f.record("search " + req.Query)
	return protocol.UtilityFileSearchResults{Query: req.Query, Cwd: "/w", Results: []protocol.FileSearchResult{}}, nil
}
func (f *fakeUtilities) FileRead(_ context.Context, req protocol.UtilityFileRead) (protocol.UtilityFileReadResult, error) {
	f.record("read " + req.Path)
	return protocol.UtilityFileReadResult{}, errors.New("Path is outside workspace root: " + req.Path)
}
func (f *fakeUtilities) WatchStart(_ context.Context, owner string, req protocol.UtilityFileWatchStart) error {
	f.record("watch " + owner)
	return nil
}
func (f *fakeUtilities) WatchStop(owner string, req protocol.UtilityFileWatchStop) error {
	f.record("unwatch " + owner)
	return nil
}
func (f *fakeUtilities) CloseOwner(owner, reason string) {
	f.record("close-owner " + owner + ": " + reason)
}
func (f *fakeUtilities) StopAll(reason string) { f.record("stop-all: " + reason) }
func (f *fakeUtilities) Close() error          { f.record("close"); return nil }

// TestUtilityDispatch: capability checks, owner, request ids, the results'
// ids, and the reasons passed on interrupt, owner close and shutdown.
func TestUtilityDispatch(t *testing.T) {
	t.Parallel()
	f := &fakeUtilities{}
	h := newHarness(t, Config{Provider: &capture{}, Utilities: func(emit func(protocol.Message)) Utilities {
		f.emit = emit
		return f
	}}, ConnectOptions{})
	all := []protocol.UtilityOperation{protocol.OpCommandExec, protocol.OpFileSearch, protocol.OpFileRead, protocol.OpFileWatch}
	h.handle(protocol.Hello{Capabilities: &protocol.Capabilities{UtilityOperations: all}})
	errs := []error{
		h.handle(protocol.UtilityCommandStart{CommandID: "c1", Command: "ls"}),
		h.handle(protocol.UtilityCommandTerminate{CommandID: "c1"}),
		h.handle(protocol.UtilityCommandStdin{CommandID: "c1", Content: "x"}),
		h.handle(protocol.UtilityCommandResize{CommandID: "c1", Columns: 80, Rows: 24}),
		h.handle(protocol.UtilityFileSearch{SearchID: "s1", Query: "main"}),
		h.handle(protocol.UtilityFileRead{ReadID: "r1", Path: "../etc/passwd"}),
		h.handle(protocol.UtilityFileWatchStart{WatchID: "w1"}),
		h.handle(protocol.UtilityFileWatchStop{WatchID: "w1"}),
		h.handle(protocol.Interrupt{}),
	}
	if e := errs[1]; e == nil || e.Error() != "Headless command c1 is owned by another connection" {
		t.Errorf("terminate error = %v", e)
	}
	for i, e := range errs {
		if i != 1 && e != nil {
			t.Errorf("call %d: %v", i, e)
		}
	}
	h.rt.WaitIdle(context.Background())
	h.waitType(protocol.TypeUtilityFileSearchResults, 1)
	h.waitType(protocol.TypeError, 1)
	var read *protocol.Error
	var search *protocol.UtilityFileSearchResults
	for _, m := range h.all() {
		switch m := m.(type) {
		case protocol.Error:
			read = &m
		case protocol.UtilityFileSearchResults:
			search = &m
		}
	}
	if read == nil || read.RequestID != "r1" || read.Message != "Path is outside workspace root: ../etc/passwd" {
		t.Errorf("file read failure = %+v, want request_id r1", read)
	}
	if search == nil || search.SearchID != "s1" {
		t.Errorf("search result = %+v, want search_id s1", search)
	}
	if s := h.rt.Snapshot(); len(s.State.ActiveUtilityCommands) != 0 {
		t.Errorf("interrupt left active commands in the state: %v", s.State.ActiveUtilityCommands)
	}
	h.conn.Close()
	h.rt.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	// File search and read run in the background: check them apart.
	var got []string
	async := map[string]bool{}
	for _, c := range f.calls {
		if strings.HasPrefix(c, "search ") || strings.HasPrefix(c, "read ") {
			async[c] = true
			continue
		}
		got = append(got, c)
	}
	if !async["search main"] || !async["read ../etc/passwd"] {
		t.Errorf("background calls = %v", async)
	}
	want := []string{
		"start local c1", "terminate local c1", "stdin local", "resize local",
		"watch local", "unwatch local",
		"stop-all: Interrupted while utility command was still running",
		"close-owner local: Owning connection closed while utility command was still running",
		"stop-all: Headless runtime shutdown while utility command was still running",
		"close",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

// TestInitHistory: init.history seeds the conversation (the next model
// request carries the entries before the prompt, and the status names
// "history"); a bad entry is a protocol error naming its index, and
// nothing is seeded.
func TestInitHistory(t *testing.T) {
	t.Parallel()
	p := &capture{}
	h := newHarness(t, Config{Provider: p}, ConnectOptions{})
	bad := []struct{ history, want string }{
		{`{"role":"user"}`, "init.history: expected an array"},
		{`[{"role":"user","content":"a"},{"role":"system","content":"b"}]`, `init.history[1].role: expected "user" or "assistant"`},
		{`[{"role":"assistant","content":"a"}]`, `init.history[0].role: expected "user"`},
		{`[{"role":"user","content":"a"},{"role":"assistant","content":" "}]`, "init.history[1].content: expected non-empty text"},
		{`[{"role":"user","content":"a","extra":1}]`, "init.history[0]: expected {role, content}"},
		{`[{"role":"user","content":"a"}]`, `init.history[0].role: the last entry must be "assistant"`},
	}
	for _, b := range bad {
		err := h.handle(protocol.Init{History: raw(b.history)})
		var e *Error
		if !errors.As(err, &e) || e.Type != protocol.ErrorProtocol || !strings.Contains(e.Message, b.want) {
			t.Errorf("history %s: %v, want a protocol error %q", b.history, err, b.want)
		}
	}
	if err := h.handle(protocol.Init{History: raw(`[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4."}]`)}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the init status", func(ms []protocol.Message) bool {
		for _, m := range ms {
			if s, ok := m.(protocol.Status); ok && s.Message == "Initialized: history" {
				return true
			}
		}
		return false
	})
	h.handle(protocol.Prompt{Content: "And 3+3?"})
	h.rt.WaitIdle(context.Background())
	req := p.last()
	var got []string
	for _, m := range req.Messages {
		got = append(got, string(m.Role)+": "+m.Parts[0].Text)
	}
	if d := cmp.Diff([]string{"user: What is 2+2?", "assistant: 4.", "user: And 3+3?"}, got); d != "" {
		t.Errorf("model request (-want +got):\n%s", d)
	}
	if last := h.rt.Snapshot().LastInit; last == nil || len(last.History) != 0 {
		t.Errorf("snapshot last_init %+v, want it without the history", last)
	}
}

// TestRawAgentEvents: a connection that negotiated raw_agent_events gets
// the agent's internal event stream as raw_agent_event frames — model
// stream deltas, the tool lifecycle and the conversation messages — each
// after the event it mirrors.
func TestRawAgentEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Provider: scenario(t, "Write", writeFrames), ApprovalMode: protocol.ApprovalAuto},
		ConnectOptions{ID: "raw", Role: protocol.RoleController, ProtocolVersion: protocol.Version, Capabilities: &protocol.Capabilities{RawAgentEvents: ptr(true)}})
	if _, err := h.conn.RunPrompt(context.Background(), protocol.Prompt{Content: "go"}); err != nil {
		t.Fatal(err)
	}
	h.waitType(protocol.TypeResponseEnd, 2)
	seen := map[string]bool{}
	for _, e := range ofType[protocol.RawAgentEvent](h) {
		seen[e.EventType] = true
	}
	for _, want := range []string{protocol.TypeResponseStart, protocol.TypeResponseChunk, protocol.TypeResponseEnd, protocol.TypeToolCall, protocol.TypeToolStart, protocol.TypeToolEnd, "message"} {
		if !seen[want] {
			t.Errorf("no raw_agent_event %q (got %v)", want, seen)
		}
	}
}
