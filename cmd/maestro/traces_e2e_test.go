package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/telemetry/oteltest"
)

// traceScenario: the piece's one movement globs, then completes.
const traceScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"trace","description":"one tool call, then complete",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Glob","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Glob","id":"call_1","input":{"pattern":"*"}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","id":"call_2","input":{"status":"success","result":"done"}}]}]}`

// One trace runs from POST /api/v1/tasks (continuing the caller's
// traceparent) through the worker's job, movement, model and tool spans,
// received over OTLP/HTTP by a test collector, with the correlation of
// the task's metadata on the worker's spans (docs/events.md, "Traces").
func TestTracesFromSubmitThroughWorker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 180*time.Second)
	defer cancel()
	home := t.TempDir()
	otlp := oteltest.Start(t)
	env := append(proctest.NoModelEnv(home), "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL(), "OTEL_BSP_SCHEDULE_DELAY=50",
		"OTEL_SERVICE_NAME=maestro-e2e", "MAESTRO_EVALOPS_ORG_ID=process_org")
	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home)
	defer stop()

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body, _ := json.Marshal(map[string]any{"title": "find files", "piece": "chat", "payload": map[string]any{"replay": traceScenario,
		"metadata": map[string]any{"organization_id": "org_t", "workspace_id": "ws_t", "agent_run_id": "run_t", "user_id": "user_t"}}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/tasks", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/tasks: %s", resp.Status)
	}

	byName := func(spans []oteltest.Span) map[string]oteltest.Span {
		m := map[string]oteltest.Span{}
		for _, s := range spans {
			m[s.Name] = s
		}
		return m
	}
	want := []string{"POST /api/v1/tasks", "job", "movement respond", "turn", "chat maestro-replay-v1", "execute_tool Glob", "execute_tool complete"}
	spans, err := otlp.Wait(ctx, func(s []oteltest.Span) bool {
		m := byName(s)
		for _, n := range want {
			if _, ok := m[n]; !ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("%v\nserve:\n%s", err, stderr.String())
	}
	m := byName(spans)
	// One trace, each span under the one before it: the movement's turn
	// (its agent loop) holds its model and tool calls.
	parents := map[string]string{"POST /api/v1/tasks": "", "job": "POST /api/v1/tasks", "movement respond": "job", "turn": "movement respond",
		"chat maestro-replay-v1": "turn", "execute_tool Glob": "turn", "execute_tool complete": "turn"}
	for _, n := range want {
		s := m[n]
		if s.TraceID != traceID {
			t.Errorf("%s: trace %s, want the caller's %s", n, s.TraceID, traceID)
		}
		wantParent := callerSpan
		if p := parents[n]; p != "" {
			wantParent = m[p].SpanID
		}
		if s.ParentSpanID != wantParent {
			t.Errorf("%s: parent %s, want %s (%s)", n, s.ParentSpanID, wantParent, cmp.Or(parents[n], "the caller"))
		}
		if s.Service != "maestro-e2e" {
			t.Errorf("%s: service.name %q", n, s.Service)
		}
		for k, v := range map[string]string{"evalops.organization_id": "org_t", "enduser.id": "user_t", "evalops.workspace_id": "ws_t",
			"maestro.agent_run_id": "run_t", "maestro.task_id": "1"} {
			if s.Attributes[k] != v {
				t.Errorf("%s: %s = %q, want %q (attributes %v)", n, k, s.Attributes[k], v, s.Attributes)
			}
		}
	}
	for name, attrs := range map[string]map[string]string{
		"job":                    {"maestro.job_id": "1", "maestro.job.state": "succeeded", "maestro.piece": "chat"},
		"movement respond":       {"maestro.movement": "respond", "maestro.piece": "chat"},
		"chat maestro-replay-v1": {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "replay", "gen_ai.request.model": "maestro-replay-v1"},
		"execute_tool Glob":      {"gen_ai.tool.name": "Glob", "gen_ai.tool.call.id": "call_1", "maestro.tool.outcome": "succeeded"},
	} {
		for k, v := range attrs {
			if got := m[name].Attributes[k]; got != v {
				t.Errorf("%s: %s = %q, want %q (attributes %v)", name, k, got, v, m[name].Attributes)
			}
		}
	}
	if _, ok := m["chat maestro-replay-v1"].Attributes["gen_ai.usage.input_tokens"]; !ok {
		t.Errorf("model span without token usage: %v", m["chat maestro-replay-v1"].Attributes)
	}
	for _, s := range spans {
		if strings.Contains(s.Attributes["evalops.organization_id"], "process_org") {
			t.Errorf("%s took the serving process's correlation: %v", s.Name, s.Attributes)
		}
	}
}

// A headless session's spans: one session span, a turn span per prompt
// under it holding the prompt's model and tool spans, all continuing the
// launcher's TRACEPARENT and carrying its correlation (docs/events.md,
// "Traces").
func TestTracesOfAHeadlessSession(t *testing.T) {
	t.Parallel()
	ctx, _, scenario, home := busSetup(t, 120*time.Second)
	otlp := oteltest.Start(t)
	const traceID, launcherSpan = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
	env := append(proctest.NoModelEnv(home), "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL(), "OTEL_BSP_SCHEDULE_DELAY=50",
		"TRACEPARENT=00-"+traceID+"-"+launcherSpan+"-01",
		"MAESTRO_EVALOPS_ORG_ID=org_s", "MAESTRO_EVALOPS_USER_ID=user_s", "MAESTRO_EVALOPS_WORKSPACE_ID=ws_s",
		"MAESTRO_SESSION_ID=sess_s", "MAESTRO_AGENT_RUN_ID=run_s")
	h := startBusHeadless(ctx, t, env, "--replay", scenario, "--workspace", t.TempDir())
	h.prompt("first")
	h.prompt("second")
	h.shutdown()
	spans, err := otlp.Wait(ctx, func(s []oteltest.Span) bool {
		for _, sp := range s {
			if sp.Name == "session" {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("%v\nheadless:\n%s", err, h.stderr.String())
	}
	byID := map[string]oteltest.Span{}
	count := map[string]int{}
	for _, s := range spans {
		byID[s.SpanID] = s
		count[s.Name]++
	}
	if count["session"] != 1 || count["turn"] != 2 || count["chat maestro-replay-v1"] != 4 || count["execute_tool Glob"] != 2 {
		t.Fatalf("spans by name: %v, want 1 session, 2 turns, 4 model calls, 2 tool calls", count)
	}
	wantParent := map[string]string{"session": "", "turn": "session", "chat maestro-replay-v1": "turn", "execute_tool Glob": "turn"}
	for _, s := range spans {
		want, ok := wantParent[s.Name]
		if !ok {
			continue
		}
		if s.TraceID != traceID {
			t.Errorf("%s: trace %s, want the launcher's %s", s.Name, s.TraceID, traceID)
		}
		if want == "" {
			if s.ParentSpanID != launcherSpan {
				t.Errorf("session: parent %s, want the launcher's span %s", s.ParentSpanID, launcherSpan)
			}
		} else if got := byID[s.ParentSpanID].Name; got != want {
			t.Errorf("%s: parent %q, want %q", s.Name, got, want)
		}
		for k, v := range map[string]string{"evalops.organization_id": "org_s", "enduser.id": "user_s", "evalops.workspace_id": "ws_s",
			"maestro.session_id": "sess_s", "maestro.agent_run_id": "run_s"} {
			if s.Attributes[k] != v {
				t.Errorf("%s: %s = %q, want %q (attributes %v)", s.Name, k, s.Attributes[k], v, s.Attributes)
			}
		}
	}
}
