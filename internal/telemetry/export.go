package telemetry

import (
	"context"
	"fmt"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// exporter is the OTLP exporter of otlptrace (an otlptrace.Client, the
// OTLP/HTTP one configured by OTEL_EXPORTER_OTLP_*, uploads the
// messages) with its own conversion of the spans to OTLP messages: the
// same messages (TestExporterMatchesOTLP), but a batch's spans,
// attributes and values are allocated together, a few slices a batch,
// where otlptrace allocates three objects per attribute and four per
// span, which the collector then has to collect (docs/events.md,
// "Figures").
type exporter struct {
	client otlptrace.Client
}

func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	rs := protoSpans(spans)
	if len(rs) == 0 {
		return nil
	}
	if err := e.client.UploadTraces(ctx, rs); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

func (e *exporter) Shutdown(ctx context.Context) error { return e.client.Stop(ctx) }

// arena allocates a batch's OTLP messages from slices sized for it.
type arena struct {
	kvs     []commonpb.KeyValue
	kvps    []*commonpb.KeyValue
	anys    []commonpb.AnyValue
	strs    []commonpb.AnyValue_StringValue
	ints    []commonpb.AnyValue_IntValue
	doubles []commonpb.AnyValue_DoubleValue
	bools   []commonpb.AnyValue_BoolValue
}

// take returns n fresh elements of *s (its capacity was sized for
// them; a shortfall allocates).
func take[T any](s *[]T, n int) []T {
	if len(*s)+n > cap(*s) {
		*s = make([]T, 0, max(n, 2*cap(*s)))
	}
	out := (*s)[len(*s) : len(*s)+n : len(*s)+n]
	*s = (*s)[:len(*s)+n]
	return out
}

func (a *arena) keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	kvs, ps := take(&a.kvs, len(attrs)), take(&a.kvps, len(attrs))
	for i, kv := range attrs {
		kvs[i].Key = string(kv.Key)
		kvs[i].Value = a.value(kv.Value)
		ps[i] = &kvs[i]
	}
	return ps
}

// value converts v as otlptrace does (tracetransform.Value).
func (a *arena) value(v attribute.Value) *commonpb.AnyValue {
	av := &take(&a.anys, 1)[0]
	switch v.Type() {
	case attribute.STRING:
		s := &take(&a.strs, 1)[0]
		s.StringValue = v.AsString()
		av.Value = s
	case attribute.INT64:
		s := &take(&a.ints, 1)[0]
		s.IntValue = v.AsInt64()
		av.Value = s
	case attribute.FLOAT64:
		s := &take(&a.doubles, 1)[0]
		s.DoubleValue = v.AsFloat64()
		av.Value = s
	case attribute.BOOL:
		s := &take(&a.bools, 1)[0]
		s.BoolValue = v.AsBool()
		av.Value = s
	case attribute.BOOLSLICE:
		vals := v.AsBoolSlice()
		av.Value = a.array(len(vals), func(i int) attribute.Value { return attribute.BoolValue(vals[i]) })
	case attribute.INT64SLICE:
		vals := v.AsInt64Slice()
		av.Value = a.array(len(vals), func(i int) attribute.Value { return attribute.Int64Value(vals[i]) })
	case attribute.FLOAT64SLICE:
		vals := v.AsFloat64Slice()
		av.Value = a.array(len(vals), func(i int) attribute.Value { return attribute.Float64Value(vals[i]) })
	case attribute.STRINGSLICE:
		vals := v.AsStringSlice()
		av.Value = a.array(len(vals), func(i int) attribute.Value { return attribute.StringValue(vals[i]) })
	case attribute.SLICE:
		vals := v.AsSlice()
		av.Value = a.array(len(vals), func(i int) attribute.Value { return vals[i] })
	case attribute.BYTESLICE:
		av.Value = &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}
	case attribute.MAP:
		av.Value = &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: a.keyValues(v.AsMap())}}
	case attribute.EMPTY:
	default:
		s := &take(&a.strs, 1)[0]
		s.StringValue = "INVALID"
		av.Value = s
	}
	return av
}

// array is an array value of n elements (rare: not from the arena's
// sized slices, but through them).
func (a *arena) array(n int, at func(int) attribute.Value) *commonpb.AnyValue_ArrayValue {
	vals := make([]*commonpb.AnyValue, n)
	for i := range vals {
		vals[i] = a.value(at(i))
	}
	return &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}
}

// count adds what attrs need to the arena's sizes.
func (a *arenaSize) count(attrs []attribute.KeyValue) {
	a.kvs += len(attrs)
	for _, kv := range attrs {
		switch kv.Value.Type() {
		case attribute.STRING:
			a.strs++
		case attribute.INT64:
			a.ints++
		case attribute.FLOAT64:
			a.doubles++
		case attribute.BOOL:
			a.bools++
		}
	}
}

type arenaSize struct{ kvs, strs, ints, doubles, bools int }

func newArena(n arenaSize) *arena {
	return &arena{
		kvs: make([]commonpb.KeyValue, 0, n.kvs), kvps: make([]*commonpb.KeyValue, 0, n.kvs),
		anys: make([]commonpb.AnyValue, 0, n.kvs), strs: make([]commonpb.AnyValue_StringValue, 0, n.strs),
		ints: make([]commonpb.AnyValue_IntValue, 0, n.ints), doubles: make([]commonpb.AnyValue_DoubleValue, 0, n.doubles),
		bools: make([]commonpb.AnyValue_BoolValue, 0, n.bools),
	}
}

