package httpattach_test

import (
	"testing"
)

// TestPromptOverHTTP drives one prompt: create, subscribe, attach, hello,
// prompt, and the turn's frames on the stream in cursor order.
func TestPromptOverHTTP(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	id := s.createSession(nil)
	implicit := s.open(id, "", nil)
	if e := implicit.next(); e.Type != "snapshot" {
		t.Fatalf("first envelope of an implicit stream: %s, want snapshot", e.raw)
	}
	sub := s.subscribe(id, map[string]any{"role": "controller"})
	if !sub.ControllerLeaseGranted || sub.HeartbeatIntervalMS != 15000 {
		t.Fatalf("subscription: %+v", sub)
	}
	st := s.open(id, "subscriptionId="+sub.SubscriptionID, nil)
	s.mustSend(id, sub.SubscriptionID, `{"type":"hello","protocol_version":"2026-04-02"}`)
	s.mustSend(id, sub.SubscriptionID, `{"type":"prompt","content":"hi"}`)
	got := st.until("response_end")
	var last int64
	types := []string{}
	for _, e := range got {
		if e.Type != "message" {
			t.Fatalf("unexpected envelope %s", e.raw)
		}
		if e.Cursor <= last {
			t.Fatalf("cursor %d after %d", e.Cursor, last)
		}
		last = e.Cursor
		types = append(types, e.msgType())
	}
	t.Logf("types %v", types)
	if types[0] != "connection_info" && types[0] != "hello_ok" {
		t.Errorf("first frames %v", types)
	}
	// hello_ok is private: the implicit stream never sees it.
	for _, e := range implicit.until("response_end") {
		if e.msgType() == "hello_ok" {
			t.Errorf("implicit stream saw another connection's hello_ok: %s", e.raw)
		}
	}
}
