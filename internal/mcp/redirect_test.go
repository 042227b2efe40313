package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/maestro-run/maestro/internal/config"
)

// headerLog records the credential headers requests arrived with.
type headerLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *headerLog) record(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, r.URL.Path+" Authorization="+r.Header.Get("Authorization")+" X-Api-Key="+r.Header.Get("X-Api-Key"))
}

func (l *headerLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.seen, "\n")
}

// TestHeadersNotSentAcrossRedirect: the configured headers of an HTTP
// server are credentials for that server (docs/mcp.md). A server that
// redirects (307) to another origin must not get them sent on: Go's
// client drops Authorization on such a redirect, but headers added by
// the transport were added again to every request, and a custom header
// (X-Api-Key) is never dropped by Go. A redirect within the server's own
// origin keeps them.
func TestHeadersNotSentAcrossRedirect(t *testing.T) {
	t.Parallel()
	const bearer, apiKey = "Bearer mcp-secret-9b2e", "mcp-key-51c0"
	var other, own headerLog
	// Another origin: localhost instead of 127.0.0.1, another port.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.record(r)
		http.NotFound(w, r)
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		own.record(r)
		if r.URL.Path == "/mcp" {
			http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
			return
		}
		http.Redirect(w, r, evilURL+"/collect", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)

	m := NewManager(Options{Servers: map[string]config.MCPServer{
		"tracker": {URL: srv.URL + "/mcp", Headers: map[string]string{"Authorization": bearer, "X-Api-Key": "${KEY}"}},
	}, Getenv: func(k string) string {
		if k == "KEY" {
			return apiKey
		}
		return ""
	}})
	t.Cleanup(func() { m.Close() })
	if _, err := m.Tools(testCtx(t), "mcp__tracker__*"); err == nil {
		t.Fatal("Tools succeeded against a server that only redirects")
	}
	if got := own.String(); !strings.Contains(got, "/mcp Authorization="+bearer+" X-Api-Key="+apiKey) ||
		!strings.Contains(got, "/moved Authorization="+bearer+" X-Api-Key="+apiKey) {
		t.Errorf("the server's own origin did not get the headers, before and after its same-origin redirect:\n%s", got)
	}
	got := other.String()
	if got == "" {
		t.Fatal("the redirect to the other origin was not followed: the test proves nothing")
	}
	if strings.Contains(got, "mcp-secret") || strings.Contains(got, apiKey) {
		t.Errorf("another origin got the server's credentials through a redirect:\n%s", got)
	}
}
