package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestEndpoint(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unset: off", nil, ""},
		{"base endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"}, "http://127.0.0.1:4318/v1/traces"},
		{"traces endpoint as is", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b/x"}, "http://b/x"},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"}, ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Endpoint(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("Endpoint = %q, want %q", got, tt.want)
			}
		})
	}
}

// Off, Setup installs nothing; a grpc protocol is refused with a reason.
func TestSetupOffAndRefusals(t *testing.T) {
	shutdown, err := Setup(t.Context(), func(string) string { return "" })
	if err != nil || Enabled() {
		t.Fatalf("Setup with no endpoint: err %v, enabled %v", err, Enabled())
	}
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	if _, err := Setup(t.Context(), func(k string) string { return env[k] }); err == nil || Enabled() {
		t.Fatalf("Setup with protocol grpc: err %v, enabled %v", err, Enabled())
	}
}

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// The trace context goes into a job's payload and comes back out; a
// payload without one leaves the context as it is.
func TestPayloadTraceContext(t *testing.T) {
	ctx := FromEnv(t.Context(), func(k string) string { return map[string]string{"TRACEPARENT": parent}[k] })
	tests := []struct {
		name    string
		payload string
		ctx     context.Context
		want    string
	}{
		{"empty payload", "", ctx, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"fields kept", `{"task":"x","metadata":{"a":"b"}}`, ctx, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"no span: unchanged", `{"task":"x"}`, t.Context(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := WithPayload(tt.ctx, json.RawMessage(tt.payload))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" && string(p) != tt.payload {
				t.Errorf("payload changed: %s", p)
			}
			if tt.payload != "" && tt.want != "" {
				var m map[string]any
				if json.Unmarshal(p, &m) != nil || m["task"] != "x" {
					t.Errorf("payload lost its fields: %s", p)
				}
			}
			if got := TraceID(FromPayload(t.Context(), p)); got != tt.want {
				t.Errorf("trace id from %s = %q, want %q", p, got, tt.want)
			}
		})
	}
}

// A model request through the gateway transport carries the join keys
// (a job's from its context, else the launcher's), the turn, and the
// trace context; never anything else.
func TestGatewayTransport(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header }))
	defer srv.Close()
	env := JoinKeys{WorkspaceID: "ws_env", SessionID: "sess_env", AgentRunID: "run_env"}
	traced := FromEnv(t.Context(), func(k string) string { return map[string]string{"TRACEPARENT": parent}[k] })
	tests := []struct {
		name string
		ctx  context.Context
		want map[string]string
	}{
		{"launcher's keys", t.Context(), map[string]string{"X-EvalOps-Workspace-Id": "ws_env", "X-EvalOps-Session-Id": "sess_env",
			"X-EvalOps-Maestro-Session-Id": "sess_env", "X-EvalOps-Agent-Run-Id": "run_env", "X-EvalOps-Turn-Id": "", "Traceparent": ""}},
		{"job's keys, turn and trace", WithTurn(WithJoinKeys(traced, JoinKeys{WorkspaceID: "ws_job", TaskID: "7", Workload: "job"}), "resp_1", "call_1"),
			map[string]string{"X-EvalOps-Workspace-Id": "ws_job", "X-EvalOps-Session-Id": "", "X-EvalOps-Agent-Run-Id": "",
				"X-EvalOps-Task-Id": "7", "X-EvalOps-Workload": "job", "X-EvalOps-Turn-Id": "resp_1", "X-EvalOps-Tool-Call-Id": "call_1",
				"X-EvalOps-Trace-Id": "4bf92f3577b34da6a3ce929d0e0e4736", "Traceparent": parent}},
	}
	c := &http.Client{Transport: GatewayTransport(nil, env)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(tt.ctx, http.MethodPost, srv.URL, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			h := <-got
			for k, v := range tt.want {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v)
				}
			}
			if req.Header.Get("X-EvalOps-Workspace-Id") != "" {
				t.Error("the caller's request was changed")
			}
		})
	}
}
