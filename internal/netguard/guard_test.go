package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeResolver answers from a table; a name with several answers gives
// them one per lookup (the last one repeated), which models a DNS answer
// that changes between the check and the connection.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]string
	calls   map[string]int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	list, ok := r.answers[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	i := min(r.calls[host], len(list)-1)
	r.calls[host]++
	return []netip.Addr{netip.MustParseAddr(list[i])}, nil
}

func newGuard(t *testing.T, p Policy) *Guard {
	t.Helper()
	g, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// refusedAddrs is one address of every refused class, with its class.
var refusedAddrs = []struct{ addr, class string }{
	{"127.0.0.1", ClassLoopback},
	{"127.8.9.10", ClassLoopback},
	{"10.1.2.3", ClassPrivate},
	{"172.16.0.1", ClassPrivate},
	{"172.31.255.254", ClassPrivate},
	{"192.168.1.1", ClassPrivate},
	{"100.64.0.1", ClassCGNAT},
	{"169.254.1.1", ClassLinkLocal},
	{"169.254.169.254", ClassMetadata},
	{"224.0.0.1", ClassMulticast},
	{"0.0.0.0", ClassUnspecified},
	{"255.255.255.255", ClassBroadcast},
	{"192.0.2.7", ClassDocumentation},
	{"198.51.100.7", ClassDocumentation},
	{"203.0.113.7", ClassDocumentation},
	{"240.0.0.1", ClassReserved},
	{"198.18.0.1", ClassReserved},
	{"::1", ClassLoopback},
	{"::", ClassUnspecified},
	{"fe80::1", ClassLinkLocal},
	{"fc00::1", ClassULA},
	{"fd12:3456::1", ClassULA},
	{"fd00:ec2::254", ClassMetadata},
	{"ff02::1", ClassMulticast},
	{"::ffff:127.0.0.1", ClassIPv4Mapped},
	{"::ffff:8.8.8.8", ClassIPv4Mapped},
	// As a resolver's answer, checked as the IPv4 address it maps
	// (private), which an allow list of IPv4 prefixes then covers.
	{"::ffff:10.0.0.1", ClassIPv4Mapped},
	{"::127.0.0.1", ClassIPv4Compatible},
	{"64:ff9b::7f00:1", ClassNAT64},
	{"64:ff9b:1::1", ClassNAT64},
	{"2001:db8::1", ClassDocumentation},
	{"2002:7f00:1::1", ClassTranslated},
	{"2001:0:4136:e378::1", ClassTranslated},
}

func TestClassify(t *testing.T) {
	g := newGuard(t, Policy{})
	for _, tc := range refusedAddrs {
		if got := g.Classify(netip.MustParseAddr(tc.addr)); got != tc.class {
			t.Errorf("Classify(%s) = %q, want %q", tc.addr, got, tc.class)
		}
	}
	for _, public := range []string{"8.8.8.8", "93.184.215.14", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "2a00:1450::1"} {
		if got := g.Classify(netip.MustParseAddr(public)); got != "" {
			t.Errorf("Classify(%s) = %q, want public", public, got)
		}
	}
	if got := g.Classify(netip.MustParseAddr("fe80::1%eth0")); got != ClassLinkLocal {
		t.Errorf("Classify(fe80::1%%eth0) = %q", got)
	}
}

// hostPort writes a for a URL's host.
func hostPort(a string) string {
	if strings.Contains(a, ":") {
		return "[" + a + "]"
	}
	return a
}

// get fetches u through g's client and returns the body or the error.
func get(t *testing.T, g *Guard, u string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.CheckURL(ctx, parsed); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := g.Client().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _, err := ReadCapped(resp.Body, g.MaxBytes())
	return string(body), err
}

func TestGuardRefuses(t *testing.T) {
	// The loopback server is allowed by its address; it redirects to
	// whatever ?to= says.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	srvURL, _ := url.Parse(srv.URL)
	allowed := srvURL.Hostname()

	type tc struct {
		name, url, class, stage string
	}
	var cases []tc
	answers := map[string][]string{
		// Checked as public, then resolved to loopback at connect time.
		"rebind.test": {"8.8.8.8", "10.0.0.1"},
	}
	for _, r := range refusedAddrs {
		if r.addr == allowed {
			continue
		}
		cases = append(cases, tc{"literal " + r.addr, "http://" + hostPort(r.addr) + "/", r.class, StageURL})
		name := "n" + strings.NewReplacer(".", "-", ":", "-").Replace(r.addr) + ".test"
		answers[name] = []string{r.addr}
		class := r.class
		if unmapped := netip.MustParseAddr(r.addr).Unmap(); class == ClassIPv4Mapped {
			// A resolver's mapped answer is an IPv4 answer.
			class = (&Guard{ranges: refusedRanges()}).Classify(unmapped)
			if unmapped.String() == allowed {
				class = ""
			}
		}
		if class != "" {
			cases = append(cases, tc{"name resolving to " + r.addr, "http://" + name + "/", class, StageResolve})
			cases = append(cases, tc{"redirect to " + name, srv.URL + "/?to=" + url.QueryEscape("http://"+name+"/x"), class, StageRedirect})
		}
		cases = append(cases, tc{"redirect to " + r.addr, srv.URL + "/?to=" + url.QueryEscape("http://"+hostPort(r.addr)+"/"), r.class, StageRedirect})
	}
	cases = append(cases,
		tc{"rebinding between check and connect", "http://rebind.test:" + srvURL.Port() + "/", ClassPrivate, StageConnect},
		tc{"file scheme", "file:///etc/passwd", "scheme", StageURL},
		tc{"ftp scheme", "ftp://example.com/", "scheme", StageURL},
		tc{"redirect to file scheme", srv.URL + "/?to=" + url.QueryEscape("file:///etc/passwd"), "scheme", StageRedirect},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGuard(t, Policy{Allow: []string{allowed}, Resolver: &fakeResolver{answers: answers}})
			body, err := get(t, g, c.url)
			var blocked *BlockedError
			if !errors.As(err, &blocked) {
				t.Fatalf("fetch %s = %q, %v; want a BlockedError", c.url, body, err)
			}
			if blocked.Class != c.class || blocked.Stage != c.stage {
				t.Errorf("blocked as %s at %s, want %s at %s (%v)", blocked.Class, blocked.Stage, c.class, c.stage, err)
			}
		})
	}
}

