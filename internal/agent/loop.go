package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/telemetry"
	"github.com/maestro-run/maestro/internal/tool"
)

// abortedText is what the model and the client see of a tool call cut
// short by an interrupt.
const abortedText = llm.AbortedToolResult

// aborted returns the Result of a tool call cut short by an interrupt.
func aborted() tool.Result {
	return tool.Result{Content: abortedText, IsError: true, Code: tool.CodeCancelled}
}

// run is the state of one Run.
type run struct {
	a    *Agent
	sink Sink
	res  Result

	mu        sync.Mutex
	toolsUsed map[string]bool
	priceWarn bool

	// window is the model's context window (0: unknown, no compaction).
	window int64
	// measured is the context the last model call occupied, measuredLen
	// the length of the conversation it covered (with its response).
	measured    int64
	measuredLen int
	// retryCompactAt is, after a compaction before a call failed, the
	// size the next request must reach before the loop tries again (0:
	// no failure).
	retryCompactAt int64
}

// Run appends input to history and runs the loop until the turn ends. It
// returns the new messages and accounting even when it fails. Cancelling
// ctx interrupts the stream or the running tools and returns an error
// wrapping ErrCancelled.
func (a *Agent) Run(ctx context.Context, history []llm.Message, input llm.Message, sink Sink) (Result, error) {
	ctx, span := startTurnSpan(ctx)
	res, err := a.turn(ctx, history, input, sink)
	endTurnSpan(span, res, err)
	return res, err
}

// turn is Run under the turn's span.
func (a *Agent) turn(ctx context.Context, history []llm.Message, input llm.Message, sink Sink) (Result, error) {
	r := &run{a: a, sink: sink, toolsUsed: map[string]bool{}}
	r.res.CostKnown = true
	r.res.Tools.ToolsUsed = []string{}
	msgs := slices.Clone(history)
	r.add(&msgs, input)
	r.window = r.contextWindow(ctx)

	for reactive := 0; ; {
		if ctx.Err() != nil {
			return r.res, r.cancelled(ctx)
		}
		if r.res.Iterations >= a.cfg.MaxIterations {
			msg := fmt.Sprintf("Stopped after %d model calls: the iteration limit was reached", a.cfg.MaxIterations)
			r.sink.Event(protocol.Error{Message: msg, ErrorType: protocol.ErrorFatal})
			return r.res, fmt.Errorf("%w (%d)", ErrMaxIterations, a.cfg.MaxIterations)
		}
		if n, ok := r.shouldCompact(msgs); ok {
			switch err := r.compact(ctx, &msgs, n, false); {
			case err == nil, errors.Is(err, errNothingToCompact):
			case ctx.Err() != nil:
				return r.res, r.cancelled(ctx)
			default:
				// Not again before every call: each attempt is a summarising
				// call of up to half the window.
				// Near the window, a tenth more is past it, where no
				// request gets: the next attempt is then at the window
				// (past it already, the provider's rejection is the next).
				r.retryCompactAt = n + r.window/compactRetryShare
				next := fmt.Sprintf("next attempt at about %d tokens, or when the model rejects a request as too long", r.retryCompactAt)
				switch {
				case n >= r.window:
					next = "next attempt when the model rejects a request as too long"
				case r.retryCompactAt > r.window:
					r.retryCompactAt = r.window
					next = fmt.Sprintf("next attempt when a request would fill the context window (%d tokens), or when the model rejects one as too long", r.window)
				}
				r.sink.Event(protocol.Status{Message: fmt.Sprintf("Compaction failed, continuing with the whole conversation (%s): %s", next, err)})
			}
		}
		r.res.Iterations++
		resp, err := r.callModel(ctx, msgs, reactive < maxReactiveCompactions)
		if llm.KindOf(err) == llm.KindContextLength && reactive < maxReactiveCompactions {
			// The provider rejected the request as too long: compact and
			// send it again (not counted as an iteration).
			reactive++
			r.res.Iterations--
			if m := statedMaximum(err); m > 0 && (r.window <= 0 || m < r.window) {
				// The window was unknown (assumed 128,000) or overstated:
				// compaction's budgets are shares of the one the provider
				// states, or what is kept may not fit it either.
				r.window = m
			}
			if cerr := r.compact(ctx, &msgs, 0, true); cerr != nil {
				if ctx.Err() != nil {
					return r.res, r.cancelled(ctx)
				}
				r.sink.Event(providerError(err))
				return r.res, fmt.Errorf("%w (compaction failed: %w)", err, cerr)
			}
			continue
		}
		reactive = 0
		if resp != nil {
			r.add(&msgs, resp.Message)
			r.res.StopReason = resp.StopReason
			if t := resp.Message.TextContent(); t != "" {
				r.res.Final = t
			}
		}
		if err != nil {
			return r.res, err
		}
		calls := resp.Message.ToolCalls()
		if len(calls) == 0 {
			return r.res, nil
		}
		results, stop, err := r.runTools(ctx, calls)
		r.add(&msgs, llm.Message{Role: llm.RoleUser, Parts: results})
		if err != nil {
			return r.res, err
		}
		if stop {
			r.res.StoppedByTool = true
			return r.res, nil
		}
	}
}

