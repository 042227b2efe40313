// Package runtime is Maestro's headless runtime: one agent session driven
// by clients of the headless protocol (2026-04-02), independent of the
// transport that carries the messages. The stdio transport
// (internal/transport/stdio) attaches one local connection; an HTTP/SSE
// transport attaches many through the same API.
//
// A Runtime owns:
//
//   - the agent (internal/agent), run once per prompt with the session's
//     history, the built-in tools, the ask_user tool and the tools the
//     embedder declared for the client to execute;
//   - the connections, their roles (controller, viewer) and the controller
//     lease (wire contract §8.5);
//   - the server requests of all five kinds (approval, client_tool,
//     user_input, tool_retry, mcp_elicitation; wire contract §9) with their
//     timeouts and resolutions;
//   - the utility operations, delegated to a Utilities implementation
//     (internal/utility) after the capability check;
//   - the runtime state of wire contract §7 and its snapshots;
//   - the one publish path: every outgoing message is appended to the
//     session's cursor-numbered log and fanned out to subscriptions that
//     read from a cursor (hub.go).
//
// Transports decode client lines (protocol.DecodeClient), call Conn.Handle,
// and write what their Subscription yields. Handle returns quickly: a
// prompt runs in the background, so an interrupt is handled while it runs.
package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Log is the session log the runtime appends to (a *session.Session).
// Calls are serialised by the runtime.
type Log interface {
	// Event appends a protocol event and assigns it the next cursor.
	Event(m protocol.Message)
	// Message appends a conversation message (it also takes a cursor).
	Message(m llm.Message)
	// Cursor returns the cursor of the last record.
	Cursor() int64
}

// Utilities runs the utility operations (implemented by internal/utility).
// Errors carry the contract's text; owner is the connection id.
type Utilities interface {
	CommandStart(ctx context.Context, owner string, req protocol.UtilityCommandStart) error
	CommandTerminate(owner string, req protocol.UtilityCommandTerminate) error
	CommandStdin(owner string, req protocol.UtilityCommandStdin) error
	CommandResize(owner string, req protocol.UtilityCommandResize) error
	FileSearch(ctx context.Context, req protocol.UtilityFileSearch) (protocol.UtilityFileSearchResults, error)
	FileRead(ctx context.Context, req protocol.UtilityFileRead) (protocol.UtilityFileReadResult, error)
	WatchStart(ctx context.Context, owner string, req protocol.UtilityFileWatchStart) error
	WatchStop(owner string, req protocol.UtilityFileWatchStop) error
	// CloseOwner stops what a departed connection owned.
	CloseOwner(owner, reason string)
	// StopAll stops every command and watch (interrupt, shutdown).
	StopAll(reason string)
	Close() error
}

// Timeouts of server requests (wire contract §9). Zero fields take the
// contract's values.
type Timeouts struct {
	Approval       time.Duration // 1 h
	ClientTool     time.Duration // 60 s
	UserInput      time.Duration // 60 s
	MCPElicitation time.Duration // 60 s
	ToolRetry      time.Duration // 1 h
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Approval, time.Hour)
	def(&t.ClientTool, time.Minute)
	def(&t.UserInput, time.Minute)
	def(&t.MCPElicitation, time.Minute)
	def(&t.ToolRetry, time.Hour)
	return t
}

func (t Timeouts) of(k protocol.RequestType) time.Duration {
	switch k {
	case protocol.RequestApproval:
		return t.Approval
	case protocol.RequestClientTool:
		return t.ClientTool
	case protocol.RequestUserInput:
		return t.UserInput
	case protocol.RequestMCPElicitation:
		return t.MCPElicitation
	}
	return t.ToolRetry
}