func TestGuardAllows(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop" {
			http.Redirect(w, r, "/", http.StatusFound)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	srvURL, _ := url.Parse(srv.URL)
	port := srvURL.Port()
	res := &fakeResolver{answers: map[string][]string{"page.test": {"127.0.0.1"}, "other.test": {"127.0.0.1"}}}
	cases := []struct {
		name  string
		allow []string
		url   string
		ok    bool
	}{
		{"address", []string{"127.0.0.1"}, srv.URL + "/", true},
		{"cidr", []string{"127.0.0.0/8"}, srv.URL + "/hop", true},
		{"host name", []string{"Page.Test"}, "http://page.test:" + port + "/", true},
		{"cidr covers a name", []string{"127.0.0.1/32"}, "http://other.test:" + port + "/", true},
		{"another host name", []string{"page.test"}, "http://other.test:" + port + "/", false},
		{"nothing", nil, srv.URL + "/", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGuard(t, Policy{Allow: c.allow, Resolver: res})
			body, err := get(t, g, c.url)
			if c.ok && (err != nil || body != "hello") {
				t.Fatalf("fetch = %q, %v; want hello", body, err)
			}
			if !c.ok && err == nil {
				t.Fatalf("fetch = %q, want refused", body)
			}
		})
	}
}

func TestConnectHook(t *testing.T) {
	g := newGuard(t, Policy{Allow: []string{"10.0.0.0/8", "ok.test"}})
	cases := []struct {
		host, addr string
		ok         bool
	}{
		{"x.test", "127.0.0.1:80", false},
		{"x.test", "[::ffff:169.254.169.254]:80", false},
		{"x.test", "8.8.8.8:443", true},
		{"x.test", "10.2.3.4:80", true},
		{"ok.test", "192.168.0.1:80", true},
	}
	for _, c := range cases {
		err := g.control(c.host)("tcp", c.addr, nil)
		var blocked *BlockedError
		if c.ok != (err == nil) || (!c.ok && (!errors.As(err, &blocked) || blocked.Stage != StageConnect)) {
			t.Errorf("control(%s)(%s) = %v, want ok=%v", c.host, c.addr, err, c.ok)
		}
	}
}

