package server

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/telemetry"
)

// traced wraps a route in a server span named after its pattern,
// continuing the request's traceparent (docs/events.md, "Traces"); with
// tracing off the request's own traceparent is still what a queued job
// carries.
func traced(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, span := telemetry.Start(telemetry.ExtractHTTP(r.Context(), r.Header), r.Pattern, trace.SpanKindServer)
		defer span.End()
		h(w, r.WithContext(ctx))
	}
}

// traceTask names the created task and job, and their correlation, on
// the request's span.
func traceTask(r *http.Request, task store.Task, job store.Job) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int64("maestro.job_id", job.ID))
	span.SetAttributes(eventbus.JobCorrelation(job.Payload, task.ID, task.Owner).SpanAttributes()...)
	if task.ID != 0 {
		span.SetAttributes(attribute.String("maestro.task_id", strconv.FormatInt(task.ID, 10)))
	}
}
