package httpattach_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// TestApprovalOverHTTP: an approval server_request raised by the agent is
// answered over HTTP, approved with the generic answer and denied with
// the legacy tool_response; a viewer sees it all but cannot answer.
func TestApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{scenario: "approval"})
	id := s.createSession(map[string]any{"approvalMode": "prompt"})
	c := s.subscribe(id, map[string]any{"role": "controller", "capabilities": map[string]any{"serverRequests": []string{"approval"}}})
	v := s.subscribe(id, map[string]any{"role": "viewer"})
	cs := s.open(id, "subscriptionId="+c.SubscriptionID, nil)
	vs := s.open(id, "subscriptionId="+v.SubscriptionID, nil)
	s.mustSend(id, c.SubscriptionID, `{"type":"prompt","content":"write two files"}`)

	req := cs.until("server_request")
	var sr struct {
		RequestID   string `json:"request_id"`
		RequestType string `json:"request_type"`
		Tool        string `json:"tool"`
		Reason      string `json:"reason"`
	}
	json.Unmarshal(req[len(req)-1].Message, &sr)
	if sr.RequestID != "call_a" || sr.RequestType != "approval" || sr.Tool != "Write" || sr.Reason != "Requires approval" {
		t.Fatalf("server_request: %s", req[len(req)-1].raw)
	}
	var state struct {
		State struct {
			PendingApprovals []struct {
				CallID string `json:"call_id"`
			} `json:"pending_approvals"`
		} `json:"state"`
	}
	s.call("GET", "/api/headless/sessions/"+id+"/state", nil, nil, &state)
	if len(state.State.PendingApprovals) != 1 || state.State.PendingApprovals[0].CallID != "call_a" {
		t.Fatalf("pending approvals: %+v", state.State.PendingApprovals)
	}
	st, body := s.send(id, v.SubscriptionID, `{"type":"server_request_response","request_id":"call_a","request_type":"approval","approved":true}`)
	wantError(t, st, body, http.StatusForbidden, "access_denied", "Viewer headless connections cannot send messages")
	st, body = s.send(id, c.SubscriptionID, `{"type":"server_request_response","request_id":"nope","request_type":"approval","approved":true}`)
	wantError(t, st, body, http.StatusForbidden, "access_denied", "No pending server request found for request_id: nope")

	s.mustSend(id, c.SubscriptionID, `{"type":"server_request_response","request_id":"call_a","request_type":"approval","approved":true}`)
	resolved := cs.until("server_request_resolved")
	wantResolved(t, resolved[len(resolved)-1], "call_a", "approved", "user")
	cs.until("server_request")
	s.mustSend(id, c.SubscriptionID, `{"type":"tool_response","call_id":"call_b","approved":false,"result":{"success":false,"output":"","error":"Not that one"}}`)
	resolved = cs.until("server_request_resolved")
	wantResolved(t, resolved[len(resolved)-1], "call_b", "denied", "user")
	cs.until("response_end")

	// The viewer saw the same requests and resolutions.
	var seen []string
	for len(seen) < 4 {
		e := vs.next()
		if k := e.msgType(); k == "server_request" || k == "server_request_resolved" {
			seen = append(seen, k)
		}
	}
	if _, err := os.Stat(filepath.Join(s.workspace, "a.txt")); err != nil {
		t.Errorf("the approved write did not happen: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.workspace, "b.txt")); err == nil {
		t.Errorf("the denied write happened")
	}
}

func wantResolved(t *testing.T, e envelope, id, resolution, by string) {
	t.Helper()
	var r struct {
		RequestID  string `json:"request_id"`
		Resolution string `json:"resolution"`
		ResolvedBy string `json:"resolved_by"`
	}
	json.Unmarshal(e.Message, &r)
	if r.RequestID != id || r.Resolution != resolution || r.ResolvedBy != by {
		t.Fatalf("resolution %s, want %s %s by %s", e.raw, id, resolution, by)
	}
}