func TestCaps(t *testing.T) {
	release := make(chan struct{})
	var loops atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop":
			loops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/big":
			io.WriteString(w, strings.Repeat("x", 100))
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	g := newGuard(t, Policy{Allow: []string{"127.0.0.1"}, MaxRedirects: 3, MaxBytes: 10, Timeout: 300 * time.Millisecond})
	if _, err := get(t, g, srv.URL+"/loop"); err == nil || !strings.Contains(err.Error(), "3 redirects") {
		t.Errorf("redirect loop: %v, want the redirect limit", err)
	}
	if n := loops.Load(); n != 4 {
		t.Errorf("redirect loop: the server got %d requests, want 4 (the first and 3 redirects)", n)
	}
	resp, err := g.Client().Get(srv.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	body, truncated, err := ReadCapped(resp.Body, g.MaxBytes())
	resp.Body.Close()
	if err != nil || !truncated || len(body) != 10 {
		t.Errorf("ReadCapped = %d bytes, truncated %v, %v; want 10, true", len(body), truncated, err)
	}
	if _, err := get(t, g, srv.URL+"/slow"); err == nil || !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("slow server: %v, want a timeout", err)
	}
}

func TestNewRejectsMalformedAllow(t *testing.T) {
	if _, err := New(Policy{Allow: []string{"10.0.0.0/33"}}); err == nil {
		t.Error("New accepted 10.0.0.0/33")
	}
}

// TestBlockedErrorWords: a refusal names the address class in words with
// its article; it said "a ipv4 mapped address", "a unspecified address".
func TestBlockedErrorWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  BlockedError
		want string
	}{
		{BlockedError{URL: "http://[::ffff:127.0.0.1]/", Host: "::ffff:127.0.0.1", Addr: "::ffff:127.0.0.1", Class: ClassIPv4Mapped, Stage: StageResolve}, "::ffff:127.0.0.1 is an IPv4-mapped IPv6 address"},
		{BlockedError{URL: "http://0.0.0.0/", Host: "0.0.0.0", Addr: "0.0.0.0", Class: ClassUnspecified, Stage: StageResolve}, "0.0.0.0 is an unspecified address"},
		{BlockedError{URL: "http://intranet/", Host: "intranet", Addr: "10.0.0.1", Class: ClassPrivate, Stage: StageResolve}, "intranet resolves to 10.0.0.1, a private address"},
		{BlockedError{URL: "http://x/", Host: "x", Addr: "169.254.169.254", Class: ClassMetadata, Stage: StageResolve}, "a cloud metadata address"},
		{BlockedError{URL: "http://x/", Host: "x", Addr: "100.64.0.1", Class: ClassCGNAT, Stage: StageResolve}, "a carrier-grade NAT address"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want it to say %q", tt.err.Class, got, tt.want)
		}
	}
}

// TestNoProxyFromEnvironment: the guard's client never goes through a
// proxy named by the environment (HTTP_PROXY would hide the destination
// from the guard: the dialer would check the proxy's address).
func TestNoProxyFromEnvironment(t *testing.T) {
	tr, ok := newGuard(t, Policy{}).Client().Transport.(*http.Transport)
	if !ok || tr.Proxy != nil || tr.DialTLSContext != nil || tr.DialTLS != nil {
		t.Errorf("the guard's transport = %T (proxy set %v): want an *http.Transport with no proxy, dialing only through the guard", tr, ok && tr.Proxy != nil)
	}
}

// TestDialVia: a dial given to DialVia gets only checked addresses (IP
// literals, never the name), and a name whose answer changed to a
// refused address since it was checked is refused at connect without
// dial being called.
func TestDialVia(t *testing.T) {
	res := &fakeResolver{answers: map[string][]string{
		"pub.test":    {"93.184.216.34"},
		"rebind.test": {"93.184.216.35", "127.0.0.1"},
	}}
	g := newGuard(t, Policy{Resolver: res})
	var dialed []string
	dial := g.DialVia(func(_ context.Context, _, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		c, _ := net.Pipe()
		return c, nil
	})
	ctx := t.Context()
	if _, err := g.CheckURL(ctx, &url.URL{Scheme: "http", Host: "rebind.test"}); err != nil {
		t.Fatalf("check of rebind.test's first answer: %v", err)
	}
	if conn, err := dial(ctx, "tcp", "pub.test:80"); err != nil {
		t.Errorf("dial pub.test: %v", err)
	} else {
		conn.Close()
	}
	_, err := dial(ctx, "tcp", "rebind.test:80")
	var blocked *BlockedError
	if !errors.As(err, &blocked) || blocked.Stage != StageConnect || blocked.Addr != "127.0.0.1" {
		t.Errorf("dial rebind.test after its answer changed = %v, want refused at connect", err)
	}
	if want := []string{"93.184.216.34:80"}; !slices.Equal(dialed, want) {
		t.Errorf("dial was given %q, want %q", dialed, want)
	}
}
