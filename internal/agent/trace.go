package agent

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/telemetry"
	"github.com/maestro-run/maestro/internal/tool"
)

// startTurnSpan starts the span of one prompt's turn (docs/events.md,
// "Traces"): the model and tool spans of the turn are its children, and
// it is the child of the session's span (or of a queued job's movement).
//
// The agent's spans get all their attributes, the context's correlation
// (telemetry.StartBare) and their own, in one SetAttributes when they
// end: each call grows the span's attributes, copying them, and a start
// option copies them once more.
func startTurnSpan(ctx context.Context) (context.Context, trace.Span) {
	ctx, span, corr := telemetry.StartBare(ctx, "turn", trace.SpanKindInternal)
	if span.IsRecording() {
		return ctx, corrSpan{Span: span, corr: corr}
	}
	return ctx, span
}

// corrSpan is a recording span with the correlation attributes it is to
// get when it ends.
type corrSpan struct {
	trace.Span
	corr []attribute.KeyValue
}

// endTurnSpan ends a turn's span with its model calls, tool calls,
// tokens and cost.
func endTurnSpan(span trace.Span, res Result, err error) {
	if cs, ok := span.(corrSpan); ok {
		setAttrs(cs.Span, cs.corr, attribute.Int("maestro.turn.model_calls", res.ModelCalls()),
			attribute.Int("maestro.turn.tool_calls", res.Tools.CallsSucceeded+res.Tools.CallsFailed),
			attribute.Int64("gen_ai.usage.input_tokens", res.Usage.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", res.Usage.OutputTokens),
			attribute.Float64("maestro.cost_usd", res.CostUSD))
		span = cs.Span
	}
	telemetry.End(span, err)
}

// startModelSpan starts the span of one model call (docs/events.md,
// "Traces"; the GenAI semantic conventions' keys). The provider sends the
// request under it, so a managed gateway sees its trace context. Its
// attributes are all set when it ends (endModelSpan), in one call: each
// call grows the span's attributes, copying them.
func startModelSpan(ctx context.Context, p llm.Provider) (context.Context, trace.Span) {
	ctx, span, corr := telemetry.StartBare(ctx, "chat "+p.Model(), trace.SpanKindClient)
	if span.IsRecording() {
		return ctx, modelSpan{Span: span, corr: corr, provider: p.Name(), model: p.Model()}
	}
	return ctx, span
}

// attrPool holds the slices a span's attributes are gathered in before
// SetAttributes, which copies them.
var attrPool = sync.Pool{New: func() any { s := make([]attribute.KeyValue, 0, 24); return &s }}

// setAttrs sets corr and attrs on span in one SetAttributes, gathered in
// a pooled slice (attrs itself stays on the caller's stack).
func setAttrs(span trace.Span, corr []attribute.KeyValue, attrs ...attribute.KeyValue) {
	buf := attrPool.Get().(*[]attribute.KeyValue)
	all := append(append((*buf)[:0], corr...), attrs...)
	span.SetAttributes(all...)
	clear(all) // no value kept alive by the pool
	*buf = all[:0]
	attrPool.Put(buf)
}

// modelSpan is a recording model call's span with what its start knew.
type modelSpan struct {
	trace.Span
	corr            []attribute.KeyValue
	provider, model string
}

// endModelSpan ends a model call's span with its model, tokens, cost,
// time to first token and failure.
func endModelSpan(span trace.Span, u protocol.Usage, ttft *int64, failure error) {
	if ms, ok := span.(modelSpan); ok {
		attrs := [...]attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", ms.provider),
			attribute.String("gen_ai.request.model", ms.model), attribute.String("gen_ai.response.model", u.ModelID),
			attribute.Int64("gen_ai.usage.input_tokens", u.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", u.OutputTokens),
			attribute.Int64("maestro.usage.cache_read_tokens", u.CacheReadTokens), attribute.Int64("maestro.usage.cache_write_tokens", u.CacheWriteTokens),
			attribute.Float64("maestro.cost_usd", u.TotalCostUSD), {}, {}}
		n := len(attrs) - 2
		if ttft != nil {
			attrs[n] = attribute.Int64("maestro.ttft_ms", *ttft)
			n++
		}
		if failure != nil {
			attrs[n] = attribute.String("error.type", string(llm.KindOf(failure)))
			n++
		}
		setAttrs(ms.Span, ms.corr, attrs[:n]...)
		span = ms.Span
	}
	telemetry.End(span, failure)
}

// tracedTool runs one call in its span: the tool's name and call id, the
// outcome and the failure's error code (set in one call when it ends).
func (r *run) tracedTool(ctx context.Context, call llm.ToolCall) (tool.Result, error) {
	ctx, span, corr := telemetry.StartBare(ctx, "execute_tool "+call.Name, trace.SpanKindInternal)
	res, err := r.runTool(ctx, call)
	if span.IsRecording() {
		outcome := "succeeded"
		if res.IsError {
			outcome = "failed"
		}
		attrs := [...]attribute.KeyValue{attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", call.Name),
			attribute.String("gen_ai.tool.call.id", call.ID), attribute.String("maestro.tool.outcome", outcome), {}}
		n := len(attrs) - 1
		if res.IsError {
			attrs[n] = attribute.String("maestro.tool.error_code", res.ErrorCode())
			n++
			telemetry.Fail(span, res.ErrorCode())
		}
		setAttrs(span, corr, attrs[:n]...)
	}
	telemetry.End(span, err)
	return res, err
}

// lastToolCall is the id of the last tool result in msgs: the call a
// model request answers ("" when it answers none).
func lastToolCall(msgs []llm.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	parts := msgs[len(msgs)-1].Parts
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i].Type == llm.PartToolResult && parts[i].ToolResult != nil {
			return parts[i].ToolResult.CallID
		}
	}
	return ""
}
