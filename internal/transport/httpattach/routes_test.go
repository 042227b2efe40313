package httpattach_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// TestRoutesAndErrors: every route's answer shape and the contract's
// error texts (§11.4, §11.5).
func TestRoutesAndErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	v := prototest.Validator(t)
	id := s.createSession(map[string]any{"protocolVersion": "2026-04-02", "clientInfo": map[string]any{"name": "test"}, "thinkingLevel": "off", "client": "generic"})

	// /:id and /:id/state serve the same valid snapshot.
	for _, p := range []string{"", "/state"} {
		st, body := s.call("GET", "/api/headless/sessions/"+id+p, nil, nil, nil)
		if st != 200 {
			t.Fatalf("GET %s: %d %s", p, st, body)
		}
		if err := v.ValidateSnapshot(body); err != nil {
			t.Errorf("GET %s: snapshot does not validate: %v\n%s", p, err, body)
		}
	}
	// Re-attaching by sessionId returns the same session.
	if again := s.createSession(map[string]any{"sessionId": id}); again != id {
		t.Fatalf("attach by sessionId: %s, want %s", again, id)
	}

	// /connections registers; the answer carries the session and lease.
	var conn struct {
		ConnectionID           string          `json:"connection_id"`
		SessionID              string          `json:"session_id"`
		Role                   string          `json:"role"`
		ControllerLeaseGranted bool            `json:"controller_lease_granted"`
		HeartbeatIntervalMS    int64           `json:"heartbeat_interval_ms"`
		Snapshot               json.RawMessage `json:"snapshot"`
	}
	if st, body := s.call("POST", "/api/headless/connections", map[string]any{"sessionId": id, "capabilities": map[string]any{"serverRequests": []string{"approval"}}}, nil, &conn); st != 200 {
		t.Fatalf("connections: %d %s", st, body)
	}
	if conn.SessionID != id || conn.Role != "controller" || !conn.ControllerLeaseGranted || conn.HeartbeatIntervalMS != 15000 || !strings.HasPrefix(conn.ConnectionID, "conn_") {
		t.Fatalf("connection snapshot: %+v", conn)
	}
	if err := v.ValidateSnapshot(conn.Snapshot); err != nil {
		t.Errorf("connection snapshot's snapshot: %v", err)
	}
	// Subscribing on that connection keeps it; the role must match.
	sub := s.subscribe(id, map[string]any{"connectionId": conn.ConnectionID})
	if sub.ConnectionID != conn.ConnectionID || !strings.HasPrefix(sub.SubscriptionID, "sub_") || sub.ControllerSubscriptionID == nil || *sub.ControllerSubscriptionID != sub.SubscriptionID {
		t.Fatalf("subscription: %+v", sub)
	}
	st, body := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", map[string]any{"connectionId": conn.ConnectionID, "role": "viewer"}, nil, nil)
	wantError(t, st, body, http.StatusBadRequest, "bad_request", "Headless connection role does not match subscription role")
	// /message (singular) is an alias; the ack carries the cursor.
	var ack struct {
		OK, Success, Accepted bool
		Cursor                int64
		Execution             string
		PublishedMessages     int64 `json:"published_messages"`
		Message               string
	}
	if st, body := s.call("POST", "/api/headless/sessions/"+id+"/message", `{"type":"init"}`, hdr{"x-evalops-headless-subscription-id": sub.SubscriptionID}, &ack); st != 200 {
		t.Fatalf("message: %d %s", st, body)
	}
	if !ack.OK || !ack.Success || !ack.Accepted || ack.Cursor == 0 || ack.Execution != "runtime_handled" || ack.PublishedMessages != 1 || ack.Message != "Maestro headless runtime accepted the init message" {
		t.Fatalf("ack: %+v", ack)
	}

	cases := []struct {
		name, method, path, body string
		h                        hdr
		status                   int
		code, text               string
	}{
		{"unknown session", "GET", "/api/headless/sessions/nope/state", "", nil, 404, "not_found", "Headless session not found"},
		{"unknown session events", "GET", "/api/headless/sessions/nope/events", "", nil, 404, "not_found", "Headless session not found"},
		{"create unknown sessionId", "POST", "/api/headless/sessions", `{"sessionId":"nope"}`, nil, 404, "not_found", "Session not found"},
		{"unknown connectionId", "POST", "/api/headless/connections", `{"sessionId":"` + id + `","connectionId":"conn_x"}`, nil, 404, "stale_connection", "Headless connection not found"},
		{"unknown subscriber events", "GET", "/api/headless/sessions/" + id + "/events?subscriptionId=sub_x", "", nil, 404, "not_found", "Headless subscriber not found"},
		{"unknown subscriber message", "POST", "/api/headless/sessions/" + id + "/messages", `{"type":"init"}`, hdr{"x-composer-headless-subscriber-id": "sub_x"}, 404, "not_found", "Headless subscriber not found"},
		{"unknown connection message", "POST", "/api/headless/sessions/" + id + "/messages", `{"type":"init"}`, hdr{"x-maestro-headless-connection-id": "conn_x"}, 404, "stale_connection", "Headless connection not found"},
		{"unsubscribe unknown", "POST", "/api/headless/sessions/" + id + "/unsubscribe", `{"subscriptionId":"sub_x"}`, nil, 404, "not_found", "Headless subscriber not found"},
		{"unknown body field", "POST", "/api/headless/sessions", `{"sessionID":"x"}`, nil, 400, "bad_request", "body/sessionID Unexpected property"},
		{"takeControl on create", "POST", "/api/headless/sessions", `{"takeControl":true}`, nil, 400, "bad_request", "body/takeControl Unexpected property"},
		{"bad role", "POST", "/api/headless/sessions/" + id + "/subscribe", `{"role":"admin"}`, nil, 400, "bad_request", `body/role must be one of [controller viewer], got "admin"`},
		// Bodies that are not what a route takes are said in JSON's words,
		// not Go's (it said "cannot unmarshal array into Go value of type
		// map[string]json.RawMessage").
		{"array body", "POST", "/api/headless/sessions", `[]`, nil, 400, "bad_request", "Invalid JSON payload: expected a JSON object, found JSON array"},
		{"field of the wrong type", "POST", "/api/headless/sessions/" + id + "/subscribe", `{"role":7}`, nil, 400, "bad_request", "body/role expected a string, found JSON number"},
		{"malformed body", "POST", "/api/headless/sessions", `{"approvalMode":`, nil, 400, "bad_request", "Invalid JSON payload: unexpected end of JSON input"},
		{"bad body opt-out", "POST", "/api/headless/sessions/" + id + "/subscribe", `{"optOutNotifications":["status","nope"]}`, nil, 400, "bad_request", `body/optOutNotifications must be one of [status heartbeat connection_info compaction], got "nope"`},
		{"repeated opt-out", "POST", "/api/headless/sessions/" + id + "/subscribe", `{"optOutNotifications":["status","status"]}`, nil, 400, "bad_request", "body/optOutNotifications must not repeat status"},
		{"bad server request", "POST", "/api/headless/sessions/" + id + "/subscribe", `{"capabilities":{"serverRequests":["approval","telepathy"]}}`, nil, 400, "bad_request", `body/capabilities/serverRequests must be one of [approval client_tool mcp_elicitation user_input tool_retry], got "telepathy"`},
		{"repeated utility operation", "POST", "/api/headless/sessions/" + id + "/subscribe", `{"capabilities":{"utilityOperations":["file_read","file_read"]}}`, nil, 400, "bad_request", "body/capabilities/utilityOperations must not repeat file_read"},
		{"client tools need capability", "POST", "/api/headless/sessions", `{"enableClientTools":true}`, nil, 400, "bad_request", "client_tool capability is required when enableClientTools is true"},
		{"empty message", "POST", "/api/headless/sessions/" + id + "/messages", ``, nil, 400, "bad_request", "Request body required"},
		{"unknown message type", "POST", "/api/headless/sessions/" + id + "/messages", `{"type":"dance"}`, hdr{"x-maestro-headless-subscriber-id": sub.SubscriptionID}, 400, "bad_request", "Failed to parse command: Unknown headless command type"},
		{"unknown message field", "POST", "/api/headless/sessions/" + id + "/messages", `{"type":"init","unexpected":1}`, hdr{"x-maestro-headless-subscriber-id": sub.SubscriptionID}, 400, "bad_request", "Failed to parse command: Invalid headless command: /unexpected Unexpected property"},
		{"unsubscribe without body", "POST", "/api/headless/sessions/" + id + "/unsubscribe", ``, nil, 400, "bad_request", "Request body required"},
		{"unsubscribe naming none", "POST", "/api/headless/sessions/" + id + "/unsubscribe", `{}`, nil, 400, "bad_request", "subscriptionId is required"},
		{"bad opt-out", "GET", "/api/headless/sessions/" + id + "/events?optOutNotifications=status,nope", "", nil, 400, "bad_request", `query.optOutNotifications must be one of [status heartbeat connection_info compaction], got "nope"`},
		// A misspelt parameter was ignored: the stream started from now.
		{"unknown query parameter", "GET", "/api/headless/sessions/" + id + "/events?curser=3", "", nil, 400, "bad_request", "query.curser is not a parameter of this route: it takes cursor, subscriptionId and optOutNotifications"},
		{"unknown route", "GET", "/api/headless/elsewhere", "", nil, 404, "not_found", "No headless route GET /api/headless/elsewhere"},
	}
	for _, c := range cases {
		st, body := s.call(c.method, c.path, c.body, c.h, nil)
		t.Run(c.name, func(t *testing.T) { wantError(t, st, body, c.status, c.code, c.text) })
	}

	// Unsubscribing the connection's last subscription closes it.
	var ok map[string]bool
	if st, body := s.call("POST", "/api/headless/sessions/"+id+"/unsubscribe", map[string]string{"subscriptionId": sub.SubscriptionID}, nil, &ok); st != 200 || !ok["success"] {
		t.Fatalf("unsubscribe: %d %s", st, body)
	}
	st, body = s.call("POST", "/api/headless/sessions/"+id+"/heartbeat", map[string]string{"connectionId": conn.ConnectionID}, nil, nil)
	wantError(t, st, body, 404, "stale_connection", "Headless connection not found")
}

