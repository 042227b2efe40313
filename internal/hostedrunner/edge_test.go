package hostedrunner

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge/edgetest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

// edgeRunner is a runner with real utility operations (commands run
// unsandboxed, as the embedder's terminal) served over a real listener.
func edgeRunner(t *testing.T, cfg Config) (*Runner, *httptest.Server) {
	t.Helper()
	root, err := workspace.Open(cfg.WorkspaceRoot)
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the runner (cleanups run last first).
	t.Cleanup(func() { root.Close() })
	return serveRunner(t, cfg, Options{Now: fixedNow, Utilities: func(emit func(protocol.Message), hide []string) runtime.Utilities {
		return utility.New(utility.Config{Root: root, Emit: emit, Hide: hide})
	}})
}

// edgeCall sends one request with the given headers ("Host" sets the
// request's Host) and returns the status and body. The call is bounded: an
// event stream that opens (the attack got through) is read for 2 s.
func edgeCall(t *testing.T, srv *httptest.Server, method, path, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	return edgetest.Call(t, srv.Client(), method, srv.URL+path, body, hdr, 2*time.Second)
}

const subscribeBody = `{"role":"controller","capabilities":{"utilityOperations":["command_exec"]}}`

func touchCommand(id string) string {
	return `{"type":"utility_command_start","command_id":"` + id + `","command":"touch pwned-` + id + `","shell_mode":"shell"}`
}

// TestDNSRebindingRefused: a page on attacker.example that rebinds its name
// to 127.0.0.1 (Host: attacker.example, its Origin same-origin as far as
// the browser knows), or any page sending cross-site, cannot create a
// controller, subscribe, send utility_command_start as text/plain (no CORS
// preflight) or drain: every request gets 403 or 415, no command runs and
// the runner is not drained. The same requests with the runner's Host and
// JSON work (the command runs).
func TestDNSRebindingRefused(t *testing.T) {
	t.Parallel()
	textPlain := "text/plain;charset=UTF-8"
	attacks := []struct {
		name string
		hdr  map[string]string
		read bool // the event stream is refused too
	}{
		{"rebound host", map[string]string{"Host": "attacker.example", "Origin": "http://attacker.example", "Content-Type": textPlain}, true},
		{"rebound host with port, JSON", map[string]string{"Host": "attacker.example:8080", "Content-Type": "application/json"}, true},
		{"rebound localhost lookalike", map[string]string{"Host": "localhost.attacker.example", "Content-Type": "application/json"}, true},
		{"cross-site origin", map[string]string{"Origin": "https://attacker.example", "Content-Type": textPlain}, true},
		{"cross-site fetch metadata", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Content-Type": "application/json"}, true},
		{"same-site fetch metadata", map[string]string{"Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}, true},
		{"null origin", map[string]string{"Origin": "null", "Content-Type": "application/json"}, true},
		{"text/plain simple request", map[string]string{"Content-Type": textPlain}, false},
		{"form simple request", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, false},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			ws := newWorkspace(t)
			r, srv := edgeRunner(t, testConfig(ws))
			id := r.SessionID()
			refused := func(method, path, body string, hdr map[string]string) []byte {
				t.Helper()
				code, data := edgeCall(t, srv, method, path, body, hdr)
				if code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
					t.Errorf("%s %s: %d %.200s, want 403 or 415", method, path, code, data)
					return data
				}
				var e edgetest.ErrorBody
				if err := json.Unmarshal(data, &e); err != nil || e.ErrorType == "" || e.ErrorType != e.Code {
					t.Errorf("%s %s: body %s is not the contract's error shape", method, path, data)
				}
				return nil
			}
			refused("POST", "/api/headless/sessions", `{}`, a.hdr)
			refused("POST", "/api/headless/connections", `{"role":"controller"}`, a.hdr)
			// The attacker reads the subscription it got, if any, and sends
			// the command as that controller.
			var sub struct {
				SubscriptionID string `json:"subscription_id"`
			}
			json.Unmarshal(refused("POST", "/api/headless/sessions/"+id+"/subscribe", subscribeBody, a.hdr), &sub)
			hdr := maps.Clone(a.hdr)
			if sub.SubscriptionID != "" {
				hdr["x-maestro-headless-subscriber-id"] = sub.SubscriptionID
			}
			refused("POST", "/api/headless/sessions/"+id+"/messages", touchCommand("m"), hdr)
			refused("POST", "/api/headless/sessions/"+id+"/message", touchCommand("m2"), hdr)
			if a.read {
				refused("GET", "/api/headless/sessions/"+id+"/events", "", a.hdr)
			}
			refused("POST", DrainPath, `{"reason":"pwned"}`, a.hdr)
			for _, m := range []string{"m", "m2"} {
				if _, err := os.Stat(filepath.Join(ws, "pwned-"+m)); err == nil {
					t.Errorf("the command %s ran", m)
				}
			}
			if id := r.Identity(); id.Draining || !id.Ready {
				t.Errorf("after the attack: %+v", id)
			}
		})
	}
}

