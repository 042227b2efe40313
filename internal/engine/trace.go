package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-run/maestro/internal/telemetry"
)

// tracedMovement runs the current movement in its span (docs/events.md,
// "Traces"): the model and tool spans of its loop are its children.
func (r *run) tracedMovement(ctx context.Context) (*decision, error) {
	ctx, span := telemetry.Start(ctx, "movement "+r.st.Movement, trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("maestro.movement", r.st.Movement), attribute.String("maestro.piece", r.st.Piece),
			attribute.String("maestro.run_id", r.st.RunID), attribute.Int("maestro.movement.number", r.st.Movements))
	}
	d, err := r.runMovement(ctx)
	if d != nil && d.next != "" && span.IsRecording() {
		span.SetAttributes(attribute.String("maestro.movement.next", d.next))
	}
	telemetry.End(span, err)
	return d, err
}
