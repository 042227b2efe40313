package mcp

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/netguard"
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

// peerTransport is a client transport that connects every address to
// 127.0.0.1 (the port kept), where the tests' servers all are, and whose
// connections say they are to the address names gives the host (or the
// host's own address): the peer a server is taken to be at.
func peerTransport(t *testing.T, names netguard.Resolver) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, p, _ := net.SplitHostPort(addr)
		a, err := netip.ParseAddr(host)
		if err != nil {
			addrs, err := names.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, err
			}
			a = addrs[0]
		}
		port, _ := strconv.Atoi(p)
		c, err := (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+p)
		if err != nil {
			return nil, err
		}
		return peerConn{c, net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, uint16(port)))}, nil
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// peerConn is a connection that says it is to remote.
type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }

// redirectScene starts a victim, an internal service recording the
// requests that reach it, at victimURL, and an evil server on evilPort
// answering every request with a 307 to to(r).
func redirectScene(t *testing.T, to func(r *http.Request) string) (reached *headerLog, victimURL, evilPort string) {
	reached = &headerLog{}
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.record(r)
		http.NotFound(w, r)
	}))
	t.Cleanup(victim.Close)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to(r), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(evil.Close)
	return reached, victim.URL, evil.URL[strings.LastIndex(evil.URL, ":")+1:]
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
// dialer reaches them by name (*.test) and says its connections are to
// the addresses the resolver gives (peerTransport), and the resolver says
// mcp.test and pub.test are public, inner.test private.
func TestRedirectToAnInternalAddressRefused(t *testing.T) {
	t.Parallel()
	reached, victim, evilPort := redirectScene(t, func(r *http.Request) string { return r.URL.Query().Get("to") })
	port := victim[strings.LastIndex(victim, ":")+1:]
	resolver := mapResolver{"mcp.test": "93.184.216.34", "pub.test": "93.184.216.35", "inner.test": "10.0.0.5"}
	tr := peerTransport(t, resolver)
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
	var port string
	reached, victim, evilPort := redirectScene(t, func(*http.Request) string { return "http://rebind.test:" + port + "/rebound" })
	port = victim[strings.LastIndex(victim, ":")+1:]
	// What the client's own transport connects to (a system resolver
	// asked at connect time).
	tr := peerTransport(t, mapResolver{"mcp.test": "93.184.216.34", "rebind.test": "127.0.0.1"})
	for _, c := range []struct{ internal, origin string }{
		{"127.0.0.1", "93.184.216.34"},
		{"169.254.169.254", "93.184.216.34"},
		// The server's own name answers a loopback address to Maestro's
		// checks while its connection is to the public one: it is not
		// taken for a local server, whose redirects to internal
		// addresses are followed.
		{"127.0.0.1", "127.0.0.1"},
	} {
		internal := c.internal
		resolver := &rebindResolver{names: mapResolver{"mcp.test": c.origin}, first: "93.184.216.36", second: internal}
		m := NewManager(Options{Servers: map[string]config.MCPServer{
			"evil": {URL: "http://mcp.test:" + evilPort + "/mcp"},
		}, HTTPClient: &http.Client{Transport: tr}, Resolver: resolver})
		_, err := m.Tools(testCtx(t), "mcp__evil__*")
		m.Close()
		if err == nil {
			t.Fatalf("rebinding to %s: Tools succeeded against a server that only redirects", internal)
		}
		if got := reached.String(); got != "" {
			t.Fatalf("rebinding to %s (the server's name answering %s): the redirect reached the internal service: %s", internal, c.origin, got)
		}
		if resolver.lookups.Load() == 0 {
			t.Fatalf("rebinding to %s: rebind.test was never looked up: the test proves nothing (%v)", internal, err)
		}
		// The go-sdk retries once; the retry's redirect check sees the
		// new answer (at resolve), the first request's connection was
		// refused (at connect).
		if !strings.Contains(err.Error(), "redirected to another origin, refused") {
			t.Errorf("rebinding to %s: error %q does not say the redirect was refused", internal, err)
		}
	}
}

// TestRedirectThroughALocalProxyRefused: a server on the internet reached
// through a proxy on 127.0.0.1 (HTTPS_PROXY) is not taken for a local
// server because its connection is to the proxy's loopback address: its
// redirect to a loopback address is refused, not sent to the proxy, which
// would have connected to the address from Maestro's own machine.
func TestRedirectThroughALocalProxyRefused(t *testing.T) {
	t.Parallel()
	var victim string
	reached, victim, evilPort := redirectScene(t, func(*http.Request) string { return victim + "/via-proxy" })
	// A forward proxy: it sends each request on (mcp.test is the evil
	// server, every other host 127.0.0.1) and passes the answer back.
	upstream := peerTransport(t, mapResolver{"mcp.test": "127.0.0.1"})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := upstream.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)
	proxyURL, _ := url.Parse(proxy.URL)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "127.0.0.1" {
			return nil, nil // as Go's ProxyFromEnvironment: loopback is not proxied
		}
		return proxyURL, nil
	}
	t.Cleanup(tr.CloseIdleConnections)
	m := NewManager(Options{Servers: map[string]config.MCPServer{
		"evil": {URL: "http://mcp.test:" + evilPort + "/mcp"},
	}, HTTPClient: &http.Client{Transport: tr}, Resolver: mapResolver{"mcp.test": "93.184.216.34"}})
	_, err := m.Tools(testCtx(t), "mcp__evil__*")
	m.Close()
	if err == nil {
		t.Fatal("Tools succeeded against a server that only redirects")
	}
	if got := reached.String(); got != "" {
		t.Fatalf("the redirect reached the internal service: %s", got)
	}
	if !strings.Contains(err.Error(), "redirected to another origin, refused") {
		t.Errorf("error %q does not say the redirect was refused", err)
	}
}