// ClientTool is a tool the embedder declares and its client executes: the
// model may call it, and the call becomes a client_tool server request.
// It is offered to the model only when the prompting connection negotiated
// client_tool.
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// CheckClientTools checks the client tools of a runtime (Config.ClientTools):
// each has a name model APIs accept, not ask_user's nor another's, and an
// input_schema that is valid JSON. A front end checks them as it reads
// them (maestro headless --client-tools: a usage error); New does too.
func CheckClientTools(tools []ClientTool) error {
	seen := map[string]bool{AskUserTool: true}
	for _, t := range tools {
		if t.Name == "" || seen[t.Name] {
			return fmt.Errorf("client tool %q: the name is empty or already taken", t.Name)
		}
		if !validToolName(t.Name) || strings.HasPrefix(t.Name, "mcp__") {
			return fmt.Errorf("client tool %q: a name is 1 to 64 letters, digits, _ or - (what model APIs accept), not starting with mcp__ (MCP tools' names)", workspace.Excerpt(t.Name))
		}
		if len(t.InputSchema) > 0 && !json.Valid(t.InputSchema) {
			return fmt.Errorf("client tool %q: input_schema is not valid JSON", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// validToolName reports whether name is a tool name the model APIs accept
// (Anthropic: ^[a-zA-Z0-9_-]{1,64}$; OpenAI alike).
func validToolName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Config configures a Runtime. Provider and Tools are required unless
// Turn runs every prompt.
type Config struct {
	// Values, when set, is the context whose values (not its
	// cancellation) every run of the session sees: the launcher's trace
	// context and the ids its spans and model requests carry
	// (docs/events.md, "Traces").
	Values context.Context
	// Provider is the model of Maestro's own loop. A runtime whose
	// prompts all run through Turn (an agent CLI) has none: ProviderName
	// and Model then name what runs them in ready.
	Provider     llm.Provider
	ProviderName string
	Model        string
	// Executor is reported in ready.executor_type ("live" or "replay").
	Executor protocol.ExecutorType
	// Retry, when set, retries failed model calls, announcing each retry
	// as a status.
	Retry *llm.RetryPolicy
	// Tools returns the built-in tools; it is called at each prompt and may
	// block the first time (the CLI probes the sandbox in the background
	// so that ready is not delayed).
	Tools func(ctx context.Context) (*tool.Set, error)
	// ClientTools are executed by the client (wire contract §9 client_tool).
	ClientTools []ClientTool
	// MCPElicitation advertises mcp_elicitation in hello_ok: the session
	// has MCP servers whose elicitations it raises with Elicit.
	MCPElicitation bool
	// Utilities, when set, builds the utility operations with the
	// runtime's publish function.
	Utilities func(emit func(protocol.Message)) Utilities
	// Log is the session log; nil numbers frames in memory only.
	Log Log
	// SessionID is reported in ready and session_info (empty: null).
	SessionID string
	// History is the conversation so far (a resumed session).
	History []llm.Message
	// Restored says the runtime continues a drained session (a hosted
	// runner's restore, wire contract §14.4): start it with Restore, not
	// Start. Its cursor stays the log's (the manifest's cursor N) until
	// the first new frame, which takes N+1, and the
	// reset{restored_from_snapshot} it publishes carries N (issue 12).
	Restored bool
	// Cwd is the workspace directory reported in session_info; relative
	// attachment paths resolve against it.
	Cwd       string
	GitBranch *string
	// Home expands "~" in attachment paths (default: the user's home).
	Home string
	// System is the default system prompt (init may replace or extend it).
	System string
	// SystemPrompt, when set, computes the default system prompt instead,
	// at the first prompt that needs it (after Tools, so it may describe
	// the sandbox the tools found).
	SystemPrompt func(ctx context.Context) string
	// Thinking is the initial thinking level (init may change it).
	Thinking llm.ThinkingLevel
	// ApprovalMode is the initial approval mode (default prompt; init may
	// change it).
	ApprovalMode protocol.ApprovalMode
	// MaxIterations caps model calls per prompt (0: the agent's default).
	MaxIterations int
	Timeouts      Timeouts
	// CompactAt is the share of the context window at which a prompt's
	// conversation is compacted (agent.Config.CompactAt; 0: the default).
	CompactAt float64
	// MaxAttachmentBytes (default 10 MiB) and MaxAttachmentChars
	// (default 200,000) limit prompt attachments (wire contract §8.11).
	MaxAttachmentBytes int64
	MaxAttachmentChars int
	// BufferFrames (default 1024, at least 512 for HTTP replay) and
	// BufferBytes (default 8 MiB) bound the frame ring.
	BufferFrames int
	BufferBytes  int
	// Validate, when set, checks every outgoing frame; a frame that fails
	// is replaced by the contract's "Failed to emit headless message"
	// error.
	Validate func(frame []byte) error
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Turn, when set, runs every prompt instead of the agent (turn.go).
	Turn TurnFunc
	// Release, when set, is called once by Close after the runtime has
	// stopped: it closes what the runtime was built over (the session log,
	// the workspace), so that whoever closes the runtime (a transport, a
	// registry) releases the whole session. Its error is Close's.
	Release func() error
}

// Runtime is one headless session. Create it with New, call Start once
// the first subscription exists, and Close it when done.
type Runtime struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc

	// logMu guards the publish path: state, hub, cursor, lastInit.
	// unlogged counts the cursors taken by snapshot envelopes, which the
	// Log does not record (cursorLocked).
	logMu    sync.Mutex
	hub      hub
	state    state
	cursor   int64
	unlogged int64
	lastInit *protocol.Init

	// reqMu guards the pending server requests and orders their
	// server_request / server_request_resolved frames.
	reqMu   sync.Mutex
	reqs    map[string]*pendingRequest
	reqList []*pendingRequest

	// mu guards everything else.
	mu         sync.Mutex
	conns      map[string]*Conn
	connOrder  []*Conn
	controller string
	// sysBase replaces the default system prompt once init set
	// system_prompt; sysAppends are the append_system_prompt texts since.
	sysBase    *string
	sysAppends []string
	thinking   llm.ThinkingLevel
	approval   protocol.ApprovalMode
	history    []llm.Message
	run        *activeRun
	runSeq     uint64
	busy       int
	idle       chan struct{}
	shutting   bool
	closed     bool
	done       chan struct{}
	util       Utilities
	// closeReason is why the runtime is closed, when its closer says
	// (SetCloseReason).
	closeReason string
}

// New returns a runtime; nothing is published until Start.
func New(cfg Config) (*Runtime, error) {
	if cfg.Provider == nil && cfg.Turn == nil {
		return nil, errors.New("headless runtime: no model provider")
	}
	if cfg.Tools == nil && cfg.Turn == nil {
		return nil, errors.New("headless runtime: no tools")
	}
	if cfg.Provider != nil {
		cfg.ProviderName, cfg.Model = cfg.Provider.Name(), cfg.Provider.Model()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ApprovalMode == "" {
		cfg.ApprovalMode = protocol.ApprovalPrompt
	}
	if cfg.MaxAttachmentBytes <= 0 {
		cfg.MaxAttachmentBytes = 10 << 20
	}
	if cfg.MaxAttachmentChars <= 0 {
		cfg.MaxAttachmentChars = 200_000
	}
	if cfg.BufferFrames <= 0 {
		cfg.BufferFrames = 1024
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = 8 << 20
	}
	if cfg.Home == "" {
		cfg.Home, _ = os.UserHomeDir()
	}
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	if err := CheckClientTools(cfg.ClientTools); err != nil {
		return nil, fmt.Errorf("headless runtime: %w", err)
	}
	base := context.Background()
	if cfg.Values != nil {
		base = context.WithoutCancel(cfg.Values)
	}
	ctx, cancel := context.WithCancel(base)
	r := &Runtime{
		cfg: cfg, ctx: ctx, cancel: cancel,
		state:    newState(),
		reqs:     map[string]*pendingRequest{},
		conns:    map[string]*Conn{},
		thinking: cfg.Thinking,
		approval: cfg.ApprovalMode,
		history:  slices.Clone(cfg.History),
		done:     make(chan struct{}),
	}
	r.hub = newHub(&r.logMu, cfg)
	if cfg.Utilities != nil {
		r.util = cfg.Utilities(func(m protocol.Message) { r.publish(m, "") })
	}
	return r, nil
}

func (r *Runtime) now() time.Time { return r.cfg.Now() }

// Start publishes ready and session_info (wire contract §8.1: at startup,
// before any hello).
func (r *Runtime) Start() {
	for _, m := range r.startFrames() {
		r.publish(m, "")
	}
}

// startFrames are the frames Start publishes: ready and session_info.
func (r *Runtime) startFrames() []protocol.Message {
	info := r.sessionInfo()
	return []protocol.Message{
		protocol.Ready{
			ProtocolVersion: protocol.Version,
			Model:           r.cfg.Model,
			Provider:        r.cfg.ProviderName,
			SessionID:       info.SessionID,
			ExecutorType:    r.cfg.Executor,
		},
		info,
	}
}

// sessionInfo is the session_info of the session (session_id null when it
// has none).
func (r *Runtime) sessionInfo() protocol.SessionInfo {
	var sid *string
	if r.cfg.SessionID != "" {
		id := r.cfg.SessionID
		sid = &id
	}
	return protocol.SessionInfo{SessionID: sid, Cwd: r.cfg.Cwd, GitBranch: r.cfg.GitBranch}
}

// Restore starts a restored runtime (Config.Restored) without taking a
// cursor: the start frames, the settings of last (the
// drained session's last init) and then frames (a restore's statuses)
// go into the state the snapshots show, not into the log or the stream.
// The runtime's cursor stays the restored one, N; the
// reset{restored_from_snapshot} published next carries it and the first
// new frame takes N+1 (issue 12 defect 5).
func (r *Runtime) Restore(last *protocol.Init, frames ...protocol.Message) {
	frames = append(r.startFrames(), frames...)
	if last != nil {
		r.applyInit(*last)
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	for _, m := range frames {
		r.state.apply(m)
	}
}

// Handle handles one client message from c. It returns a refusal (an
// *Error: viewer, lease, capability, busy, unknown request id, …) that the
// transport reports to this client; everything else the message causes is
// published. Handle does not wait for a prompt to finish.
func (c *Conn) Handle(ctx context.Context, m protocol.Message) error {
	if err := c.accept(m); err != nil {
		return err
	}
	r := c.r
	switch m := m.(type) {
	case protocol.Hello:
		return c.hello(m)
	case protocol.Init:
		return r.init(m)
	case protocol.Prompt:
		return r.prompt(c, m)
	case protocol.Interrupt:
		r.interrupt(m, reasonsInterrupt)
	case protocol.Cancel:
		r.interrupt(m, reasonsCancel)
	case protocol.Shutdown:
		r.Shutdown()
	case protocol.ToolResponse:
		return r.toolResponse(m)
	case protocol.ClientToolResult:
		return r.clientToolResult(m)
	case protocol.ServerRequestResponse:
		return r.respond(m)
	default:
		return r.utility(ctx, c, m)
	}
	return nil
}

// accept refuses a message c may not send (role, lease, capability), and
// every message once the runtime is shutting down.
func (c *Conn) accept(m protocol.Message) error {
	if err := c.admit(m); err != nil {
		return err
	}
	c.r.mu.Lock()
	shutting := c.r.shutting
	c.r.mu.Unlock()
	if shutting {
		return forbidden(msgShuttingDown)
	}
	return nil
}

// Publish sends an error (or any message) to this connection only, through
// the publish path: how the stdio transport reports refusals and lines
// that fail to decode.
func (c *Conn) Publish(m protocol.Message) { c.r.publish(m, c.id) }

// init applies an init message (wire contract §5, §8.10).
func (r *Runtime) init(m protocol.Init) error {
	var seed []llm.Message
	if len(m.History) > 0 {
		var err error
		if seed, err = initHistory(m.History); err != nil {
			return refuse(CodeBadRequest, protocol.ErrorProtocol, err.Error())
		}
		r.mu.Lock()
		busy := r.run != nil
		r.mu.Unlock()
		if busy {
			return refuse(CodeConflict, protocol.ErrorProtocol, "init.history: "+msgBusy)
		}
	}
	applied := r.applyInit(m)
	if len(seed) > 0 {
		r.mu.Lock()
		r.history = append(r.history, seed...)
		r.mu.Unlock()
		for _, h := range seed {
			r.logMessage(h)
		}
		applied = append(applied, "history")
	}
	msg := "Init received with no changes"
	if len(applied) > 0 {
		msg = "Initialized: " + strings.Join(applied, ", ")
	}
	r.publish(protocol.Status{Message: msg}, "")
	return nil
}

// MaxInitHistory bounds the entries of init.history.
const MaxInitHistory = 10_000

// initHistory decodes init.history, the earlier turns a client seeds the
// conversation with: an array of {"role":"user"|"assistant","content":
// non-empty string}, alternating from "user" and ending with "assistant"
// (the next prompt is the user's). An error names the entry at fault.
func initHistory(raw json.RawMessage) ([]llm.Message, error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("init.history: expected an array of {role, content}: %v", err)
	}
	if len(entries) > MaxInitHistory {
		return nil, fmt.Errorf("init.history: %d entries, at most %d allowed", len(entries), MaxInitHistory)
	}
	out := make([]llm.Message, 0, len(entries))
	for i, e := range entries {
		var h struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		}
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&h); err != nil {
			return nil, fmt.Errorf("init.history[%d]: expected {role, content}: %v", i, err)
		}
		want := llm.RoleUser
		if i%2 == 1 {
			want = llm.RoleAssistant
		}
		switch {
		case h.Role != string(llm.RoleUser) && h.Role != string(llm.RoleAssistant):
			return nil, fmt.Errorf("init.history[%d].role: expected \"user\" or \"assistant\", got %q", i, h.Role)
		case llm.Role(h.Role) != want:
			return nil, fmt.Errorf("init.history[%d].role: expected %q (turns alternate, starting with \"user\"), got %q", i, want, h.Role)
		case h.Content == nil || strings.TrimSpace(*h.Content) == "":
			return nil, fmt.Errorf("init.history[%d].content: expected non-empty text", i)
		}
		out = append(out, llm.Message{Role: want, Parts: []llm.Part{llm.Text(*h.Content)}})
	}
	if n := len(out); n > 0 && out[n-1].Role != llm.RoleAssistant {
		return nil, fmt.Errorf("init.history[%d].role: the last entry must be \"assistant\" (the next prompt is the user's)", n-1)
	}
	return out, nil
}

// applyInit applies init's settings and records it as the last init; it
// returns the names of the settings it changed.
func (r *Runtime) applyInit(m protocol.Init) []string {
	var applied []string
	r.mu.Lock()
	if m.SystemPrompt != nil {
		base := *m.SystemPrompt
		r.sysBase, r.sysAppends = &base, nil
		applied = append(applied, "system_prompt")
	}
	if m.AppendSystemPrompt != nil {
		r.sysAppends = append(r.sysAppends, *m.AppendSystemPrompt)
		applied = append(applied, "append_system_prompt")
	}
	if m.ThinkingLevel != "" {
		r.thinking = llm.ThinkingLevel(m.ThinkingLevel)
		applied = append(applied, "thinking_level")
	}
	if m.ApprovalMode != "" {
		r.approval = m.ApprovalMode
		applied = append(applied, "approval_mode")
	}
	r.mu.Unlock()
	r.logMu.Lock()
	init := m
	init.History = nil // in the conversation now; snapshots stay small
	r.lastInit = &init
	r.logMu.Unlock()
	return applied
}

// systemPrompt returns the system prompt for a run: the default (or what
// init's system_prompt replaced it with), then each append_system_prompt
// after "\n\n".
func (r *Runtime) systemPrompt(ctx context.Context, base *string, appends []string) string {
	var s string
	switch {
	case base != nil:
		s = *base
	case r.cfg.SystemPrompt != nil:
		s = r.cfg.SystemPrompt(ctx)
	default:
		s = r.cfg.System
	}
	for _, a := range appends {
		if s != "" {
			s += "\n\n"
		}
		s += a
	}
	return s
}

// approvalMode returns the current approval mode.
func (r *Runtime) approvalMode() protocol.ApprovalMode {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.approval
}

// The reason strings of interrupt, cancel and shutdown (wire contract §8.9).
type stopReasons struct {
	requests, commands, watches string
}

var (
	reasonsInterrupt = stopReasons{
		requests: "Interrupted before request completed",
		commands: "Interrupted while utility command was still running",
		watches:  "Interrupted while file watch was still running",
	}
	reasonsCancel = stopReasons{
		requests: "Cancelled before request completed",
		commands: "Cancelled while utility command was still running",
		watches:  "Cancelled while file watch was still running",
	}
	reasonsShutdown = stopReasons{
		requests: "Shutdown before request completed",
		commands: "Headless runtime shutdown while utility command was still running",
		watches:  "Headless runtime shutdown while file watch was still running",
	}
)

const (
	reasonRunEnded    = "Run ended before request completed"
	reasonOwnerClosed = "Owning connection closed while utility command was still running"
)

// errInterrupted is the cause of a run cancelled by a client.
var errInterrupted = errors.New("interrupted by the client")

// interrupt cancels pending requests, stops utilities and aborts the run
// (wire contract §8.9), in that order on the wire.
func (r *Runtime) interrupt(m protocol.Message, why stopReasons) {
	cancelled := r.cancelRequests(func(*pendingRequest) bool { return true }, why.requests)
	r.applyClient(m)
	r.mu.Lock()
	util, run := r.util, r.run
	r.mu.Unlock()
	if util != nil {
		util.StopAll(why.commands)
	}
	if run != nil {
		run.cancel(errInterrupted)
	}
	deliverCancelled(cancelled)
}

// Shutdown stops the runtime's work as a shutdown message does: pending
// requests are cancelled, utilities stopped, the run aborted; it returns
// once the run and every in-flight operation have ended (is_ready becomes
// false). Transports call it at end of input too. It is idempotent.
func (r *Runtime) Shutdown() { r.ShutdownThen(nil) }

// ShutdownThen is Shutdown, running last (when not nil) once the work has
// stopped but before Done is closed: what last publishes reaches the
// subscriptions before a transport that disposes of a runtime when Done
// closes (internal/transport/httpattach) closes its stream. The hosted
// runner's drain publishes its final status and snapshot this way. When
// the runtime was already shut down, last runs after Done.
func (r *Runtime) ShutdownThen(last func()) {
	r.mu.Lock()
	if r.shutting {
		r.mu.Unlock()
		<-r.done
		if last != nil {
			last()
		}
		return
	}
	r.shutting = true
	r.mu.Unlock()
	r.interrupt(protocol.Shutdown{}, reasonsShutdown)
	// In-flight file searches and reads end with the runtime's context.
	r.cancel()
	_ = r.WaitIdle(context.Background())
	if last != nil {
		last()
	}
	close(r.done)
}

// SetCloseReason records why the runtime is about to be closed, for
// whoever reports the session's end (the event bus's close_reason, e.g.
// "idle_timeout" when a transport disposes of an idle session).
func (r *Runtime) SetCloseReason(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeReason = reason
}

// CloseReason is what SetCloseReason recorded ("" when nothing).
func (r *Runtime) CloseReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closeReason
}

// Done is closed when a shutdown has completed.
func (r *Runtime) Done() <-chan struct{} { return r.done }

// Close shuts the runtime down if needed, closes the utilities, and ends
// every subscription once it has read the frames already published.
func (r *Runtime) Close() error {
	r.Shutdown()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	util := r.util
	r.mu.Unlock()
	var err error
	if util != nil {
		err = util.Close()
	}
	r.cancel()
	r.closeHub()
	if r.cfg.Release != nil {
		err = errors.Join(err, r.cfg.Release())
	}
	return err
}

// begin and end count work in flight (runs and asynchronous operations)
// for WaitIdle and Shutdown.
func (r *Runtime) beginLocked() {
	if r.busy == 0 {
		r.idle = make(chan struct{})
	}
	r.busy++
}

func (r *Runtime) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy--
	if r.busy == 0 {
		close(r.idle)
		r.idle = nil
	}
}

