package mcp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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

// mapResolver resolves the names it holds; the others do not exist.
type mapResolver map[string]string

func (r mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// TestRedirectToAnInternalAddressRefused: a server on the internet that
// redirects (307: the method and body are kept) to a loopback or private
// address, or to a name resolving to one, does not get Maestro to send
// its POST there (it did: a blind request of the server's choosing to a
// service on Maestro's machine or network); a redirect to a public
// address is followed. The servers are all on 127.0.0.1: the client's
// dialer reaches them by name (*.test), and the resolver the redirect
// check uses says mcp.test and pub.test are public, inner.test private.
func TestRedirectToAnInternalAddressRefused(t *testing.T) {
	t.Parallel()
	var reached headerLog
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.record(r)
		http.NotFound(w, r)
	}))
	t.Cleanup(victim.Close)
	port := victim.URL[strings.LastIndex(victim.URL, ":")+1:]
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(evil.Close)
	evilPort := evil.URL[strings.LastIndex(evil.URL, ":")+1:]
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, p, _ := net.SplitHostPort(addr)
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+p)
	}
	t.Cleanup(tr.CloseIdleConnections)
	resolver := mapResolver{"mcp.test": "93.184.216.34", "pub.test": "93.184.216.35", "inner.test": "10.0.0.5"}
	for _, c := range []struct {
		to       string
		followed bool
	}{
		{"http://127.0.0.1:" + port + "/loopback", false},
		{"http://[::1]:" + port + "/loopback6", false},
		{"http://inner.test:" + port + "/private", false},
		{"http://pub.test:" + port + "/public", true},
	} {
		m := NewManager(Options{Servers: map[string]config.MCPServer{
			"evil": {URL: "http://mcp.test:" + evilPort + "/mcp?to=" + url.QueryEscape(c.to)},
		}, HTTPClient: &http.Client{Transport: tr}, Resolver: resolver})
		_, err := m.Tools(testCtx(t), "mcp__evil__*")
		m.Close()
		if err == nil {
			t.Fatalf("redirect to %s: Tools succeeded against a server that only redirects", c.to)
		}
		u, _ := url.Parse(c.to)
		if got := strings.Contains(reached.String(), u.Path+" "); got != c.followed {
			t.Errorf("redirect to %s: followed %v, want %v (%v)", c.to, got, c.followed, err)
		}
		if !c.followed && !strings.Contains(err.Error(), "redirected to another origin, refused") {
			t.Errorf("redirect to %s: error %q does not say the redirect was refused", c.to, err)
		}
	}
}

// rebindResolver answers first for rebind.test (a public address), then
// second on every later lookup; the other names come from names.
type rebindResolver struct {
	names         mapResolver
	first, second string
	lookups       atomic.Int32
}

func (r *rebindResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if host != "rebind.test" {
		return r.names.LookupNetIP(ctx, network, host)
	}
	if r.lookups.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr(r.first)}, nil
	}
	return []netip.Addr{netip.MustParseAddr(r.second)}, nil
}

// TestRedirectToARebindingNameRefused: a server on the internet that
// redirects (307) to a name of its own which answers a public address to
// the redirect check and a loopback or metadata address to the
// connection (DNS rebinding) does not get Maestro's POST there: the
// connection goes through the network guard's dialer, which checks the
// address it connects to. It did: the check passed, and the client's
// transport resolved the name again and connected to the internal
// address. As in TestRedirectToAnInternalAddressRefused, the client's
// dialer reaches every address at 127.0.0.1 (the victim); the guard gives
// it only addresses it checked.
func TestRedirectToARebindingNameRefused(t *testing.T) {
	t.Parallel()
	var reached headerLog
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.record(r)
		http.NotFound(w, r)
	}))
	t.Cleanup(victim.Close)
	port := victim.URL[strings.LastIndex(victim.URL, ":")+1:]
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://rebind.test:"+port+"/rebound", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(evil.Close)
	evilPort := evil.URL[strings.LastIndex(evil.URL, ":")+1:]
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, p, _ := net.SplitHostPort(addr)
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+p)
	}
	t.Cleanup(tr.CloseIdleConnections)
	for _, internal := range []string{"127.0.0.1", "169.254.169.254"} {
		resolver := &rebindResolver{names: mapResolver{"mcp.test": "93.184.216.34"}, first: "93.184.216.36", second: internal}
		m := NewManager(Options{Servers: map[string]config.MCPServer{
			"evil": {URL: "http://mcp.test:" + evilPort + "/mcp"},
		}, HTTPClient: &http.Client{Transport: tr}, Resolver: resolver})
		_, err := m.Tools(testCtx(t), "mcp__evil__*")
		m.Close()
		if err == nil {
			t.Fatalf("rebinding to %s: Tools succeeded against a server that only redirects", internal)
		}
		if resolver.lookups.Load() == 0 {
			t.Fatalf("rebinding to %s: rebind.test was never looked up: the test proves nothing (%v)", internal, err)
		}
		if got := reached.String(); got != "" {
			t.Fatalf("rebinding to %s: the redirect reached the internal service: %s", internal, got)
		}
		// The go-sdk retries once; the retry's redirect check sees the
		// new answer (at resolve), the first request's connection was
		// refused (at connect).
		if !strings.Contains(err.Error(), "redirected to another origin, refused") {
			t.Errorf("rebinding to %s: error %q does not say the redirect was refused", internal, err)
		}
	}
}
