package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// bodies is an OTLP/HTTP endpoint keeping the request bodies it gets.
type bodies struct {
	mu  sync.Mutex
	got [][]byte
}

func (b *bodies) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.got = append(b.got, data)
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/traces"
}

func (b *bodies) request(t *testing.T) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) != 1 {
		t.Fatalf("%d export requests, want 1", len(b.got))
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b.got[0], &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// The exporter sends the same OTLP request as otlptrace's exporter for
// spans of every shape: attributes of every type (zero values, and
// values longer than a one-byte length), events, links, a remote
// parent, a failed status, two scopes, every kind.
func TestExporterMatchesOTLP(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	res := resource.NewSchemaless(attribute.String("service.name", "maestro"), attribute.Int("n", 1))
	// Limits that drop attributes, events and links (their counts).
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit, limits.EventCountLimit, limits.LinkCountLimit = 12, 1, 1
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(limits))
	ctx := context.Background()
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, Remote: true})
	a := tp.Tracer(Scope)
	b := tp.Tracer("other", trace.WithInstrumentationVersion("1.2"), trace.WithInstrumentationAttributes(attribute.Bool("x", true)))
	ctx, root := a.Start(trace.ContextWithRemoteSpanContext(ctx, remote), "session", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("l", "v")}}, trace.Link{SpanContext: remote}))
	_, child := b.Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("s", "v"), attribute.Int64("i", -3), attribute.Float64("f", 1.5), attribute.Bool("b", true),
		attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.Float64Slice("fs", []float64{0.5}), attribute.BoolSlice("bs", []bool{true, false}),
		attribute.String("long", strings.Repeat("x", 300)), attribute.Int64("zero", 0), attribute.String("empty", ""),
		attribute.ByteSlice("bytes", []byte{1, 2}), attribute.Slice("mixed", attribute.IntValue(1), attribute.StringValue("a")),
		attribute.Map("map", attribute.String("k", strings.Repeat("y", 200)), attribute.Bool("f", false))))
	child.AddEvent("ev", trace.WithAttributes(attribute.String("k", "v")), trace.WithTimestamp(time.Unix(5, 6)))
	child.AddEvent("dropped")
	child.SetStatus(codes.Error, "failed")
	child.End()
	for _, k := range []trace.SpanKind{trace.SpanKindInternal, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindUnspecified} {
		_, s := a.Start(ctx, "k", trace.WithSpanKind(k))
		s.SetStatus(codes.Ok, "")
		s.End()
	}
	root.End()
	spans := rec.Ended()

	var want, got bodies
	std, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(want.start(t)))
	if err != nil {
		t.Fatal(err)
	}
	client := otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(got.start(t)))
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ours := &exporter{client: client}
	if err := std.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	// Twice: the second export reuses the first one's buffers.
	if err := ours.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	got.got = nil
	if err := ours.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	w, g := want.request(t), got.request(t)
	if !proto.Equal(w, g) {
		t.Errorf("export request differs from otlptrace's:\n got %v\nwant %v", g, w)
	}
	if n := len(g.ResourceSpans[0].ScopeSpans); n != 2 {
		t.Errorf("%d scopes, want 2", n)
	}
	for _, ss := range g.ResourceSpans[0].ScopeSpans {
		for _, s := range ss.Spans {
			if s.Name == "chat m" && (s.DroppedAttributesCount == 0 || s.DroppedEventsCount == 0) ||
				s.Name == "session" && s.DroppedLinksCount == 0 {
				t.Errorf("nothing dropped: %v", s)
			}
		}
	}
	if err := errors.Join(std.Shutdown(ctx), ours.Shutdown(ctx)); err != nil {
		t.Fatal(err)
	}
}
