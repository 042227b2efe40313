// Package oteltest is an OTLP/HTTP trace receiver for tests: it decodes
// the protobuf export requests an exporter posts to /v1/traces and keeps
// the spans, so a test sees what a collector would.
package oteltest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex and its attributes as text.
type Span struct {
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string
	Kind         string
	Attributes   map[string]string
	// Service is the resource's service.name.
	Service string
	// Failed is true when the span's status is an error.
	Failed bool
}

// Receiver is an OTLP/HTTP endpoint on a loopback port.
type Receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []Span
	changed chan struct{}
}

// Start starts a receiver, closed at the test's cleanup.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the endpoint's base URL, the value of OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) URL() string { return r.srv.URL }

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "expected POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, "decode ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind().String(),
					Attributes: attrs(s.GetAttributes()), Service: service, Failed: s.GetStatus().GetCode() == 2,
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// attrs renders attributes as text (numbers in decimal).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Spans returns the spans received so far, in order of arrival.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait waits until done holds for the spans received, or ctx ends (an
// error naming the spans seen).
func (r *Receiver) Wait(ctx context.Context, done func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans, nil
		}
		select {
		case <-ctx.Done():
			names := make([]string, len(spans))
			for i, s := range spans {
				names[i] = s.Name
			}
			return spans, fmt.Errorf("waiting for spans: %w (received %q)", context.Cause(ctx), names)
		case <-changed:
		}
	}
}
