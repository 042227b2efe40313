package anthropic

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestKeyNotSentAcrossRedirect: a base URL (a gateway, a proxy) that
// answers a redirect to another origin does not get the key passed on:
// x-api-key is a header Go's client copies to any redirect target, so
// the redirect is refused instead.
func TestKeyNotSentAcrossRedirect(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		leaked.Store(r.Header.Get("X-Api-Key"))
		http.NotFound(w, r)
	}))
	t.Cleanup(other.Close)
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(gw.Close)

	p := newProvider(t, gw.URL, func(c *Config) { c.APIKey = "sk-ant-redirect-secret" })
	var err error
	for _, e := range p.Stream(callCtx(t), userRequest("hi")) {
		if e != nil {
			err = e
			break
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the other origin was reached %d time(s), with x-api-key %q", n, leaked.Load())
	}
	if err == nil || !strings.Contains(err.Error(), "refused a redirect") {
		t.Errorf("Stream error = %v, want the refused redirect", err)
	}
}
