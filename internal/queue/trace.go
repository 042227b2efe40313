package queue

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/telemetry"
)

// startJobSpan starts the span of one attempt of job j on this worker,
// continuing the trace context its payload carries (the request that
// queued it), with the job's correlation (its task's submitter and
// metadata, never this process's environment) on it and on every span
// under it, and as the join keys of its model requests (docs/events.md,
// "Traces").
func startJobSpan(ctx context.Context, j store.Job, owner string) (context.Context, trace.Span) {
	ctx = telemetry.FromPayload(ctx, j.Payload)
	c := eventbus.JobCorrelation(j.Payload, j.TaskID, owner)
	ctx = telemetry.WithJoinKeys(ctx, telemetry.JoinKeys{WorkspaceID: c.WorkspaceID, SessionID: c.SessionID, AgentRunID: c.AgentRunID,
		AgentRunStepID: c.AgentRunStepID, Surface: c.Surface, Workload: "job", TaskID: c.TaskID})
	ctx = telemetry.WithAttributes(ctx, c.SpanAttributes()...)
	ctx, span := telemetry.Start(ctx, "job", trace.SpanKindConsumer)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("maestro.job_id", j.ID), attribute.Int("maestro.job.attempt", j.Attempt),
			attribute.String("maestro.worker", j.LeaseOwner), attribute.String("maestro.piece", j.Piece))
	}
	return ctx, span
}

// endJobSpan ends the job's span with its outcome.
func endJobSpan(span trace.Span, res Result) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("maestro.job.state", string(res.State)))
		if res.Error != "" {
			telemetry.Fail(span, res.Error)
		}
	}
	span.End()
}
