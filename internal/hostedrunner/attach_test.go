package hostedrunner

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	httpattach "github.com/maestro-run/maestro/internal/transport/http"
)

// TestOtherSessionOwnedElsewhere: the runner serves its own session, and
// every route naming another session id answers 409
// runtime_owned_elsewhere with the ownership details (contract §11.5,
// §11.6), not 404.
func TestOtherSessionOwnedElsewhere(t *testing.T) {
	t.Parallel()
	cfg := testConfig(newWorkspace(t))
	r, err := New(cfg, Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	attach := NewAttach(r, httpattach.Config{SweepInterval: -1})
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		attach.Close()
		r.Close()
	})
	own := r.SessionID()
	if own != "session_123" {
		t.Fatalf("bound session %q, want session_123", own)
	}

	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: read body: %v", method, path, err)
		}
		return resp.StatusCode, data
	}

	type errBody struct {
		Error     string `json:"error"`
		ErrorType string `json:"error_type"`
		Code      string `json:"code"`
		Details   []struct {
			Type     string            `json:"@type"`
			Reason   string            `json:"reason"`
			Domain   string            `json:"domain"`
			Metadata map[string]string `json:"metadata"`
		} `json:"details"`
	}
	wantMeta := map[string]string{
		"runner_session_id": "mrs_123", "owner_instance_id": "pod_123", "workspace_id": "workspace_123",
		"agent_run_id": "run_123", "maestro_session_id": "session_123",
		"requested_maestro_session_id": "other_456", "draining": "false",
	}
	for _, tc := range []struct {
		method, path, body string
	}{
		{"GET", "/api/headless/sessions/other_456", ""},
		{"GET", "/api/headless/sessions/other_456/state", ""},
		{"POST", "/api/headless/sessions", `{"sessionId":"other_456"}`},
		{"POST", "/api/headless/connections", `{"sessionId":"other_456","role":"viewer"}`},
		{"POST", "/api/headless/sessions/other_456/subscribe", `{"role":"viewer"}`},
		{"GET", "/api/headless/sessions/other_456/events", ""},
		{"POST", "/api/headless/sessions/other_456/messages", `{"type":"hello","protocol_version":"2026-04-02"}`},
		{"POST", "/api/headless/sessions/other_456/heartbeat", `{"connectionId":"conn_x"}`},
		{"POST", "/api/headless/sessions/other_456/disconnect", `{"connectionId":"conn_x"}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			status, data := do(tc.method, tc.path, tc.body)
			var e errBody
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatalf("body %s: %v", data, err)
			}
			if status != http.StatusConflict || e.ErrorType != "runtime_owned_elsewhere" || e.Code != "runtime_owned_elsewhere" {
				t.Fatalf("got %d %s, want 409 runtime_owned_elsewhere", status, data)
			}
			if want := "Hosted runner is bound to another session: other_456 (this runner serves session_123)"; e.Error != want {
				t.Errorf("error %q, want %q", e.Error, want)
			}
			// Clients classify "not found" by these texts: a foreign
			// session must not look like a missing one.
			if strings.Contains(e.Error, "not found") {
				t.Errorf("error %q reads as not found", e.Error)
			}
			if len(e.Details) != 1 || e.Details[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" ||
				e.Details[0].Reason != "runtime_owned_elsewhere" || e.Details[0].Domain != "maestro.hosted_runner" {
				t.Fatalf("details %+v", e.Details)
			}
			for k, v := range wantMeta {
				if got := e.Details[0].Metadata[k]; got != v {
					t.Errorf("metadata %s = %q, want %q", k, got, v)
				}
			}
		})
	}

	// The runner's own session is served.
	status, data := do("GET", "/api/headless/sessions/"+own+"/state", "")
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(data, &snap); status != http.StatusOK || err != nil || snap.SessionID != own {
		t.Fatalf("own session: %d %s", status, data)
	}
	// Draining shows in the details.
	if _, code, err := r.Drain(t.Context(), DrainRequest{Reason: "ttl_expired"}); err != nil || code != http.StatusOK {
		t.Fatalf("drain: %d %v", code, err)
	}
	status, data = do("GET", "/api/headless/sessions/other_456/state", "")
	var e errBody
	json.Unmarshal(data, &e)
	if status != http.StatusConflict || len(e.Details) != 1 || e.Details[0].Metadata["draining"] != "true" {
		t.Fatalf("while draining: %d %s", status, data)
	}
}
