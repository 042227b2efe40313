// Package telemetry is Maestro's OpenTelemetry tracing (docs/events.md,
// "Traces"): the OTLP/HTTP exporter configured by the standard OTEL_*
// variables and off when none names an endpoint, the W3C trace context
// carried through the queue, and the span helpers the server, the queue,
// the engine and the agent loop call. With tracing off the global no-op
// provider answers: a span costs a context value and nothing is built.
package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of Maestro's spans.
const Scope = "github.com/maestro-run/maestro"

// Setup installs the tracer provider when the environment names an OTLP
// endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
// OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces) and neither
// OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns it off. The
// exporter speaks OTLP over HTTP (protobuf); OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER are
// read by the SDK, OTEL_BSP_* by the span processor (batcher); a bad value
// of one is refused (checkEnv), as another protocol than http/protobuf
// is. It returns the function that flushes and stops the provider (a
// no-op when tracing is off).
func Setup(ctx context.Context, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	nop := func(context.Context) error { return nil }
	endpoint := Endpoint(getenv)
	if endpoint == "" {
		return nop, nil
	}
	if p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")); p == "" {
		if p = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")); p != "" && p != "http/protobuf" {
			return nop, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL=%s: Maestro exports OTLP over HTTP only (http/protobuf)", p)
		}
	} else if p != "http/protobuf" {
		return nop, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=%s: Maestro exports OTLP over HTTP only (http/protobuf)", p)
	}
	if err := checkEnv(getenv); err != nil {
		return nop, err
	}
	client := otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(endpoint))
	if err := client.Start(ctx); err != nil {
		return nop, fmt.Errorf("tracing: OTLP exporter for %s: %w", endpoint, err)
	}
	exp := &exporter{client: client}
	name := strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	if name == "" {
		name = "maestro"
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", name)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nop, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newBatcher(exp, getenv)), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// Endpoint is the OTLP/HTTP traces URL the environment names, "" when
// tracing is off.
func Endpoint(getenv func(string) string) string {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return ""
	}
	if u := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); u != "" {
		return u
	}
	if u := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); u != "" {
		return strings.TrimSuffix(u, "/") + "/v1/traces"
	}
	return ""
}

// Enabled reports whether spans are recorded (Setup installed the SDK).
func Enabled() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// attrsKey carries the correlation attributes every span started under
// the context gets (WithAttributes), as spanAttrs.
type attrsKey struct{}

// spanAttrs are a context's correlation attributes and the span start
// option that sets them, built once for the context (a session, a job)
// rather than once a span.
type spanAttrs struct {
	attrs []attribute.KeyValue
	opt   trace.SpanStartOption
}

// WithAttributes returns ctx whose spans started by Start carry attrs
// (the correlation: organization, user, workspace, session, run). With
// tracing off ctx is returned as it is.
func WithAttributes(ctx context.Context, attrs ...attribute.KeyValue) context.Context {
	if len(attrs) == 0 || !Enabled() {
		return ctx
	}
	var prev []attribute.KeyValue
	if sa, ok := ctx.Value(attrsKey{}).(*spanAttrs); ok {
		prev = sa.attrs
	}
	all := append(prev[:len(prev):len(prev)], attrs...)
	return context.WithValue(ctx, attrsKey{}, &spanAttrs{attrs: all, opt: trace.WithAttributes(all...)})
}

// kindOpts are the span start options of each span kind, built once.
var kindOpts = func() (opts [trace.SpanKindConsumer + 1]trace.SpanStartOption) {
	for k := range opts {
		opts[k] = trace.WithSpanKind(trace.SpanKind(k))
	}
	return opts
}()

// Start starts a span named name under ctx's span with the correlation
// attributes of ctx. Set further attributes only when span.IsRecording().
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	kindOpt := trace.WithSpanKind(kind)
	if int(kind) >= 0 && int(kind) < len(kindOpts) {
		kindOpt = kindOpts[kind]
	}
	if sa, ok := ctx.Value(attrsKey{}).(*spanAttrs); ok {
		return tracer().Start(ctx, name, kindOpt, sa.opt)
	}
	return tracer().Start(ctx, name, kindOpt)
}

