package telemetry

import (
	"cmp"
	"context"
	"net/http"
)

// JoinKeys are the content-free ids a model request to a managed gateway
// carries (docs/events.md, "Model requests to a managed gateway"): never
// prompt text.
type JoinKeys struct {
	WorkspaceID    string
	SessionID      string
	AgentID        string
	AgentRunID     string
	AgentRunStepID string
	Surface        string
	Workload       string
	TaskID         string
}

// JoinKeysFromEnv reads the launcher's ids (the same variables as the
// event bus's correlation).
func JoinKeysFromEnv(getenv func(string) string) JoinKeys {
	return JoinKeys{
		WorkspaceID:    cmp.Or(getenv("MAESTRO_EVALOPS_WORKSPACE_ID"), getenv("EVALOPS_WORKSPACE_ID")),
		SessionID:      getenv("MAESTRO_SESSION_ID"),
		AgentID:        cmp.Or(getenv("MAESTRO_AGENT_ID"), getenv("EVALOPS_AGENT_ID")),
		AgentRunID:     getenv("MAESTRO_AGENT_RUN_ID"),
		AgentRunStepID: getenv("MAESTRO_AGENT_RUN_STEP_ID"),
		Surface:        getenv("MAESTRO_SURFACE"),
		Workload:       getenv("MAESTRO_WORKLOAD"),
	}
}

type joinKey struct{}

type turnKey struct{}

type turn struct{ id, toolCallID string }

// WithJoinKeys returns ctx whose model requests carry k instead of the
// process's own (a queued job's ids come from its task, never from the
// serving process's environment).
func WithJoinKeys(ctx context.Context, k JoinKeys) context.Context {
	return context.WithValue(ctx, joinKey{}, k)
}

// WithTurn returns ctx whose model request is turn id of the loop,
// answering tool call toolCallID ("" when none).
func WithTurn(ctx context.Context, id, toolCallID string) context.Context {
	return context.WithValue(ctx, turnKey{}, turn{id, toolCallID})
}

// GatewayTransport is base (nil: http.DefaultTransport) setting on every
// request the join keys as X-EvalOps-* headers and the W3C trace context
// (traceparent, tracestate) of the request's context; env is used when
// the context names no join keys (a session's launcher).
func GatewayTransport(base http.RoundTripper, env JoinKeys) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &gatewayTransport{base: base, env: env}
}

type gatewayTransport struct {
	base http.RoundTripper
	env  JoinKeys
}

// RoundTrip implements http.RoundTripper.
func (t *gatewayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	k, ok := ctx.Value(joinKey{}).(JoinKeys)
	if !ok {
		k = t.env
	}
	tr, _ := ctx.Value(turnKey{}).(turn)
	req = req.Clone(ctx)
	for _, h := range []struct{ name, value string }{
		{"X-EvalOps-Workspace-Id", k.WorkspaceID},
		{"X-EvalOps-Session-Id", k.SessionID},
		{"X-EvalOps-Maestro-Session-Id", k.SessionID},
		{"X-EvalOps-Agent-Id", k.AgentID},
		{"X-EvalOps-Agent-Run-Id", k.AgentRunID},
		{"X-EvalOps-Agent-Run-Step-Id", k.AgentRunStepID},
		{"X-EvalOps-Surface", k.Surface},
		{"X-EvalOps-Workload", k.Workload},
		{"X-EvalOps-Task-Id", k.TaskID},
		{"X-EvalOps-Turn-Id", tr.id},
		{"X-EvalOps-Tool-Call-Id", tr.toolCallID},
		{"X-EvalOps-Trace-Id", TraceID(ctx)},
	} {
		if h.value != "" {
			req.Header.Set(h.name, h.value)
		}
	}
	InjectHTTP(ctx, req.Header)
	return t.base.RoundTrip(req)
}