// TestShutdownDisposesRuntime: a shutdown message over HTTP ends the
// runtime: its streams end and the session is gone.
func TestShutdownDisposesRuntime(t *testing.T) {
	t.Parallel()
	s, id, c := newControlledSession(t)
	st := s.open(id, "", nil)
	st.next()
	s.mustSend(id, c.SubscriptionID, `{"type":"shutdown"}`)
	st.Ended()
	// The session was forgotten before the runtime closed its streams.
	if _, ok := s.sessions.Get(id); ok {
		t.Fatalf("the session outlived its runtime")
	}
	code, body := s.call("GET", "/api/headless/sessions/"+id, nil, nil, nil)
	wantError(t, code, body, 404, "not_found", "Headless session not found")
}

// TestAnonymousController: requests naming no connection share one
// controller that claims a free lease with its first message.
func TestAnonymousController(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	id := s.createSession(nil)
	st := s.open(id, "", nil)
	st.next()
	s.mustSend(id, "", `{"type":"prompt","content":"hi"}`)
	st.until("response_end")
	s.mustSend(id, "", `{"type":"init"}`)
	code, body := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", `{"role":"controller"}`, nil, nil)
	wantError(t, code, body, 409, "controller_lease_held", "Controller lease is already held by another connection")
}

// TestInterruptPublishesSnapshot: after an interrupt or cancel over HTTP
// every stream gets a snapshot envelope (wire contract §8.9 step 4) with a
// cursor of its own, after the frames before it.
func TestInterruptPublishesSnapshot(t *testing.T) {
	t.Parallel()
	s, id, c := newControlledSession(t)
	st := s.open(id, "subscriptionId="+c.SubscriptionID, nil)
	for _, msg := range []string{`{"type":"interrupt"}`, `{"type":"cancel"}`} {
		s.mustSend(id, c.SubscriptionID, `{"type":"init"}`)
		status := st.next()
		if status.msgType() != "status" {
			t.Fatalf("before the %s: %s", msg, status.raw)
		}
		s.mustSend(id, c.SubscriptionID, msg)
		e := st.next()
		if e.Type != "snapshot" {
			t.Fatalf("after the %s: %s, want a snapshot", msg, e.raw)
		}
		if !strings.Contains(e.raw, `"is_responding":false`) || e.snapCursor() != status.Cursor+1 {
			t.Errorf("snapshot after %s at cursor %d, want %d: %s", msg, e.snapCursor(), status.Cursor+1, e.raw)
		}
	}
}

