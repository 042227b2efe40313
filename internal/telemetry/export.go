package telemetry

import (
	"context"
	"fmt"
	"math"
	"sync"

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
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// exporter is the OTLP exporter of otlptrace (an otlptrace.Client, the
// OTLP/HTTP one configured by OTEL_EXPORTER_OTLP_*, uploads the
// messages) with its own conversion of the spans to OTLP (protoSpans):
// the same request (TestExporterMatchesOTLP), without the message per
// span, attribute and value otlptrace builds and marshals, three
// allocations an attribute that the collector then has to collect
// (docs/events.md, "Figures").
type exporter struct {
	client otlptrace.Client

	// mu serializes the exports (the batcher makes one at a time), which
	// reuse the encoding buffer and the Span messages: the client has
	// marshalled the request when UploadTraces returns.
	mu    sync.Mutex
	buf   []byte
	spans []tracepb.Span
}

// maxKept is the largest encoding buffer an exporter keeps for the next
// export.
const maxKept = 1 << 20

func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := protoSpans(spans, e)
	if cap(e.buf) > maxKept {
		e.buf, e.spans = nil, nil
	}
	if len(rs) == 0 {
		return nil
	}
	if err := e.client.UploadTraces(ctx, rs); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

func (e *exporter) Shutdown(ctx context.Context) error { return e.client.Stop(ctx) }

// protoSpans converts spans to OTLP messages, in e's buffers, as
// otlptrace does (tracetransform.Spans): one ResourceSpans per resource,
// one ScopeSpans per resource and scope, spans in their order. Each span is
// encoded directly (appendSpan) into one buffer for the batch and
// carried as the raw fields of an otherwise empty Span message, which
// proto.Marshal copies as they are: the request is the same bytes a
// receiver decodes, without a message per attribute and value.
func protoSpans(spans []sdktrace.ReadOnlySpan, e *exporter) []*tracepb.ResourceSpans {
	live := 0
	for _, sd := range spans {
		if sd != nil {
			live++
		}
	}
	if live == 0 {
		return nil
	}
	if cap(e.spans) < live {
		e.spans = make([]tracepb.Span, live)
	}
	pbs := e.spans[:live]
	for i := range pbs {
		pbs[i].Reset()
	}
	buf := e.buf[:0]
	defer func() { e.buf = buf }()

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
		from := len(buf)
		buf = appendSpan(buf, sd)
		s := &pbs[i]
		s.ProtoReflect().SetUnknown(protoreflect.RawFields(buf[from:len(buf):len(buf)]))
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

// The field numbers of opentelemetry/proto/trace/v1/trace.proto and
// common/v1/common.proto that appendSpan writes.
const (
	spanTraceID           protowire.Number = 1
	spanSpanID            protowire.Number = 2
	spanTraceState        protowire.Number = 3
	spanParentSpanID      protowire.Number = 4
	spanName              protowire.Number = 5
	spanKindField         protowire.Number = 6
	spanStart             protowire.Number = 7
	spanEnd               protowire.Number = 8
	spanAttributes        protowire.Number = 9
	spanDroppedAttributes protowire.Number = 10
	spanEvents            protowire.Number = 11
	spanDroppedEvents     protowire.Number = 12
	spanLinks             protowire.Number = 13
	spanDroppedLinks      protowire.Number = 14
	spanStatus            protowire.Number = 15
	spanFlagsField        protowire.Number = 16

	statusMessage protowire.Number = 2
	statusCodeNum protowire.Number = 3

	eventTime              protowire.Number = 1
	eventName              protowire.Number = 2
	eventAttributes        protowire.Number = 3
	eventDroppedAttributes protowire.Number = 4

	linkTraceID           protowire.Number = 1
	linkSpanID            protowire.Number = 2
	linkTraceState        protowire.Number = 3
	linkAttributes        protowire.Number = 4
	linkDroppedAttributes protowire.Number = 5
	linkFlags             protowire.Number = 6

	kvKey   protowire.Number = 1
	kvValue protowire.Number = 2

	anyString protowire.Number = 1
	anyBool   protowire.Number = 2
	anyInt    protowire.Number = 3
	anyDouble protowire.Number = 4
	anyArray  protowire.Number = 5
	anyKvlist protowire.Number = 6
	anyBytes  protowire.Number = 7

	arrayValues  protowire.Number = 1
	kvlistValues protowire.Number = 1
)

// appendSpan appends the fields of sd's Span message as otlptrace sets
// them (tracetransform.span), zero values omitted as proto.Marshal
// omits them.
func appendSpan(b []byte, sd sdktrace.ReadOnlySpan) []byte {
	sc := sd.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytesField(b, spanTraceID, tid[:])
	b = appendBytesField(b, spanSpanID, sid[:])
	b = appendStringField(b, spanTraceState, sc.TraceState().String())
	parent := sd.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytesField(b, spanParentSpanID, psid[:])
	}
	b = appendStringField(b, spanName, sd.Name())
	b = appendVarintField(b, spanKindField, uint64(spanKind(sd.SpanKind())))
	b = appendFixed64Field(b, spanStart, uint64(max(0, sd.StartTime().UnixNano()))) //nolint:gosec // not negative
	b = appendFixed64Field(b, spanEnd, uint64(max(0, sd.EndTime().UnixNano())))     //nolint:gosec // not negative
	for _, kv := range sd.Attributes() {
		b = appendMessage(b, spanAttributes, func(b []byte) []byte { return appendKeyValue(b, kv) })
	}
	b = appendVarintField(b, spanDroppedAttributes, uint64(clampUint32(sd.DroppedAttributes())))
	for _, e := range sd.Events() {
		b = appendMessage(b, spanEvents, func(b []byte) []byte {
			b = appendFixed64Field(b, eventTime, uint64(max(0, e.Time.UnixNano()))) //nolint:gosec // not negative
			b = appendStringField(b, eventName, e.Name)
			for _, kv := range e.Attributes {
				b = appendMessage(b, eventAttributes, func(b []byte) []byte { return appendKeyValue(b, kv) })
			}
			return appendVarintField(b, eventDroppedAttributes, uint64(clampUint32(e.DroppedAttributeCount)))
		})
	}
	b = appendVarintField(b, spanDroppedEvents, uint64(clampUint32(sd.DroppedEvents())))
	for _, l := range sd.Links() {
		b = appendMessage(b, spanLinks, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytesField(b, linkTraceID, ltid[:])
			b = appendBytesField(b, linkSpanID, lsid[:])
			for _, kv := range l.Attributes {
				b = appendMessage(b, linkAttributes, func(b []byte) []byte { return appendKeyValue(b, kv) })
			}
			b = appendVarintField(b, linkDroppedAttributes, uint64(clampUint32(l.DroppedAttributeCount)))
			return appendFixed32Field(b, linkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendVarintField(b, spanDroppedLinks, uint64(clampUint32(sd.DroppedLinks())))
	// otlptrace always sets the status, even an empty one.
	st := sd.Status()
	b = appendMessage(b, spanStatus, func(b []byte) []byte {
		b = appendStringField(b, statusMessage, st.Description)
		return appendVarintField(b, statusCodeNum, uint64(statusCode(st.Code)))
	})
	return appendFixed32Field(b, spanFlagsField, spanFlags(sc.TraceFlags(), parent))
}

// appendKeyValue appends a KeyValue's fields; its value is always set
// (an empty AnyValue for an EMPTY one), as tracetransform.KeyValue does.
func appendKeyValue(b []byte, kv attribute.KeyValue) []byte {
	b = appendStringField(b, kvKey, string(kv.Key))
	return appendMessage(b, kvValue, func(b []byte) []byte { return appendAnyValue(b, kv.Value) })
}

// appendAnyValue appends an AnyValue's fields as tracetransform.Value
// converts v. A oneof member is written even when it is its type's zero
// value (proto.Marshal writes a set oneof).
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.STRING:
		return protowire.AppendString(protowire.AppendTag(b, anyString, protowire.BytesType), v.AsString())
	case attribute.BOOL:
		return protowire.AppendVarint(protowire.AppendTag(b, anyBool, protowire.VarintType), protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, anyInt, protowire.VarintType), uint64(v.AsInt64())) //nolint:gosec // two's complement, as protobuf's int64
	case attribute.FLOAT64:
		return protowire.AppendFixed64(protowire.AppendTag(b, anyDouble, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		return protowire.AppendBytes(protowire.AppendTag(b, anyBytes, protowire.BytesType), v.AsByteSlice())
	case attribute.BOOLSLICE:
		vals := v.AsBoolSlice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return attribute.BoolValue(vals[i]) })
	case attribute.INT64SLICE:
		vals := v.AsInt64Slice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return attribute.Int64Value(vals[i]) })
	case attribute.FLOAT64SLICE:
		vals := v.AsFloat64Slice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return attribute.Float64Value(vals[i]) })
	case attribute.STRINGSLICE:
		vals := v.AsStringSlice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return attribute.StringValue(vals[i]) })
	case attribute.SLICE:
		vals := v.AsSlice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return vals[i] })
	case attribute.MAP:
		kvs := v.AsMap()
		return appendMessage(b, anyKvlist, func(b []byte) []byte {
			for _, kv := range kvs {
				b = appendMessage(b, kvlistValues, func(b []byte) []byte { return appendKeyValue(b, kv) })
			}
			return b
		})
	case attribute.EMPTY:
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, anyString, protowire.BytesType), "INVALID")
}

// appendArray appends an ArrayValue of n values.
func appendArray(b []byte, n int, at func(int) attribute.Value) []byte {
	return appendMessage(b, anyArray, func(b []byte) []byte {
		for i := range n {
			b = appendMessage(b, arrayValues, func(b []byte) []byte { return appendAnyValue(b, at(i)) })
		}
		return b
	})
}

// appendMessage appends field num holding the message fill appends: its
// length is reserved as one byte and widened when the message is longer.
func appendMessage(b []byte, num protowire.Number, fill func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	at := len(b)
	b = append(b, 0)
	b = fill(b)
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	size := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, size-1)...)
	copy(b[at+size:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendStringField(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendFixed64Field(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

func appendFixed32Field(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
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

// iterKeyValues converts the attributes of a resource or a scope (once
// a batch) as otlptrace does.
func iterKeyValues(it attribute.Iterator) []*commonpb.KeyValue {
	if it.Len() == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, it.Len())
	for it.Next() {
		kv := it.Attribute()
		var av commonpb.AnyValue
		if err := proto.Unmarshal(appendAnyValue(nil, kv.Value), &av); err != nil {
			av.Value = &commonpb.AnyValue_StringValue{StringValue: "INVALID"}
		}
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: &av})
	}
	return out
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