// TestUtilitiesOverHTTP: file read, search, command and watch over HTTP,
// owned by the connection that started them (owner_connection_id), which
// nobody else may stop, and stopped when that connection leaves.
func TestUtilitiesOverHTTP(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	if err := os.WriteFile(filepath.Join(s.workspace, "notes.md"), []byte("alpha\nbeta\ngamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.workspace, "watched"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := s.createSession(nil)
	all := map[string]any{"utilityOperations": []string{"command_exec", "file_search", "file_read", "file_watch"}}
	c := s.subscribe(id, map[string]any{"role": "controller", "capabilities": all})
	cs := s.open(id, "subscriptionId="+c.SubscriptionID, nil)

	s.mustSend(id, c.SubscriptionID, `{"type":"utility_file_read","read_id":"r1","path":"notes.md","limit":2}`)
	got := cs.until("utility_file_read_result")
	var read struct {
		ReadID, Content string
		Truncated       bool
	}
	json.Unmarshal(got[len(got)-1].Message, &read)
	if read.Content != "alpha\nbeta" || !read.Truncated {
		t.Fatalf("file read: %s", got[len(got)-1].raw)
	}

	s.mustSend(id, c.SubscriptionID, `{"type":"utility_file_search","search_id":"s1","query":"notes"}`)
	got = cs.until("utility_file_search_results")
	if !strings.Contains(got[len(got)-1].raw, `"path":"notes.md"`) {
		t.Fatalf("file search: %s", got[len(got)-1].raw)
	}

	s.mustSend(id, c.SubscriptionID, `{"type":"utility_command_start","command_id":"c1","command":"echo hello-http","shell_mode":"shell"}`)
	started := cs.until("utility_command_started")
	wantOwner(t, started[len(started)-1], c.ConnectionID)
	out := cs.until("utility_command_exited")
	var text strings.Builder
	for _, e := range out {
		if e.msgType() == "utility_command_output" {
			var o struct{ Content string }
			json.Unmarshal(e.Message, &o)
			text.WriteString(o.Content)
		}
	}
	if !strings.Contains(text.String(), "hello-http") || !strings.Contains(out[len(out)-1].raw, `"success":true`) {
		t.Fatalf("command output %q, exit %s", text.String(), out[len(out)-1].raw)
	}

	s.mustSend(id, c.SubscriptionID, `{"type":"utility_file_watch_start","watch_id":"w1","root_dir":"watched","debounce_ms":0}`)
	ws := cs.until("utility_file_watch_started")
	wantOwner(t, ws[len(ws)-1], c.ConnectionID)
	if err := os.WriteFile(filepath.Join(s.workspace, "watched", "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := cs.until("utility_file_watch_event")
	if !strings.Contains(ev[len(ev)-1].raw, `"relative_path":"new.txt"`) {
		t.Fatalf("watch event: %s", ev[len(ev)-1].raw)
	}
	// A long command, owned by c.
	s.mustSend(id, c.SubscriptionID, `{"type":"utility_command_start","command_id":"c2","command":"sleep 60"}`)
	cs.until("utility_command_started")
	var state struct {
		State struct {
			Commands []struct {
				CommandID         string `json:"command_id"`
				OwnerConnectionID string `json:"owner_connection_id"`
			} `json:"active_utility_commands"`
			Watches []struct {
				WatchID           string `json:"watch_id"`
				OwnerConnectionID string `json:"owner_connection_id"`
			} `json:"active_file_watches"`
		} `json:"state"`
	}
	s.call("GET", "/api/headless/sessions/"+id, nil, nil, &state)
	if len(state.State.Watches) != 1 || state.State.Watches[0].OwnerConnectionID != c.ConnectionID {
		t.Fatalf("active watches %+v", state.State.Watches)
	}
	if len(state.State.Commands) != 1 || state.State.Commands[0].CommandID != "c2" || state.State.Commands[0].OwnerConnectionID != c.ConnectionID {
		t.Fatalf("active commands %+v", state.State.Commands)
	}

	// Another controller takes over; it may not stop what c owns.
	other := s.subscribe(id, map[string]any{"role": "controller", "takeControl": true, "capabilities": all})
	st, body := s.send(id, other.SubscriptionID, `{"type":"utility_file_watch_stop","watch_id":"w1"}`)
	wantError(t, st, body, http.StatusForbidden, "access_denied", "Headless file watch w1 is owned by another connection")
	st, body = s.send(id, other.SubscriptionID, `{"type":"utility_command_terminate","command_id":"c2"}`)
	wantError(t, st, body, http.StatusForbidden, "access_denied", "Headless command c2 is owned by another connection")

	// When the owner disconnects, its command and watch end.
	others := s.open(id, "subscriptionId="+other.SubscriptionID, nil)
	if st, body := s.call("POST", "/api/headless/sessions/"+id+"/disconnect", map[string]string{"connectionId": c.ConnectionID}, nil, nil); st != 200 {
		t.Fatalf("disconnect: %d %s", st, body)
	}
	var exited, stopped string
	for exited == "" || stopped == "" {
		e := others.next()
		switch e.msgType() {
		case "utility_command_exited":
			exited = e.raw
		case "utility_file_watch_stopped":
			stopped = e.raw
		}
	}
	if !strings.Contains(exited, "Owning connection closed while utility command was still running") {
		t.Errorf("command exit: %s", exited)
	}
	if !strings.Contains(stopped, "Owning connection closed while file watch was still running") {
		t.Errorf("watch stop: %s", stopped)
	}
}

func wantOwner(t *testing.T, e envelope, conn string) {
	t.Helper()
	var m struct {
		Owner string `json:"owner_connection_id"`
	}
	json.Unmarshal(e.Message, &m)
	if m.Owner != conn {
		t.Fatalf("%s: owner_connection_id %q, want %q", e.raw, m.Owner, conn)
	}
}

// TestUtilityPathsOutsideWorkspace: over HTTP a utility message naming a
// path outside the workspace — file read path (and its cwd), file search
// and command cwd, watch root_dir; absolute, "..", through a symbolic
// link, or not existing yet below a link out — is refused by the POST
// itself with 403 workspace_violation (wire contract §10, hosted rule),
// and nothing about it reaches the stream. Paths inside, existing or not,
// are accepted.
func TestUtilityPathsOutsideWorkspace(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(s.workspace, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.workspace, "notes.md"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := s.createSession(nil)
	all := map[string]any{"utilityOperations": []string{"command_exec", "file_search", "file_read", "file_watch"}}
	c := s.subscribe(id, map[string]any{"role": "controller", "capabilities": all})
	cs := s.open(id, "subscriptionId="+c.SubscriptionID, nil)
	js := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	secret := filepath.Join(outside, "secret.txt")

	refused := []struct{ name, msg string }{
		{"read absolute", `{"type":"utility_file_read","read_id":"r1","path":` + js(secret) + `}`},
		{"read dot-dot", `{"type":"utility_file_read","read_id":"r2","path":"../secret.txt"}`},
		{"read through link", `{"type":"utility_file_read","read_id":"r3","path":"out/secret.txt"}`},
		{"read missing below link", `{"type":"utility_file_read","read_id":"r4","path":"out/not/yet.txt"}`},
		{"read cwd outside", `{"type":"utility_file_read","read_id":"r5","path":"secret.txt","cwd":` + js(outside) + `}`},
		{"search cwd", `{"type":"utility_file_search","search_id":"s1","query":"secret","cwd":"out"}`},
		{"search missing cwd below link", `{"type":"utility_file_search","search_id":"s2","query":"x","cwd":"out/new"}`},
		{"command cwd", `{"type":"utility_command_start","command_id":"c1","command":"ls","cwd":` + js(outside) + `}`},
		{"watch root", `{"type":"utility_file_watch_start","watch_id":"w1","root_dir":"out"}`},
		{"watch missing root outside", `{"type":"utility_file_watch_start","watch_id":"w2","root_dir":"../nowhere/yet"}`},
	}
	for _, tc := range refused {
		st, body := s.send(id, c.SubscriptionID, tc.msg)
		if st != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", tc.name, st, body)
			continue
		}
		wantError(t, st, body, http.StatusForbidden, "workspace_violation", "Path is outside hosted workspace root")
	}
	// Inside, a path that does not exist yet is the operation's business
	// (accepted, then reported on the stream).
	s.mustSend(id, c.SubscriptionID, `{"type":"utility_file_read","read_id":"in1","path":"later/new.txt"}`)
	s.mustSend(id, c.SubscriptionID, `{"type":"utility_file_read","read_id":"in2","path":"notes.md"}`)
	// The refused requests left nothing on the stream: the first messages
	// after the subscription are the two accepted reads' answers.
	for _, e := range cs.until("utility_file_read_result") {
		if e.Type != "message" {
			continue
		}
		var m struct {
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
		}
		json.Unmarshal(e.Message, &m)
		if m.Type == "error" && m.RequestID != "in1" {
			t.Errorf("stream carried an error for a refused request: %s", e.raw)
		}
		if strings.HasPrefix(m.Type, "utility_command") || strings.HasPrefix(m.Type, "utility_file_watch") || m.Type == "utility_file_search_results" {
			t.Errorf("a refused request ran: %s", e.raw)
		}
	}
}

// TestUtilityCapability: utilities need the capability the connection
// registered.
func TestUtilityCapability(t *testing.T) {
	t.Parallel()
	s, id, c := newControlledSession(t)
	st, body := s.send(id, c.SubscriptionID, `{"type":"utility_file_read","read_id":"r","path":"x"}`)
	wantError(t, st, body, http.StatusForbidden, "access_denied", "utility_file_read requires file_read capability")
}

// TestAuth: with a token, /api requests without it (or with a wrong one)
// get 401; the bearer header and both API key headers are accepted.
func TestAuth(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{cfg: httpattach.Config{Token: "s3cret", RequireAuth: true}})
	id := s.createSession(nil) // with the token (helpers send it)
	s.token = ""
	for _, h := range []hdr{nil, {"Authorization": "Bearer wrong"}, {"x-maestro-api-key": "s3cre"}, {"Authorization": "Basic s3cret"}} {
		st, body := s.call("GET", "/api/headless/sessions/"+id, nil, h, nil)
		wantError(t, st, body, http.StatusUnauthorized, "access_denied", "Unauthorized: a valid API key is required (Authorization: Bearer <token> or x-maestro-api-key)")
		st, _ = s.call("GET", "/api/headless/sessions/"+id+"/events", nil, h, nil)
		if st != http.StatusUnauthorized {
			t.Errorf("events without a token: %d", st)
		}
	}
	for _, h := range []hdr{{"Authorization": "Bearer s3cret"}, {"authorization": "bearer s3cret"}, {"x-maestro-api-key": "s3cret"}, {"x-composer-api-key": "s3cret"}} {
		if st, body := s.call("GET", "/api/headless/sessions/"+id, nil, h, nil); st != 200 {
			t.Errorf("with %v: %d %s", h, st, body)
		}
	}
	// RequireAuth without a token refuses everything.
	locked := newServer(t, options{cfg: httpattach.Config{RequireAuth: true}})
	st, body := locked.call("POST", "/api/headless/sessions", `{}`, hdr{"Authorization": "Bearer anything"}, nil)
	wantError(t, st, body, http.StatusUnauthorized, "access_denied", "Unauthorized: a valid API key is required (Authorization: Bearer <token> or x-maestro-api-key)")
	// RequireAuth guards /api and leaves health and identity open.
	mw := s.h.RequireAuth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for path, want := range map[string]int{"/healthz": 204, "/readyz": 204, "/.well-known/evalops/remote-runner/identity": 204, "/api/other": 401, "/debug/x": 401} {
		rec := newRecorder()
		req, _ := http.NewRequest("GET", path, nil)
		mw.ServeHTTP(rec, req)
		if rec.code != want {
			t.Errorf("%s: %d, want %d", path, rec.code, want)
		}
	}
}

type recorder struct {
	h    http.Header
	code int
}

func newRecorder() *recorder                    { return &recorder{h: http.Header{}, code: 200} }
func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }
