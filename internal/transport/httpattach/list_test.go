package httpattach_test

import (
	"slices"
	"testing"
)

// TestListSessions: GET /api/headless/sessions answers every live
// session's snapshot, sorted by id; a session shut down leaves the list.
func TestListSessions(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	type listed struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
			State     struct {
				IsReady bool `json:"is_ready"`
			} `json:"state"`
		} `json:"sessions"`
	}
	ids := func() []string {
		t.Helper()
		var l listed
		if st, body := s.call("GET", "/api/headless/sessions", nil, nil, &l); st != 200 {
			t.Fatalf("list: %d %s", st, body)
		}
		var out []string
		for _, x := range l.Sessions {
			out = append(out, x.SessionID)
		}
		return out
	}
	if got := ids(); len(got) != 0 {
		t.Fatalf("no session yet, listed %v", got)
	}
	a := s.createSession(map[string]any{})
	b := s.createSession(map[string]any{})
	want := []string{a, b}
	slices.Sort(want)
	if got := ids(); !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	// The shutdown is carried out after its send is answered: the session
	// is forgotten before the runtime ends its streams, so the list is
	// read once a's stream has ended.
	sub := s.subscribe(a, map[string]any{})
	st := s.open(a, "", nil)
	st.next()
	s.mustSend(a, sub.SubscriptionID, `{"type":"shutdown"}`)
	st.Ended()
	if got := ids(); !slices.Equal(got, []string{b}) {
		t.Fatalf("after shutting %s down, listed %v, want [%s]", a, got, b)
	}
}
