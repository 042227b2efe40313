package httpattach_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store/storetest"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// TestSecondControllerRejected: while a controller holds the lease, a
// second controller's subscribe and register are refused with 409 and the
// contract's text, and it cannot send either.
func TestSecondControllerRejected(t *testing.T) {
	t.Parallel()
	s, id, first := newControlledSession(t)
	if !first.ControllerLeaseGranted || first.ControllerConnectionID == nil || *first.ControllerConnectionID != first.ConnectionID {
		t.Fatalf("first controller: %+v", first)
	}
	// Keep the first controller's connection busy with a subscription so
	// that a connection-less subscribe does not reuse it.
	for _, route := range []struct{ path, body string }{
		{"/api/headless/sessions/" + id + "/subscribe", `{"role":"controller"}`},
		{"/api/headless/sessions/" + id + "/subscribe", `{}`},
		{"/api/headless/connections", `{"sessionId":"` + id + `","role":"controller"}`},
	} {
		st, body := s.call("POST", route.path, route.body, nil, nil)
		wantError(t, st, body, http.StatusConflict, "controller_lease_held", "Controller lease is already held by another connection")
	}
	// A message from nobody in particular is refused while the lease is held.
	st, body := s.send(id, "", `{"type":"prompt","content":"hi"}`)
	wantError(t, st, body, http.StatusConflict, "controller_lease_held", "Controller lease is currently held by another connection")
	// A viewer may still attach.
	v := s.subscribe(id, map[string]any{"role": "viewer"})
	if v.ControllerLeaseGranted || v.Role != "viewer" {
		t.Fatalf("viewer: %+v", v)
	}
}

// TestTakeControl: takeControl moves the lease; the old controller's
// messages are then refused with 409, the new one's accepted, and the
// takeover shows in heartbeat snapshots.
func TestTakeControl(t *testing.T) {
	t.Parallel()
	s, id, old := newControlledSession(t)
	oldStream := s.open(id, "subscriptionId="+old.SubscriptionID, nil)
	s.mustSend(id, old.SubscriptionID, `{"type":"init","append_system_prompt":"a"}`)

	nw := s.subscribe(id, map[string]any{"role": "controller", "takeControl": true})
	if !nw.ControllerLeaseGranted || nw.ConnectionID == old.ConnectionID || *nw.ControllerConnectionID != nw.ConnectionID {
		t.Fatalf("takeover: %+v", nw)
	}
	st, body := s.send(id, old.SubscriptionID, `{"type":"prompt","content":"still mine?"}`)
	wantError(t, st, body, http.StatusConflict, "controller_lease_held", "Controller lease is currently held by another connection")
	st, body = s.call("POST", "/api/headless/sessions/"+id+"/messages", `{"type":"init"}`, hdr{"x-composer-headless-connection-id": old.ConnectionID}, nil)
	wantError(t, st, body, http.StatusConflict, "controller_lease_held", "Controller lease is currently held by another connection")
	s.mustSend(id, nw.SubscriptionID, `{"type":"init","append_system_prompt":"b"}`)

	var hb struct {
		ConnectionID           string  `json:"connection_id"`
		ControllerLeaseGranted bool    `json:"controller_lease_granted"`
		ControllerConnectionID *string `json:"controller_connection_id"`
		LeaseExpiresAt         *string `json:"lease_expires_at"`
		HeartbeatIntervalMS    int64   `json:"heartbeat_interval_ms"`
	}
	if st, body := s.call("POST", "/api/headless/sessions/"+id+"/heartbeat", map[string]string{"subscriptionId": old.SubscriptionID}, nil, &hb); st != 200 {
		t.Fatalf("heartbeat: %d %s", st, body)
	}
	if hb.ControllerLeaseGranted || hb.ConnectionID != old.ConnectionID || *hb.ControllerConnectionID != nw.ConnectionID || hb.LeaseExpiresAt == nil || hb.HeartbeatIntervalMS != 15000 {
		t.Fatalf("old controller's heartbeat after takeover: %+v", hb)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z", *hb.LeaseExpiresAt); err != nil {
		t.Errorf("lease_expires_at %q is not an ISO time with milliseconds", *hb.LeaseExpiresAt)
	}
	// The old controller can take the lease back explicitly.
	var again subSnap
	if st, body := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", map[string]any{"connectionId": old.ConnectionID, "takeControl": true}, nil, &again); st != 200 || !again.ControllerLeaseGranted {
		t.Fatalf("take back: %d %s", st, body)
	}
	// The old controller's stream saw the takeover in connection_info.
	for {
		e := oldStream.next()
		if e.msgType() != "connection_info" {
			continue
		}
		var ci struct {
			ControllerConnectionID *string `json:"controller_connection_id"`
		}
		json.Unmarshal(e.Message, &ci)
		if ci.ControllerConnectionID != nil && *ci.ControllerConnectionID == nw.ConnectionID {
			break
		}
	}
}

