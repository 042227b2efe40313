package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
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

// A bad value of an OTEL_* variable the SDK reads was logged in the SDK's
// words ("2026/11/27 16:34:16 unsupported sampler: bogus", or a logr
// line for the OTLP headers, or nothing for OTEL_BSP_*) and replaced by a
// default while the run went on. Setup refuses it as it refuses a grpc
// protocol, naming the variable and what it takes (tracing stays off);
// a header's value is never quoted.
func TestSetupRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_SAMPLER": "bogus"}, "OTEL_TRACES_SAMPLER=bogus: not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "abc"}, "OTEL_TRACES_SAMPLER_ARG=abc: the traceidratio sampler takes the share of traces to keep, from 0 to 1"},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "OTEL_TRACES_SAMPLER_ARG=1.5"},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=a,garbage"}, `OTEL_RESOURCE_ATTRIBUTES: "garbage" has no '='`},
		{map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer s3cret"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 1 has no '='"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b,x y=1"}, `OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x y" is not a header name`},
		{map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%zzs3cret"}, "OTEL_EXPORTER_OTLP_HEADERS: the value of Authorization is not URL-encoded"},
		{map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gz"}, "OTEL_EXPORTER_OTLP_COMPRESSION=gz: not one of gzip, none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT=10s: a number of milliseconds"},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "5s"}, "OTEL_BSP_SCHEDULE_DELAY=5s: a number of milliseconds"},
		{map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "0"}, "OTEL_BSP_MAX_QUEUE_SIZE=0: a number of spans, at least 1"},
	} {
		tc.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:1"
		_, err := Setup(t.Context(), func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), "tracing: "+tc.want) || strings.Contains(err.Error(), "s3cret") || Enabled() {
			t.Errorf("Setup(%v): err %v, enabled %v; want %q", tc.env, err, Enabled(), tc.want)
		}
	}
	good := map[string]string{
		"OTEL_TRACES_SAMPLER": " ParentBased_TraceIdRatio ", "OTEL_TRACES_SAMPLER_ARG": "0.25",
		"OTEL_RESOURCE_ATTRIBUTES": "team=a, region=eu%20west", "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20x,X-Org=1",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TIMEOUT": "10000",
		"OTEL_BSP_SCHEDULE_DELAY": "0", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64",
	}
	if err := checkEnv(func(k string) string { return good[k] }); err != nil {
		t.Errorf("good values refused: %v", err)
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