// TestEdgeAllowsOwnOrigin: the steps the attacks try work for the
// runner's own clients: its Host, JSON, same-origin.
func TestEdgeAllowsOwnOrigin(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	r, srv := edgeRunner(t, testConfig(ws))
	id := r.SessionID()
	ok := map[string]string{"Content-Type": "application/json", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}
	code, body := edgeCall(t, srv, "POST", "/api/headless/sessions/"+id+"/subscribe", subscribeBody, ok)
	var sub struct {
		SubscriptionID string `json:"subscription_id"`
	}
	if err := json.Unmarshal(body, &sub); code != 200 || err != nil || sub.SubscriptionID == "" {
		t.Fatalf("subscribe: %d %s", code, body)
	}
	events := openEvents(t, srv.URL, id, "subscriptionId="+sub.SubscriptionID)
	ok["x-maestro-headless-subscriber-id"] = sub.SubscriptionID
	if code, body := edgeCall(t, srv, "POST", "/api/headless/sessions/"+id+"/messages", touchCommand("ok"), ok); code != 200 {
		t.Fatalf("message: %d %s", code, body)
	}
	for {
		e := nextEnvelope(t, events)
		if strings.Contains(e.raw, `"utility_command_exited"`) {
			break
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned-ok")); err != nil {
		t.Fatalf("the legitimate command did not run: %v", err)
	}
	for _, host := range []string{"localhost", "LOCALHOST.", "app.localhost:8080", "[::1]:9", "127.0.0.2"} {
		if code, body := edgeCall(t, srv, "GET", IdentityPath, "", map[string]string{"Host": host}); code != 200 {
			t.Errorf("identity for Host %s: %d %s", host, code, body)
		}
	}
	if code, body := edgeCall(t, srv, "POST", DrainPath, `{"reason":"ttl_expired"}`, ok); code != 200 {
		t.Fatalf("drain: %d %s", code, body)
	}
}

// TestDrainPeerAndToken: the drain route needs no token from this machine
// (a pod's preStop hook), but from another machine it needs the token;
// a refused drain changes nothing. The answer carries exactly the
// contract's fields (§14.2).
func TestDrainPeerAndToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(newWorkspace(t))
	cfg.Listen, cfg.AuthToken, cfg.RequireAuth = "0.0.0.0:8080", "s3cret", true
	drain := func(r *Runner, peer string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", DrainPath, strings.NewReader(`{"reason":"ttl_expired"}`))
		req.RemoteAddr, req.Host = peer, "10.1.2.3:8080"
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		r.Handler().ServeHTTP(rec, req)
		return rec
	}
	for _, tc := range []struct {
		name string
		peer string
		hdr  map[string]string
		want int
	}{
		{"remote peer without token", "192.0.2.7:40000", nil, http.StatusUnauthorized},
		{"remote peer with a wrong token", "192.0.2.7:40000", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"remote IPv6 peer without token", "[2001:db8::1]:40000", nil, http.StatusUnauthorized},
		{"remote peer with the token", "192.0.2.7:40000", map[string]string{"Authorization": "bearer s3cret"}, http.StatusOK},
		{"remote peer with the API key", "192.0.2.7:40000", map[string]string{"x-maestro-api-key": "s3cret"}, http.StatusOK},
		{"loopback peer without token", "127.0.0.1:40000", nil, http.StatusOK},
		{"loopback IPv6 peer without token", "[::1]:40000", nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRunner(t, cfg)
			rec := drain(r, tc.peer, tc.hdr)
			if rec.Code != tc.want {
				t.Fatalf("drain: %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			if tc.want != http.StatusOK {
				if id := r.Identity(); id.Draining || id.DrainStatus != "" {
					t.Fatalf("a refused drain drained: %+v", id)
				}
				if got := rec.Header().Values("WWW-Authenticate"); len(got) != 1 {
					t.Fatalf("WWW-Authenticate %q, want one", got)
				}
				return
			}
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(rec.Body.Bytes(), &keys); err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(func(yield func(string) bool) {
				for k := range keys {
					if !yield(k) {
						return
					}
				}
			})
			want := []string{"manifest", "manifest_path", "protocol_version", "reason", "requested_by", "runner_session_id", "status"}
			if !slices.Equal(got, want) {
				t.Fatalf("drain answer fields %v, want exactly %v", got, want)
			}
		})
	}
}

// TestDrainReasonValidated: reason and requested_by are refused with 400
// naming the field when they carry control characters (a NUL escaped as
// \u0000 included), invalid UTF-8 or more than MaxDrainText bytes; the
// runner is not drained.
func TestDrainReasonValidated(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("r", MaxDrainText+1)
	for _, tc := range []struct{ body, field string }{
		{`{"reason":"a\u0000b"}`, "reason"},
		{`{"stop_reason":"line\nbreak"}`, "reason"},
		{`{"reason":"esc\u001b[31m"}`, "reason"},
		{`{"reason":"del\u007f"}`, "reason"},
		{`{"reason":"` + long + `"}`, "reason"},
		{`{"requested_by":"x\u0000"}`, "requested_by"},
		{`{"requestedBy":"` + long + `"}`, "requested_by"},
		{`{"export_paths":["a\u0000b"]}`, "export_paths[0]"},
	} {
		r, _ := newRunner(t, testConfig(newWorkspace(t)))
		req := httptest.NewRequest("POST", DrainPath, strings.NewReader(tc.body))
		req.RemoteAddr, req.Host = "127.0.0.1:1234", "127.0.0.1:8080"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		r.Handler().ServeHTTP(rec, req)
		var e edgetest.ErrorBody
		json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != http.StatusBadRequest || e.Code != "bad_request" || !strings.Contains(e.Error, tc.field+":") {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body[:min(len(tc.body), 40)], rec.Code, rec.Body, tc.field)
		}
		if len(e.Error) > 512 {
			t.Errorf("%s: the error echoes %d bytes", tc.field, len(e.Error))
		}
		if r.Identity().Draining {
			t.Errorf("%s: drained", tc.body[:min(len(tc.body), 40)])
		}
	}
	// A standard reason passes.
	if _, err := DecodeDrainRequest([]byte(`{"reason":"kubernetes_prestop","requested_by":"kubernetes_prestop"}`)); err != nil {
		t.Fatal(err)
	}
}