// TestCloseEndsStreams: Handler.Close ends every event stream.
func TestCloseEndsStreams(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	id := s.createSession(nil)
	st := s.open(id, "", nil)
	st.next()
	s.h.Close()
	st.Ended()
}

// ownedElsewhere is a Sessions bound to one session that explains misses.
type ownedElsewhere struct{ *httpattach.SessionMap }

func (ownedElsewhere) Missing(id string) error {
	return &httpattach.Error{Status: http.StatusConflict, Code: httpattach.CodeRuntimeOwnedElsewhere, Message: "Hosted runner is bound to another session: " + id}
}

// TestSessionMissing: a Sessions implementing SessionMissing answers for
// unknown ids.
func TestSessionMissing(t *testing.T) {
	t.Parallel()
	h := httpattach.NewHandler(httpattach.Config{Sessions: ownedElsewhere{httpattach.NewSessionMap(nil)}, SweepInterval: -1})
	defer h.Close()
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "/api/headless/sessions/other/state", nil),
		httptest.NewRequest("POST", "/api/headless/sessions", strings.NewReader(`{"sessionId":"other"}`)),
	} {
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		wantError(t, rec.Code, rec.Body.Bytes(), http.StatusConflict, "runtime_owned_elsewhere", "Hosted runner is bound to another session: other")
	}
	// Without a NewRuntime, Create refuses.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/headless/sessions", nil))
	wantError(t, rec.Code, rec.Body.Bytes(), http.StatusNotFound, "not_found", "Session not found")
}