func (r *run) add(msgs *[]llm.Message, m llm.Message) {
	*msgs = append(*msgs, m)
	r.res.Messages = append(r.res.Messages, m)
	r.sink.Message(m)
}

func (r *run) cancelled(ctx context.Context) error {
	r.sink.Event(protocol.Error{Message: "Operation aborted: the run was interrupted", ErrorType: protocol.ErrorCancelled})
	return fmt.Errorf("%w: %w", ErrCancelled, context.Cause(ctx))
}

// callModel streams one model call as response_start/chunk/end. On failure
// it returns the partial assistant message (text shown so far), if any.
// A failure the loop answers by compacting (the prompt was too long, and
// mayCompact) is returned without an error event.
func (r *run) callModel(ctx context.Context, msgs []llm.Message, mayCompact bool) (*llm.Response, error) {
	cfg := r.a.cfg
	start := cfg.Now()
	id := newResponseID(start)
	r.sink.Event(protocol.ResponseStart{ResponseID: id})

	req := r.request(msgs)
	ctx, span := startModelSpan(telemetry.WithTurn(ctx, id, lastToolCall(msgs)), cfg.Provider)
	var (
		ttft    *int64
		partial strings.Builder
		resp    *llm.Response
		failure error
	)
	for ev, err := range cfg.Provider.Stream(ctx, req) {
		if err != nil {
			failure = err
			break
		}
		switch ev.Type {
		case llm.EventTextDelta, llm.EventThinkingDelta:
			if ev.Delta == "" {
				continue
			}
			if ttft == nil {
				d := cfg.Now().Sub(start).Milliseconds()
				ttft = &d
			}
			thinking := ev.Type == llm.EventThinkingDelta
			if !thinking {
				partial.WriteString(ev.Delta)
			}
			r.sink.Event(protocol.ResponseChunk{ResponseID: id, Content: ev.Delta, IsThinking: thinking})
		case llm.EventDone:
			resp = ev.Response
		}
	}
	if failure == nil && resp == nil {
		failure = &llm.Error{Kind: llm.KindStream, Provider: cfg.Provider.Name(), Message: "the stream ended without a final response"}
	}

	var usage llm.Usage
	model := cfg.Provider.Model()
	if resp != nil {
		usage = resp.Usage
		if resp.Model != "" {
			model = resp.Model
		}
	}
	pu := r.account(model, usage)
	r.sink.Event(protocol.ResponseEnd{
		ResponseID:   id,
		Usage:        pu,
		ToolsSummary: r.toolsSummary(),
		DurationMS:   cfg.Now().Sub(start).Milliseconds(),
		TTFTMS:       ttft,
	})
	endModelSpan(span, pu, ttft, failure)
	if resp != nil {
		r.measured, r.measuredLen = usage.ContextTokens(), len(msgs)+1
		if cfg.OnContext != nil {
			cfg.OnContext(ContextUsage{Tokens: usage.ContextTokens(), Window: r.window})
		}
	}

	if failure != nil {
		var out *llm.Response
		if partial.Len() > 0 {
			out = &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text(partial.String())}}, StopReason: llm.StopAborted}
		}
		if ctx.Err() != nil || llm.KindOf(failure) == llm.KindCancelled {
			return out, r.cancelled(ctx)
		}
		if llm.KindOf(failure) == llm.KindContextLength && mayCompact && out == nil {
			return nil, fmt.Errorf("model call: %w", failure)
		}
		r.sink.Event(providerError(failure))
		return out, fmt.Errorf("model call: %w", failure)
	}
	return resp, nil
}

// request is the model request over msgs.
func (r *run) request(msgs []llm.Message) *llm.Request {
	cfg := r.a.cfg
	return &llm.Request{
		System:    cfg.System,
		Messages:  msgs,
		Tools:     cfg.Tools.Specs(),
		MaxTokens: cfg.MaxTokens,
		Thinking:  cfg.Thinking,
	}
}

