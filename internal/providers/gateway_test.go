package providers

import (
	"testing"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/telemetry"
)

// A provider marked managed_gateway sends the join keys and the trace
// context on its model requests (docs/events.md, "Model requests to a
// managed gateway"); an unmarked one sends none of them.
func TestManagedGatewayHeaders(t *testing.T) {
	t.Parallel()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test", "MAESTRO_EVALOPS_WORKSPACE_ID": "ws_1", "MAESTRO_AGENT_RUN_ID": "run_1",
		"TRACEPARENT": parent}
	getenv := func(k string) string { return env[k] }
	for _, managed := range []bool{true, false} {
		srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{"hi"}}, llmtest.Turn{Text: []string{"hi"}})
		c, err := Select(t.Context(), Options{Getenv: getenv, Model: "anthropic/claude-test", Config: config.Config{Providers: config.Providers{
			Anthropic: config.Provider{BaseURL: srv.URL(), ManagedGateway: managed}}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := telemetry.WithTurn(telemetry.FromEnv(t.Context(), getenv), "resp_1", "call_1")
		for _, err := range c.Provider.Stream(ctx, &llm.Request{Messages: []llm.Message{llm.UserText("hello")}, MaxTokens: 10}) {
			if err != nil {
				t.Fatal(err)
			}
		}
		reqs := srv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("managed %v: %d requests", managed, len(reqs))
		}
		h := reqs[0].Header
		want := map[string]string{"X-EvalOps-Workspace-Id": "ws_1", "X-EvalOps-Agent-Run-Id": "run_1", "X-EvalOps-Turn-Id": "resp_1",
			"X-EvalOps-Tool-Call-Id": "call_1", "X-EvalOps-Trace-Id": "4bf92f3577b34da6a3ce929d0e0e4736", "Traceparent": parent}
		for k, v := range want {
			if !managed {
				v = ""
			}
			if h.Get(k) != v {
				t.Errorf("managed %v: %s = %q, want %q", managed, k, h.Get(k), v)
			}
		}
	}
}