// StartBare starts a span as Start does but without the context's
// correlation attributes: it returns them for the caller to set with
// the span's own when it ends, in one SetAttributes (each SetAttributes
// grows the span's attributes, a copy, and the start option copies them
// once more into the span's configuration). A span started so must get
// them: the agent's model, tool and turn spans (internal/agent/trace.go).
func StartBare(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span, []attribute.KeyValue) {
	kindOpt := trace.WithSpanKind(kind)
	if int(kind) >= 0 && int(kind) < len(kindOpts) {
		kindOpt = kindOpts[kind]
	}
	ctx, span := tracer().Start(ctx, name, kindOpt)
	if sa, ok := ctx.Value(attrsKey{}).(*spanAttrs); ok {
		return ctx, span, sa.attrs
	}
	return ctx, span, nil
}

// sdkTracer is the SDK provider's tracer of Scope, looked up once per
// provider rather than once a span (the provider's Tracer builds its
// configuration and locks its map of tracers).
type sdkTracer struct {
	tp *sdktrace.TracerProvider
	t  trace.Tracer
}

var cachedTracer atomic.Pointer[sdkTracer]

// tracer is the global provider's tracer of Scope.
func tracer() trace.Tracer {
	tp, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	if !ok {
		return otel.Tracer(Scope)
	}
	if c := cachedTracer.Load(); c != nil && c.tp == tp {
		return c.t
	}
	t := tp.Tracer(Scope)
	cachedTracer.Store(&sdkTracer{tp: tp, t: t})
	return t
}

// End ends span, marking it failed with err's text when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Fail marks span failed with msg (a result that is not a Go error: a
// failed job, a tool call that returned an error).
func Fail(span trace.Span, msg string) {
	if span.IsRecording() {
		span.SetStatus(codes.Error, msg)
	}
}

// Carrier is a W3C trace context as stored with a queued job: the
// traceparent and tracestate header values.
type Carrier map[string]string

// Inject returns ctx's trace context, nil when ctx has no valid span.
func Inject(ctx context.Context) Carrier {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := Carrier{}
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(c))
	return c
}

// Extract returns ctx continuing the trace context c (ctx unchanged when
// c holds none or an invalid one).
func Extract(ctx context.Context, c Carrier) context.Context {
	if len(c) == 0 {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(c))
}

// ExtractHTTP returns ctx continuing the request's traceparent header.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
}

// InjectHTTP sets traceparent (and tracestate) on h from ctx's span.
func InjectHTTP(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// FromEnv returns ctx continuing the launcher's trace context
// (TRACEPARENT, TRACESTATE in the environment), as a session started by a
// platform does.
func FromEnv(ctx context.Context, getenv func(string) string) context.Context {
	tp := strings.TrimSpace(getenv("TRACEPARENT"))
	if tp == "" {
		return ctx
	}
	return Extract(ctx, Carrier{"traceparent": tp, "tracestate": strings.TrimSpace(getenv("TRACESTATE"))})
}

// TraceID is ctx's trace id in hex, "" without a valid span.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// PayloadField is the job payload field holding the W3C trace context of
// the request that queued the job (a Carrier), which the worker's spans
// continue.
const PayloadField = "trace_context"

// WithPayload returns payload (a JSON object, or empty) with ctx's trace
// context as PayloadField; payload as it is when ctx has no valid span.
func WithPayload(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	c := Inject(ctx)
	if c == nil {
		return payload, nil
	}
	fields := map[string]json.RawMessage{}
	if len(payload) > 0 {
		if err := json.Unmarshal(payload, &fields); err != nil {
			return payload, fmt.Errorf("add the trace context to the job payload: %w", err)
		}
	}
	fields[PayloadField], _ = json.Marshal(c)
	out, err := json.Marshal(fields)
	if err != nil {
		return payload, fmt.Errorf("add the trace context to the job payload: %w", err)
	}
	return out, nil
}

// FromPayload returns ctx continuing the trace context a job's payload
// carries (PayloadField), ctx unchanged when it carries none.
func FromPayload(ctx context.Context, payload json.RawMessage) context.Context {
	if !bytes.Contains(payload, []byte(`"`+PayloadField+`"`)) {
		return ctx
	}
	var p struct {
		TraceContext Carrier `json:"trace_context"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ctx
	}
	return Extract(ctx, p.TraceContext)
}