// WaitIdle waits until no prompt runs and no asynchronous operation (file
// search, file read) is in flight.
func (r *Runtime) WaitIdle(ctx context.Context) error {
	r.mu.Lock()
	idle := r.idle
	r.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Snapshot returns the runtime snapshot (wire contract §7).
func (r *Runtime) Snapshot() protocol.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return r.snapshotLocked()
}

// snapshotLocked builds the snapshot; the caller holds mu and logMu.
func (r *Runtime) snapshotLocked() protocol.Snapshot {
	st := r.state.snapshot(r.cfg.SessionID)
	st.ConnectionCount = len(r.connOrder)
	st.Connections = []protocol.ConnectionState{}
	for _, c := range r.connOrder {
		st.SubscriberCount += len(c.subs)
		st.Connections = append(st.Connections, r.connectionStateLocked(c))
	}
	st.ControllerConnectionID = r.controllerID()
	st.ControllerSubscriptionID = protocol.Null[string]()
	// The connection fields of the state describe the controller, else
	// the first connection (on stdio, the only one).
	c := r.conns[r.controller]
	if c == nil && len(r.connOrder) > 0 {
		c = r.connOrder[0]
	}
	if c != nil {
		st.ClientProtocolVersion, st.ClientInfo, st.Capabilities = c.protocolVersion, c.clientInfo, c.caps
		st.OptOutNotifications, st.ConnectionRole = c.optOutList(), c.effectiveRole()
	}
	cursor := r.cursorLocked()
	var last *protocol.Init
	if r.lastInit != nil {
		li := *r.lastInit
		last = &li
	}
	return protocol.Snapshot{ProtocolVersion: protocol.Version, SessionID: r.cfg.SessionID, Cursor: cursor, LastInit: last, State: st}
}