// contextWindow is Config.ContextWindow, else what the provider says; a
// notice the provider gives (an assumed window) goes out as a status.
func (r *run) contextWindow(ctx context.Context) int64 {
	if n := r.a.cfg.ContextWindow; n != 0 {
		return max(n, 0)
	}
	w := llm.ContextWindowOf(ctx, r.a.cfg.Provider)
	if w.Notice != "" {
		r.sink.Event(protocol.Status{Message: w.Notice})
	}
	return w.Tokens
}

// account adds usage to the run and converts it to the protocol's shape.
func (r *run) account(model string, u llm.Usage) protocol.Usage {
	r.res.Usage.Add(u)
	cost, known := llm.Cost(model, u)
	provider := r.a.cfg.Provider.Name()
	if !known && provider != "replay" && u.Total() > 0 {
		r.res.CostKnown = false
		if !r.priceWarn {
			r.priceWarn = true
			if r.a.cfg.Notices.First("pricing unknown: " + provider + "/" + model) {
				r.sink.Event(protocol.Status{Message: fmt.Sprintf("Pricing unknown for model %s: total_cost_usd is reported as 0", model)})
			}
		}
	}
	r.res.CostUSD += cost
	return protocol.Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens,
		TotalTokens:      u.Total(),
		TotalCostUSD:     cost,
		ModelID:          model,
		Provider:         provider,
	}
}

// toolsSummary covers every tool call of this run so far.
func (r *run) toolsSummary() protocol.ToolsSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.res.Tools
	s.ToolsUsed = slices.Clone(s.ToolsUsed)
	s.SummaryLabels = slices.Clone(s.SummaryLabels)
	return s
}

// maxSummaryLabels bounds tools_summary.summary_labels.
const maxSummaryLabels = 20

// countTool counts an ended call by outcome and keeps its summary label
// (the one its approval request carries: "Write notes.txt", "Run go test
// ./..."), unique and in order of ending, at most maxSummaryLabels.
func (r *run) countTool(call llm.ToolCall, ok bool) {
	label := Describe(call.Name, call.Input).Summary
	name := call.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if ts := &r.res.Tools; label != "" && len(ts.SummaryLabels) < maxSummaryLabels && !slices.Contains(ts.SummaryLabels, label) {
		ts.SummaryLabels = append(ts.SummaryLabels, label)
	}
	if !r.toolsUsed[name] {
		r.toolsUsed[name] = true
		r.res.Tools.ToolsUsed = append(r.res.Tools.ToolsUsed, name)
		slices.Sort(r.res.Tools.ToolsUsed)
	}
	if ok {
		r.res.Tools.CallsSucceeded++
	} else {
		r.res.Tools.CallsFailed++
	}
}

// providerError maps a model failure to a protocol error event. Agent
// errors are never fatal to the connection (wire contract §8.4).
func providerError(err error) protocol.Error {
	typ := protocol.ErrorFatal
	if e, ok := errors.AsType[*llm.Error](err); ok {
		switch {
		case e.Kind == llm.KindCancelled:
			typ = protocol.ErrorCancelled
		case e.Transient():
			typ = protocol.ErrorTransient
		}
	}
	return protocol.Error{Message: err.Error(), ErrorType: typ}
}

// runTools runs one batch of calls: consecutive read-only calls
// concurrently, every other call alone, in order. It returns one
// tool_result part per call, in call order.
func (r *run) runTools(ctx context.Context, calls []llm.ToolCall) ([]llm.Part, bool, error) {
	results := make([]llm.Part, len(calls))
	stop := false
	var runErr error
	for i := 0; i < len(calls); {
		j := i + 1
		if r.readOnly(calls[i]) {
			for j < len(calls) && r.readOnly(calls[j]) {
				j++
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for k := i; k < j; k++ {
			wg.Go(func() {
				res, err := r.tracedTool(ctx, calls[k])
				mu.Lock()
				defer mu.Unlock()
				results[k] = llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{
					CallID: calls[k].ID, Name: calls[k].Name, Content: res.Content, IsError: res.IsError,
				}}
				stop = stop || res.StopTurn
				if err != nil && runErr == nil {
					runErr = err
				}
			})
		}
		wg.Wait()
		i = j
		if runErr != nil {
			// Every remaining call is answered so the history stays valid,
			// and goes call, start, end as every call does (wire contract
			// §8.8): an end of a call that never started confused clients.
			for k := j; k < len(calls); k++ {
				r.sink.Event(protocol.ToolCall{CallID: calls[k].ID, Tool: calls[k].Name, Args: args(calls[k].Input)})
				r.sink.Event(protocol.ToolStart{CallID: calls[k].ID})
				r.endTool(calls[k], aborted(), "", false)
				results[k] = llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{
					CallID: calls[k].ID, Name: calls[k].Name, Content: abortedText, IsError: true,
				}}
			}
			break
		}
	}
	if runErr != nil {
		if errors.Is(runErr, ErrCancelled) || ctx.Err() != nil {
			return results, stop, r.cancelled(ctx)
		}
		return results, stop, runErr
	}
	return results, stop, nil
}

