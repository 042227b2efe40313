// Package agent is Maestro's native agent loop: it streams a model's
// output as protocol events, runs the tool calls the model asks for
// (read-only calls concurrently, mutating calls in order), feeds the results
// back, and repeats until the model ends its turn, a tool ends it, the
// iteration cap is reached, or the context is cancelled.
//
// The loop knows nothing of transports: it reports everything through a
// Sink, which the session log, the terminal renderer and the headless
// runtime implement.
package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// Sink receives what a run produces. Both methods may be called from
// several goroutines (concurrent read-only tools) and must be safe for it.
type Sink interface {
	// Event receives every protocol event, in order per call.
	Event(m protocol.Message)
	// Message receives every conversation message as it becomes final:
	// the user's input, each assistant message, each batch of tool results.
	Message(m llm.Message)
}

// ApprovalRequest asks whether a tool call may run.
type ApprovalRequest struct {
	CallID string
	Tool   string
	Args   []byte
}

// Approval is the answer to an ApprovalRequest.
type Approval struct {
	Approved bool
	// Reason is shown to the model when denied.
	Reason string
	// RequestID links tool_end.approval_request_id to the request, if any.
	RequestID string
}

// Approver decides on tool calls that need approval. It blocks until a
// decision is made or ctx ends.
type Approver func(ctx context.Context, req ApprovalRequest) (Approval, error)

// RetryAction is the decision after a failed tool call.
type RetryAction string

const (
	RetryRetry RetryAction = "retry"
	RetrySkip  RetryAction = "skip"
	RetryAbort RetryAction = "abort"
)

// ToolFailure describes a failed tool call offered for a retry decision.
type ToolFailure struct {
	CallID  string
	Tool    string
	Args    []byte
	Error   string
	Attempt int
}

// ContextUsage is how full the model's context window was after a call.
type ContextUsage struct {
	// Tokens is the prompt plus output of the last model call.
	Tokens int64
	// Window is the model's context window, 0 when unknown.
	Window int64
}

// Fraction is Tokens/Window, 0 when the window is unknown.
func (c ContextUsage) Fraction() float64 {
	if c.Window <= 0 {
		return 0
	}
	return float64(c.Tokens) / float64(c.Window)
}

// Config configures an Agent. Provider is required.
type Config struct {
	Provider llm.Provider
	// Tools offered to the model; nil offers none.
	Tools *tool.Set
	// System is the system prompt.
	System string
	// MaxIterations caps model calls per Run. Default 50.
	MaxIterations int
	// MaxTokens caps each response; 0 is the provider's default.
	MaxTokens int
	Thinking  llm.ThinkingLevel
	// Approve, when set, is asked before every tool call for which
	// NeedsApproval is true. Nil approves everything.
	Approve Approver
	// NeedsApproval decides which calls need approval. Default: every
	// tool that is not read-only.
	NeedsApproval func(t tool.Tool, call llm.ToolCall) bool
	// OnToolFailure, when set, is asked what to do after a failed tool
	// call (retry, skip, abort). Nil skips (the model sees the failure).
	OnToolFailure func(ctx context.Context, f ToolFailure) (RetryAction, error)
	// OnContext, when set, is told the context occupancy after each model
	// call (the workflow engine's context pressure uses it).
	OnContext func(ContextUsage)
	// ContextWindow overrides the model's context window (0: what the
	// provider says, see llm.ContextWindowOf).
	ContextWindow int64
	// CompactAt is the share of the context window the next request may
	// reach before the older turns are summarised (compacted) first:
	// 0 means DefaultCompactAt, a negative value compacts only when the
	// provider rejects a request as too long. Compaction needs a known
	// window.
	CompactAt float64
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Notices, when set, is shared by the agents of one run (a piece's
	// movements and their reminders): a notice such as unknown pricing
	// is given once per run, not once per agent run. Nil: once per Run.
	Notices *Notices
}

// Notices remembers which notices were given; the zero value is ready
// and safe for concurrent use.
type Notices struct {
	mu   sync.Mutex
	seen map[string]bool
}

// First reports whether the notice key is given for the first time (and
// marks it given); always true on a nil *Notices.
func (n *Notices) First(key string) bool {
	if n == nil {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[key] {
		return false
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	n.seen[key] = true
	return true
}

// Agent runs the loop. It is safe to call Run again with the returned
// history; one Run at a time.
type Agent struct {
	cfg Config
}

// New returns an Agent.
func New(cfg Config) *Agent {
	if cfg.MaxIterations <= 0 {
		cfg.MaxIterations = 50
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NeedsApproval == nil {
		cfg.NeedsApproval = func(t tool.Tool, _ llm.ToolCall) bool { return !t.ReadOnly() }
	}
	return &Agent{cfg: cfg}
}

// Result summarises a Run.
type Result struct {
	// Messages are the messages this run added to the history, input
	// included.
	Messages []llm.Message
	// Usage sums the usage of every model call.
	Usage llm.Usage
	// CostUSD sums the priced cost; CostKnown is false if any call's model
	// was not in the pricing catalogue.
	CostUSD   float64
	CostKnown bool
	// Iterations counts the loop's model calls (the iteration cap counts
	// these); SummaryCalls the calls that summarised the conversation for a
	// compaction. ModelCalls is both.
	Iterations   int
	SummaryCalls int
	// Final is the text of the last assistant message.
	Final string
	// StopReason of the last model call.
	StopReason llm.StopReason
	// StoppedByTool is true when a tool asked to end the turn.
	StoppedByTool bool
	// Tools counts tool calls by outcome.
	Tools protocol.ToolsSummary
	// Compactions counts the compactions of the conversation; Messages
	// then holds each summary (apply them with llm.AppendHistory).
	Compactions int
}

// ModelCalls counts every model call of the run: the loop's and
// compaction's summarising calls, whose usage Usage includes.
func (r Result) ModelCalls() int { return r.Iterations + r.SummaryCalls }

// Errors returned by Run (wrapped; test with errors.Is).
var (
	// ErrCancelled: the context was cancelled (interrupt).
	ErrCancelled = errors.New("run cancelled")
	// ErrMaxIterations: the iteration cap was reached.
	ErrMaxIterations = errors.New("maximum iterations reached")
	// ErrAborted: a tool failure was answered with abort.
	ErrAborted = errors.New("run aborted after a tool failure")
)

// newResponseID returns an id like resp_<epochms>_<6 base36>.
func newResponseID(now time.Time) string { return protocol.NewID("resp", 6, now) }

// Tee returns a Sink that forwards to every sink in order.
func Tee(sinks ...Sink) Sink { return tee(sinks) }

type tee []Sink

func (t tee) Event(m protocol.Message) {
	for _, s := range t {
		s.Event(m)
	}
}

func (t tee) Message(m llm.Message) {
	for _, s := range t {
		s.Message(m)
	}
}