// TestViewerReadOnly: a viewer receives frames but may send only hello;
// it may not negotiate requests only a controller answers.
func TestViewerReadOnly(t *testing.T) {
	t.Parallel()
	s, id, ctl := newControlledSession(t)
	v := s.subscribe(id, map[string]any{"role": "viewer", "capabilities": map[string]any{"serverRequests": []string{"approval"}}})
	vs := s.open(id, "subscriptionId="+v.SubscriptionID, nil)

	for _, msg := range []string{`{"type":"prompt","content":"hi"}`, `{"type":"interrupt"}`, `{"type":"init"}`, `{"type":"shutdown"}`} {
		st, body := s.send(id, v.SubscriptionID, msg)
		wantError(t, st, body, http.StatusForbidden, "access_denied", "Viewer headless connections cannot send messages")
		st, body = s.call("POST", "/api/headless/sessions/"+id+"/message", msg, hdr{"x-maestro-headless-connection-id": v.ConnectionID}, nil)
		wantError(t, st, body, http.StatusForbidden, "access_denied", "Viewer headless connections cannot send messages")
	}
	st, body := s.call("POST", "/api/headless/sessions/"+id+"/messages", `{"type":"prompt","content":"x"}`, hdr{"x-maestro-headless-role": "viewer"}, nil)
	wantError(t, st, body, http.StatusForbidden, "access_denied", "Viewer headless connections cannot send messages")
	// hello is allowed, and its hello_ok is the viewer's alone.
	s.mustSend(id, v.SubscriptionID, `{"type":"hello","role":"viewer"}`)
	var sawHello bool
	for _, e := range vs.until("connection_info") {
		sawHello = sawHello || e.msgType() == "hello_ok"
	}
	if !sawHello {
		t.Errorf("the viewer did not receive its hello_ok")
	}
	// The controller's prompt reaches the viewer.
	s.mustSend(id, ctl.SubscriptionID, `{"type":"prompt","content":"hi"}`)
	vs.until("response_end")

	for _, caps := range []string{"user_input", "mcp_elicitation"} {
		st, body := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", map[string]any{"role": "viewer", "capabilities": map[string]any{"serverRequests": []string{caps}}}, nil, nil)
		wantError(t, st, body, http.StatusBadRequest, "bad_request", "viewer headless connections cannot negotiate "+caps+" requests")
	}
	// tool_retry is refused to viewers on stdio only (wire contract §8.5):
	// over HTTP, create, register and subscribe accept it.
	retry := map[string]any{"serverRequests": []string{"approval", "tool_retry"}}
	if st, body := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", map[string]any{"role": "viewer", "capabilities": retry}, nil, nil); st != http.StatusOK {
		t.Errorf("viewer subscribe with tool_retry: %d %s", st, body)
	}
	if st, body := s.call("POST", "/api/headless/connections", map[string]any{"sessionId": id, "role": "viewer", "capabilities": retry}, nil, nil); st != http.StatusOK {
		t.Errorf("viewer register with tool_retry: %d %s", st, body)
	}
	if st, body := s.call("POST", "/api/headless/sessions", map[string]any{"sessionId": id, "role": "viewer", "capabilities": retry}, nil, nil); st != http.StatusOK {
		t.Errorf("viewer create with tool_retry: %d %s", st, body)
	}
	// A viewer's hello over HTTP may list it too.
	st, body = s.send(id, v.SubscriptionID, `{"type":"hello","role":"viewer","capabilities":{"server_requests":["tool_retry"]}}`)
	if st != http.StatusOK {
		t.Errorf("viewer hello with tool_retry: %d %s", st, body)
	}
	st, body = s.call("POST", "/api/headless/sessions", map[string]any{"role": "viewer", "enableClientTools": true, "capabilities": map[string]any{"serverRequests": []string{"client_tool"}}}, nil, nil)
	wantError(t, st, body, http.StatusBadRequest, "bad_request", "viewer headless connections cannot enable client-side tools")
}

// TestLeaseExpiry: a controller that never attaches a stream and stops
// heartbeating loses its subscription after 30 s and its lease after
// 45 s; another controller then gets the lease without takeControl.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClockAt(time.Date(2026, 4, 2, 12, 0, 0, 0, time.UTC))
	s := newServer(t, options{now: clock.Now, cfg: httpattach.Config{Now: clock.Now, SweepInterval: -1}})
	id := s.createSession(nil)
	first := s.subscribe(id, map[string]any{"role": "controller"})
	if *first.LeaseExpiresAt != "2026-04-02T12:00:45.000Z" {
		t.Fatalf("lease_expires_at %s, want last seen + 45 s", *first.LeaseExpiresAt)
	}
	clock.Advance(20 * time.Second)
	s.h.Sweep()
	st, body := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", `{"role":"controller"}`, nil, nil)
	wantError(t, st, body, http.StatusConflict, "controller_lease_held", "Controller lease is already held by another connection")
	// A heartbeat extends the lease.
	var hb struct {
		LeaseExpiresAt string `json:"lease_expires_at"`
	}
	s.call("POST", "/api/headless/sessions/"+id+"/heartbeat", nil, hdr{"x-maestro-headless-subscriber-id": first.SubscriptionID}, &hb)
	if hb.LeaseExpiresAt != "2026-04-02T12:01:05.000Z" {
		t.Fatalf("lease_expires_at after a heartbeat %s", hb.LeaseExpiresAt)
	}
	clock.Advance(46 * time.Second)
	s.h.Sweep()
	second := s.subscribe(id, map[string]any{"role": "controller"})
	if !second.ControllerLeaseGranted {
		t.Fatalf("after expiry: %+v", second)
	}
	st, body = s.send(id, first.SubscriptionID, `{"type":"init"}`)
	wantError(t, st, body, http.StatusNotFound, "not_found", "Headless subscriber not found")
}