func (r *run) readOnly(call llm.ToolCall) bool {
	t, ok := r.a.cfg.Tools.Get(call.Name)
	return ok && t.ReadOnly() && !(r.a.cfg.Approve != nil && r.a.cfg.NeedsApproval(t, call))
}

// args returns the call's input as a JSON value for the protocol.
func args(in json.RawMessage) json.RawMessage {
	if len(in) == 0 || !json.Valid(in) {
		return json.RawMessage("{}")
	}
	return in
}

// endTool closes a call. The wire contract's tool_end has no text field:
// a failure's reason goes out as the call's one tool_output when the tool
// streamed nothing (a tool that streamed, such as Bash, has shown its
// output already), then tool_end with the failure's error_code.
func (r *run) endTool(call llm.ToolCall, res tool.Result, approvalID string, streamed bool) tool.Result {
	if reason := strings.TrimSpace(res.Content); res.IsError && !streamed && reason != "" {
		r.sink.Event(protocol.ToolOutput{CallID: call.ID, Content: reason})
	}
	r.sink.Event(protocol.ToolEnd{CallID: call.ID, Success: !res.IsError, ErrorCode: res.ErrorCode(), ApprovalRequestID: approvalID})
	r.countTool(call, !res.IsError)
	return res
}

// runTool runs one call with its events. A Go error means the run must
// stop (cancellation or abort).
func (r *run) runTool(ctx context.Context, call llm.ToolCall) (tool.Result, error) {
	cfg := r.a.cfg
	t, ok := cfg.Tools.Get(call.Name)
	needs := ok && cfg.Approve != nil && cfg.NeedsApproval(t, call)
	r.sink.Event(protocol.ToolCall{CallID: call.ID, Tool: call.Name, Args: args(call.Input), RequiresApproval: needs})

	streamed := false
	end := func(res tool.Result, approvalID string) tool.Result {
		return r.endTool(call, res, approvalID, streamed)
	}
	if !ok {
		res := tool.Failf(tool.CodeUnknownTool, "unknown tool %q; available tools: %s", call.Name, strings.Join(cfg.Tools.Names(), ", "))
		r.sink.Event(protocol.ToolStart{CallID: call.ID})
		return end(res, ""), nil
	}
	approvalID := ""
	if needs {
		ap, err := cfg.Approve(ctx, ApprovalRequest{CallID: call.ID, Tool: call.Name, Args: args(call.Input)})
		approvalID = ap.RequestID
		if err != nil || ctx.Err() != nil {
			r.sink.Event(protocol.ToolStart{CallID: call.ID})
			return end(aborted(), approvalID), fmt.Errorf("%w: approval: %w", ErrCancelled, errors.Join(err, ctx.Err()))
		}
		if !ap.Approved {
			reason := ap.Reason
			if reason == "" {
				reason = "Denied by user"
			}
			r.sink.Event(protocol.ToolStart{CallID: call.ID})
			return end(tool.Failf(tool.CodeDenied, "Tool call denied: %s", reason), approvalID), nil
		}
	}
	r.sink.Event(protocol.ToolStart{CallID: call.ID})
	for attempt := 1; ; attempt++ {
		res, err := t.Run(ctx, tool.Call{ID: call.ID, Input: call.Input, Output: func(chunk string) {
			streamed = true
			r.sink.Event(protocol.ToolOutput{CallID: call.ID, Content: chunk})
		}})
		if ctx.Err() != nil {
			return end(aborted(), approvalID), fmt.Errorf("%w: %w", ErrCancelled, context.Cause(ctx))
		}
		if err != nil {
			// An infrastructure failure of one tool is shown to the model.
			return end(tool.Errorf("%s failed: %v", call.Name, err), approvalID), nil
		}
		if !res.IsError || cfg.OnToolFailure == nil {
			return end(res, approvalID), nil
		}
		action, derr := cfg.OnToolFailure(ctx, ToolFailure{CallID: call.ID, Tool: call.Name, Args: args(call.Input), Error: res.Content, Attempt: attempt})
		switch {
		case derr != nil || ctx.Err() != nil:
			end(res, approvalID)
			return res, fmt.Errorf("%w: tool retry decision: %w", ErrCancelled, errors.Join(derr, ctx.Err()))
		case action == RetryRetry:
			continue
		case action == RetryAbort:
			end(res, approvalID)
			return res, fmt.Errorf("%w: %s: %s", ErrAborted, call.Name, res.Content)
		default:
			return end(res, approvalID), nil
		}
	}
}