// TestRoutesListed: Routes names exactly the contract's routes (§11.1)
// plus Maestro's GET /api/headless/sessions (the live sessions' list) and
// POST …/attachments (uploads for a prompt's attachments, issue 18), and each is served by its handler rather than the JSON 404 of unknown
// paths.
func TestRoutesListed(t *testing.T) {
	t.Parallel()
	h := httpattach.NewHandler(httpattach.Config{Sessions: httpattach.NewSessionMap(nil), SweepInterval: -1})
	defer h.Close()
	want := []string{
		"POST /api/headless/sessions", "GET /api/headless/sessions", "POST /api/headless/connections",
		"GET /api/headless/sessions/{id}", "GET /api/headless/sessions/{id}/state",
		"POST /api/headless/sessions/{id}/subscribe", "POST /api/headless/sessions/{id}/unsubscribe",
		"GET /api/headless/sessions/{id}/events", "POST /api/headless/sessions/{id}/messages",
		"POST /api/headless/sessions/{id}/message", "POST /api/headless/sessions/{id}/heartbeat",
		"POST /api/headless/sessions/{id}/disconnect", "POST /api/headless/sessions/{id}/attachments",
	}
	got := h.Routes()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, r := range got {
		method, path, _ := strings.Cut(r, " ")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, strings.ReplaceAll(path, "{id}", "s1"), strings.NewReader("{}")))
		if strings.Contains(rec.Body.String(), "No headless route") {
			t.Errorf("%s is listed but not served: %d %s", r, rec.Code, rec.Body)
		}
	}
	// An unlisted one is the JSON 404.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/api/headless/sessions/s1", nil))
	if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
}

// TestMessageReplySnapshot: the snapshot answering POST …/messages is taken
// once the message is handled (wire contract §11.4, as the reference
// servers answer): a prompt's answer already shows the status its turn
// publishes first, even when the turn does some work before it, and
// counts it in published_messages.
func TestMessageReplySnapshot(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	turn := func(ctx context.Context, tn *runtime.Turn, m protocol.Prompt) error {
		// Work before the first message: the answer must not be taken
		// in the meantime.
		if _, err := os.ReadDir(os.TempDir()); err != nil {
			return err
		}
		tn.Publish(protocol.Status{Message: "Prompt: " + m.Content})
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	s := newServer(t, options{turn: turn})
	defer close(release)
	id := s.createSession(nil)
	c := s.subscribe(id, map[string]any{"role": "controller"})
	var ack struct {
		Cursor            int64           `json:"cursor"`
		PublishedMessages int64           `json:"published_messages"`
		Snapshot          json.RawMessage `json:"snapshot"`
	}
	st, body := s.call("POST", "/api/headless/sessions/"+id+"/messages", `{"type":"prompt","content":"hello"}`,
		hdr{"x-maestro-headless-subscriber-id": c.SubscriptionID}, &ack)
	if st != http.StatusOK {
		t.Fatalf("prompt: %d %s", st, body)
	}
	if err := prototest.Validator(t).ValidateSnapshot(ack.Snapshot); err != nil {
		t.Errorf("reply snapshot does not validate: %v", err)
	}
	var snap struct {
		Cursor int64 `json:"cursor"`
		State  struct {
			LastStatus   string `json:"last_status"`
			IsResponding bool   `json:"is_responding"`
		} `json:"state"`
	}
	if err := json.Unmarshal(ack.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.State.LastStatus != "Prompt: hello" || !snap.State.IsResponding {
		t.Errorf("reply snapshot state: last_status %q is_responding %v, want \"Prompt: hello\" while responding", snap.State.LastStatus, snap.State.IsResponding)
	}
	if ack.PublishedMessages < 1 || ack.Cursor != snap.Cursor {
		t.Errorf("ack cursor %d published_messages %d, snapshot cursor %d", ack.Cursor, ack.PublishedMessages, snap.Cursor)
	}
	// A file read runs in the background too: its answer counts the
	// published result.
	if err := os.WriteFile(filepath.Join(s.workspace, "notes.md"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.subscribe(id, map[string]any{"role": "controller", "takeControl": true, "capabilities": map[string]any{"utilityOperations": []string{"file_read"}}})
	ack.PublishedMessages = 0
	st, body = s.call("POST", "/api/headless/sessions/"+id+"/messages", `{"type":"utility_file_read","read_id":"r1","path":"notes.md"}`,
		hdr{"x-maestro-headless-subscriber-id": r.SubscriptionID}, &ack)
	if st != http.StatusOK || ack.PublishedMessages < 1 {
		t.Errorf("file read answer: %d published_messages %d, want ≥ 1: %s", st, ack.PublishedMessages, body)
	}
}