// TestDisconnectReleasesLease: disconnect ends the connection's
// subscriptions and releases the lease; the runtime lives on.
func TestDisconnectReleasesLease(t *testing.T) {
	t.Parallel()
	s, id, c := newControlledSession(t)
	stream := s.open(id, "subscriptionId="+c.SubscriptionID, nil)
	var out struct {
		Success                     bool     `json:"success"`
		ConnectionID                string   `json:"connection_id"`
		ControllerConnectionID      *string  `json:"controller_connection_id"`
		DisconnectedSubscriptionIDs []string `json:"disconnected_subscription_ids"`
	}
	if st, body := s.call("POST", "/api/headless/sessions/"+id+"/disconnect", nil, hdr{"x-composer-headless-connection-id": c.ConnectionID}, &out); st != 200 {
		t.Fatalf("disconnect: %d %s", st, body)
	}
	if !out.Success || out.ConnectionID != c.ConnectionID || out.ControllerConnectionID != nil || len(out.DisconnectedSubscriptionIDs) != 1 || out.DisconnectedSubscriptionIDs[0] != c.SubscriptionID {
		t.Fatalf("disconnect answer: %+v", out)
	}
	stream.Ended()
	next := s.subscribe(id, map[string]any{"role": "controller"})
	if !next.ControllerLeaseGranted {
		t.Fatalf("after disconnect: %+v", next)
	}
	st, body := s.call("POST", "/api/headless/sessions/"+id+"/heartbeat", map[string]string{"connectionId": c.ConnectionID}, nil, nil)
	wantError(t, st, body, http.StatusNotFound, "stale_connection", "Headless connection not found")
}

// TestSubscribeReusesRegisteredController: a controller registered with
// /connections and subscribing without a connectionId gets that
// connection back (wire contract §11.2).
func TestSubscribeReusesRegisteredController(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	id := s.createSession(nil)
	var conn struct {
		ConnectionID string `json:"connection_id"`
	}
	if st, body := s.call("POST", "/api/headless/connections", map[string]any{"sessionId": id, "role": "controller"}, nil, &conn); st != 200 {
		t.Fatalf("connections: %d %s", st, body)
	}
	sub := s.subscribe(id, map[string]any{"role": "controller"})
	if sub.ConnectionID != conn.ConnectionID || !sub.ControllerLeaseGranted {
		t.Fatalf("subscribe reused %s, want %s (%+v)", sub.ConnectionID, conn.ConnectionID, sub)
	}
	// Now that it has a subscription, another controller is refused.
	st, body := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", `{"role":"controller"}`, nil, nil)
	wantError(t, st, body, http.StatusConflict, "controller_lease_held", "Controller lease is already held by another connection")
}

// TestSessionIdleDisposal: with SessionIdle, a session nobody used for
// that long is shut down and forgotten; a busy one is kept.
func TestSessionIdleDisposal(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClockAt(time.Date(2026, 4, 2, 12, 0, 0, 0, time.UTC))
	s := newServer(t, options{now: clock.Now, cfg: httpattach.Config{Now: clock.Now, SweepInterval: -1, SessionIdle: 30 * time.Minute}})
	idle := s.createSession(nil)
	kept := s.createSession(nil)
	c := s.subscribe(kept, map[string]any{"role": "controller"})
	st := s.open(kept, "subscriptionId="+c.SubscriptionID, nil)
	clock.Advance(31 * time.Minute)
	rt, _ := s.sessions.Get(idle)
	s.h.Sweep()
	select {
	case <-rt.Done():
	default:
		t.Fatal("the idle session's runtime was not shut down")
	}
	if r := rt.CloseReason(); r != "idle_timeout" {
		t.Errorf("the idle session's close reason %q, want idle_timeout (its closed event on the bus says IDLE_TIMEOUT)", r)
	}
	code, body := s.call("GET", "/api/headless/sessions/"+idle, nil, nil, nil)
	wantError(t, code, body, http.StatusNotFound, "not_found", "Headless session not found")
	if _, ok := s.sessions.Get(kept); !ok {
		t.Fatal("the session with an attached stream was disposed")
	}
	s.mustSend(kept, c.SubscriptionID, `{"type":"init"}`)
	st.until("status")
}
