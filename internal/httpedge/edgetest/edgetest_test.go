package edgetest

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestCall: the forged Host reaches the server as the request's Host,
// other headers as headers, and a stream that never ends is cut at the
// timeout with what it sent so far.
func TestCall(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("first"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte(r.Host + " " + r.Header.Get("Origin") + " " + r.Method))
	}))
	t.Cleanup(srv.Close)
	code, body := Call(t, srv.Client(), "POST", srv.URL+"/x", "{}", map[string]string{"Host": "attacker.example", "Origin": "https://o.example"}, 10*time.Second)
	if code != http.StatusTeapot || string(body) != "attacker.example https://o.example POST" {
		t.Errorf("Call = %d %q", code, body)
	}
	start := time.Now()
	code, body = Call(t, srv.Client(), "GET", srv.URL+"/stream", "", nil, 200*time.Millisecond)
	if code != http.StatusOK || string(body) != "first" {
		t.Errorf("stream: %d %q, want 200 \"first\"", code, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stream read for %s, want it cut near the timeout", took)
	}
}
