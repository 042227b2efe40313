package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/httpedge/edgetest"
)

// TestHostedRunnerDNSRebinding: against the built binary on loopback
// without a token (the fixture mode), a DNS-rebinding page (Host:
// attacker.example) and a cross-site page sending text/plain cannot
// subscribe a controller, start a utility command that would touch a file,
// or drain; the runner stays ready and the file is never created. With the
// runner's own Host the same subscribe works.
func TestHostedRunnerDNSRebinding(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	p := startRunner(t, fixtureEnv(t, ws, "mrs_edge"))
	send := func(method, path, body string, hdr map[string]string) (int, []byte) {
		t.Helper()
		return edgetest.Call(t, http.DefaultClient, method, p.base+path, body, hdr, 10*time.Second)
	}
	const sub = `{"role":"controller","capabilities":{"utilityOperations":["command_exec"]}}`
	const touch = `{"type":"utility_command_start","command_id":"x","command":"touch pwned","shell_mode":"shell"}`
	for _, hdr := range []map[string]string{
		{"Host": "attacker.example", "Content-Type": "text/plain"},
		{"Host": "attacker.example:8080", "Content-Type": "application/json"},
		{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
	} {
		for _, step := range []struct{ method, path, body string }{
			{"POST", "/api/headless/connections", `{"role":"controller"}`},
			{"POST", "/api/headless/sessions/session_123/subscribe", sub},
			{"POST", "/api/headless/sessions/session_123/messages", touch},
			{"POST", hostedrunner.DrainPath, `{"reason":"pwned"}`},
		} {
			if code, body := send(step.method, step.path, step.body, hdr); code != http.StatusForbidden {
				t.Errorf("%v %s %s: %d %s, want 403", hdr, step.method, step.path, code, body)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned")); err == nil {
		t.Fatal("the command ran")
	}
	var id hostedrunner.Identity
	if code := p.call("GET", hostedrunner.IdentityPath, nil, nil, &id); code != 200 || !id.Ready || id.Draining {
		t.Fatalf("identity after the attacks: %d %+v", code, id)
	}
	code, body := send("POST", "/api/headless/sessions/session_123/subscribe", sub, map[string]string{"Content-Type": "application/json"})
	var s struct {
		SubscriptionID string `json:"subscription_id"`
	}
	if err := json.Unmarshal(body, &s); code != 200 || err != nil || s.SubscriptionID == "" {
		t.Fatalf("subscribe with the runner's Host: %d %s", code, body)
	}
}
