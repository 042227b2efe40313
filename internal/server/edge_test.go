package server_test

import (
	"net/http"
	"testing"

	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
)

// TestEdgeAttacks: a DNS-rebinding page (Host: attacker.example), a
// cross-site page and a text/plain "simple" request (no CORS preflight)
// cannot create tasks, comment, cancel, store pieces or schedules, or read
// event streams; nothing is stored. Proper requests still work.
func TestEdgeAttacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	ct := e.createTask("victim", nil)
	task, job := ct.paths()
	const textPlain = "text/plain;charset=UTF-8"
	attacks := []struct {
		name string
		hdr  []string
		read bool // reads are refused too
	}{
		{"rebound host", []string{"Host", "attacker.example", "Origin", "http://attacker.example", "Content-Type", textPlain}, true},
		{"rebound host, JSON", []string{"Host", "attacker.example:7878", "Content-Type", "application/json"}, true},
		{"cross-site origin", []string{"Origin", "https://attacker.example", "Content-Type", "application/json"}, true},
		{"cross-site fetch metadata", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Content-Type", "application/json"}, true},
		{"origin of another port", []string{"Origin", "http://localhost:1", "Content-Type", "application/json"}, true},
		{"text/plain simple request", []string{"Content-Type", textPlain}, false},
		{"form simple request", []string{"Content-Type", "application/x-www-form-urlencoded"}, false},
		{"no content type", nil, false},
	}
	for _, a := range attacks {
		for _, step := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/api/v1/tasks", `{"title":"pwned"}`},
			{"POST", task + "/comments", `{"body":"pwned"}`},
			{"POST", job + "/cancel", `{"reason":"pwned"}`},
			{"POST", "/api/v1/pieces", pieceYAML("pwned")},
			{"POST", "/api/v1/schedules", `{"name":"pwned","cron_expr":"* * * * *","title":"pwned"}`},
			{"GET", job + "/events", nil},
			{"GET", "/api/v1/tasks", nil},
		} {
			if step.method == "GET" && !a.read {
				continue
			}
			if a.name == "no content type" && step.path == "/api/v1/pieces" {
				continue // YAML without a type is the piece route's own format
			}
			code, body := e.do(step.method, step.path, step.body, a.hdr...)
			if code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
				t.Errorf("%s: %s %s: %d %s, want 403 or 415", a.name, step.method, step.path, code, body)
			}
		}
	}
	tasks, err := e.st.ListTasks(t.Context(), store.TaskFilter{})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks after the attacks: %d %v", len(tasks), err)
	}
	j, err := e.st.GetJob(t.Context(), ct.Job.ID)
	if err != nil || j.State == store.StateCancelled {
		t.Fatalf("job after the attacks: %+v %v", j, err)
	}
	if _, err := e.st.GetPiece(t.Context(), "pwned"); err == nil {
		t.Fatal("a piece was stored")
	}
	if s, err := e.st.ListSchedules(t.Context()); err != nil || len(s) != 0 {
		t.Fatalf("schedules after the attacks: %v %v", s, err)
	}

	// A top-level navigation from another site may read (its page cannot
	// see the answer); the same-origin UI and non-browser clients work.
	if code, body := e.do("GET", "/api/v1/tasks", nil, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"); code != 200 {
		t.Fatalf("navigation: %d %s", code, body)
	}
	origin := e.ts.URL
	if code, body := e.do("POST", task+"/comments", map[string]string{"body": "fine"}, "Origin", origin, "Sec-Fetch-Site", "same-origin"); code != http.StatusCreated {
		t.Fatalf("same-origin comment: %d %s", code, body)
	}
	if code, body := e.do("POST", "/api/v1/pieces", pieceYAML("mine"), "Content-Type", "application/yaml"); code != http.StatusCreated {
		t.Fatalf("YAML piece: %d %s", code, body)
	}
}

// TestEdgeBearer: the bearer scheme is case-insensitive (RFC 7235), the
// contract's API key header works on every route, a 401 carries one
// WWW-Authenticate header, and a listener beyond loopback needs a token.
func TestEdgeBearer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.Token, c.RequireAuth = "tok", true })
	for _, hdr := range [][]string{{"Authorization", "bearer tok"}, {"Authorization", "BEARER  tok"}, {"x-maestro-api-key", "tok"}} {
		if code, body := e.do("GET", "/api/v1/tasks", nil, hdr...); code != 200 {
			t.Errorf("%v: %d %s", hdr, code, body)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.ts.URL+"/api/v1/tasks", nil)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || len(resp.Header.Values("WWW-Authenticate")) != 1 {
		t.Fatalf("401: %d %q", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	for _, cfg := range []server.Config{
		{Store: e.st, Listen: "0.0.0.0:7878"},
		{Store: e.st, Listen: "192.0.2.1:7878", Token: "tok"},
		{Store: e.st, AllowedHosts: []string{"*"}},
	} {
		if _, err := server.New(cfg); err == nil {
			t.Errorf("%+v was accepted", cfg)
		}
	}
}