// protoSpans converts spans to OTLP messages as otlptrace does
// (tracetransform.Spans): one ResourceSpans per resource, one
// ScopeSpans per resource and scope, spans in their order.
func protoSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	var size arenaSize
	live := 0
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		live++
		size.count(sd.Attributes())
	}
	if live == 0 {
		return nil
	}
	a := newArena(size)
	pbs := make([]tracepb.Span, live)
	statuses := make([]tracepb.Status, live)
	ids := make([]byte, 0, live*(16+8+8))

	type scopeKey struct {
		r  attribute.Distinct
		is instrumentation.Scope
	}
	var rss []*tracepb.ResourceSpans
	resources := map[attribute.Distinct]*tracepb.ResourceSpans{}
	scopes := map[scopeKey]*tracepb.ScopeSpans{}
	i := 0
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		s := &pbs[i]
		sc := sd.SpanContext()
		tid, sid := sc.TraceID(), sc.SpanID()
		ids = append(ids, tid[:]...)
		s.TraceId = ids[len(ids)-16 : len(ids) : len(ids)]
		ids = append(ids, sid[:]...)
		s.SpanId = ids[len(ids)-8 : len(ids) : len(ids)]
		s.TraceState = sc.TraceState().String()
		st := sd.Status()
		statuses[i].Code, statuses[i].Message = statusCode(st.Code), st.Description
		s.Status = &statuses[i]
		s.StartTimeUnixNano = uint64(max(0, sd.StartTime().UnixNano())) //nolint:gosec // not negative
		s.EndTimeUnixNano = uint64(max(0, sd.EndTime().UnixNano()))     //nolint:gosec // not negative
		s.Links = a.links(sd.Links())
		s.Kind = spanKind(sd.SpanKind())
		s.Name = sd.Name()
		s.Attributes = a.keyValues(sd.Attributes())
		s.Events = a.events(sd.Events())
		s.DroppedAttributesCount = clampUint32(sd.DroppedAttributes())
		s.DroppedEventsCount = clampUint32(sd.DroppedEvents())
		s.DroppedLinksCount = clampUint32(sd.DroppedLinks())
		parent := sd.Parent()
		if psid := parent.SpanID(); psid.IsValid() {
			ids = append(ids, psid[:]...)
			s.ParentSpanId = ids[len(ids)-8 : len(ids) : len(ids)]
		}
		s.Flags = spanFlags(sc.TraceFlags(), parent)
		i++

		res := sd.Resource()
		rkey := res.Equivalent()
		scope := sd.InstrumentationScope()
		k := scopeKey{r: rkey, is: scope}
		ss, known := scopes[k]
		if !known {
			// Sized for the usual case: one resource, one scope.
			ss = &tracepb.ScopeSpans{Scope: instrumentationScope(scope), Spans: make([]*tracepb.Span, 0, live-i+1), SchemaUrl: scope.SchemaURL}
			scopes[k] = ss
		}
		ss.Spans = append(ss.Spans, s)
		rs, ok := resources[rkey]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: resourceProto(res), ScopeSpans: []*tracepb.ScopeSpans{ss}, SchemaUrl: res.SchemaURL()}
			resources[rkey] = rs
			rss = append(rss, rs)
			continue
		}
		if !known {
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
	}
	return rss
}

func (a *arena) links(links []sdktrace.Link) []*tracepb.Span_Link {
	if len(links) == 0 {
		return nil
	}
	out := make([]*tracepb.Span_Link, 0, len(links))
	for _, l := range links {
		tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out = append(out, &tracepb.Span_Link{
			TraceId: tid[:], SpanId: sid[:], Attributes: a.keyValues(l.Attributes),
			DroppedAttributesCount: clampUint32(l.DroppedAttributeCount),
			Flags:                  spanFlags(l.SpanContext.TraceFlags(), l.SpanContext),
		})
	}
	return out
}

func (a *arena) events(es []sdktrace.Event) []*tracepb.Span_Event {
	if len(es) == 0 {
		return nil
	}
	out := make([]*tracepb.Span_Event, len(es))
	for i, e := range es {
		out[i] = &tracepb.Span_Event{
			Name: e.Name, TimeUnixNano: uint64(max(0, e.Time.UnixNano())), //nolint:gosec // not negative
			Attributes: a.keyValues(e.Attributes), DroppedAttributesCount: clampUint32(e.DroppedAttributeCount),
		}
	}
	return out
}

func instrumentationScope(is instrumentation.Scope) *commonpb.InstrumentationScope {
	if is == (instrumentation.Scope{}) {
		return nil
	}
	return &commonpb.InstrumentationScope{Name: is.Name, Version: is.Version, Attributes: iterKeyValues(is.Attributes.Iter())}
}

func resourceProto(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return nil
	}
	return &resourcepb.Resource{Attributes: iterKeyValues(r.Iter())}
}

func iterKeyValues(it attribute.Iterator) []*commonpb.KeyValue {
	if it.Len() == 0 {
		return nil
	}
	attrs := make([]attribute.KeyValue, 0, it.Len())
	for it.Next() {
		attrs = append(attrs, it.Attribute())
	}
	var size arenaSize
	size.count(attrs)
	return newArena(size).keyValues(attrs)
}

func clampUint32(v int) uint32 {
	if v < 0 {
		return 0
	}
	if int64(v) > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v) //nolint:gosec // checked
}

func statusCode(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	}
	return tracepb.Status_STATUS_CODE_UNSET
}

// spanFlags: the W3C trace flags, and whether the parent is remote
// (known: the has-is-remote bit is always set).
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	flags := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		flags |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return flags
}

func spanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}
