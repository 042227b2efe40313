package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Defaults of Policy's caps.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxRedirects = 5
	DefaultMaxBytes     = 5 << 20
)

// Stages at which a destination is refused (BlockedError.Stage).
const (
	StageURL      = "url"      // the URL itself: scheme, or an address literal
	StageResolve  = "resolve"  // an address the host name resolved to
	StageConnect  = "connect"  // the address the socket was about to connect to
	StageRedirect = "redirect" // a redirect's target
)

// Resolver looks host names up; *net.Resolver is one. Tests give their own
// to make a name resolve to any address.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy configures a Guard. The zero value refuses every special-purpose
// address and uses the default caps and the system resolver.
type Policy struct {
	// Allow lists exceptions: host names (exact, case-insensitive; every
	// address they resolve to is then allowed), IP addresses and CIDR
	// prefixes (config web.allow_hosts). Tests allow their loopback
	// server only this way.
	Allow []string
	// Timeout bounds a whole request, redirects and body included.
	Timeout time.Duration
	// MaxRedirects caps the redirects followed.
	MaxRedirects int
	// MaxBytes caps a response body (the callers read it with ReadCapped).
	MaxBytes int64
	// Resolver resolves host names (nil: net.DefaultResolver).
	Resolver Resolver
}

// Guard checks destinations and builds HTTP clients that connect only to
// allowed ones. It is safe for concurrent use.
type Guard struct {
	ranges     []rangeClass
	allowNets  []netip.Prefix
	allowHosts []string
	timeout    time.Duration
	redirects  int
	maxBytes   int64
	resolver   Resolver
	client     *http.Client
}

// New checks p and returns its Guard.
func New(p Policy) (*Guard, error) {
	g := &Guard{
		ranges:    refusedRanges(),
		timeout:   positiveOr(p.Timeout, DefaultTimeout),
		redirects: positiveOr(p.MaxRedirects, DefaultMaxRedirects),
		maxBytes:  positiveOr(p.MaxBytes, DefaultMaxBytes),
		resolver:  p.Resolver,
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	g.client = g.newClient()
	for _, s := range p.Allow {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if pre, err := netip.ParsePrefix(s); err == nil {
			g.allowNets = append(g.allowNets, pre.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			g.allowNets = append(g.allowNets, netip.PrefixFrom(a.WithZone(""), a.BitLen()))
		} else if strings.ContainsAny(s, "/:") {
			return nil, fmt.Errorf("web allow list: %q is neither a host name, an IP address nor a CIDR prefix", s)
		} else {
			g.allowHosts = append(g.allowHosts, strings.ToLower(strings.TrimSuffix(s, ".")))
		}
	}
	return g, nil
}

// positiveOr is v when it is positive, else def.
func positiveOr[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// MaxBytes is the response size cap.
func (g *Guard) MaxBytes() int64 { return g.maxBytes }

// Timeout is the per-request time cap.
func (g *Guard) Timeout() time.Duration { return g.timeout }

// BlockedError is a refused destination. The web tools report it as a
// firewall_block.
type BlockedError struct {
	// URL is the URL being fetched (for a redirect, its target).
	URL string
	// Host is the URL's host name or address literal.
	Host string
	// Addr is the refused address (empty when the scheme was refused).
	Addr string
	// Class is the address class (Class* constants) or "scheme".
	Class string
	// Stage is where the refusal happened (Stage* constants).
	Stage string
}

func (e *BlockedError) Error() string {
	if e.Class == "scheme" {
		return fmt.Sprintf("refused %s: only http and https URLs are fetched", e.URL)
	}
	what := e.Host + " resolves to " + e.Addr + ","
	if e.Host == e.Addr || e.Host == "" {
		what = e.Addr + " is"
	}
	return fmt.Sprintf("refused %s: %s %s address, which the network guard does not reach (at %s); "+
		"an operator may allow it in the configuration's web.allow_hosts", e.URL, what, classWords(e.Class), e.Stage)
}

// classWords is an address class with its article, as a sentence says it
// ("an IPv4-mapped IPv6", not "a ipv4 mapped").
func classWords(class string) string {
	switch class {
	case ClassUnspecified:
		return "an unspecified"
	case ClassCGNAT:
		return "a carrier-grade NAT"
	case ClassLinkLocal:
		return "a link-local"
	case ClassMetadata:
		return "a cloud metadata"
	case ClassIPv4Mapped:
		return "an IPv4-mapped IPv6"
	case ClassIPv4Compatible:
		return "an IPv4-compatible IPv6"
	case ClassULA:
		return "a unique local IPv6"
	case ClassNAT64:
		return "a NAT64"
	case ClassTranslated:
		return "an IPv4 translation (6to4 or Teredo)"
	case ClassInvalid:
		return "an invalid"
	}
	return "a " + strings.ReplaceAll(class, "_", " ")
}

// allowed reports whether a is allowed for a connection to host.
func (g *Guard) allowed(host string, a netip.Addr) (class string, ok bool) {
	class = g.Classify(a)
	if class == "" || g.hostAllowed(host) {
		return class, true
	}
	a = a.WithZone("")
	for _, p := range g.allowNets {
		if p.Contains(a) {
			return class, true
		}
	}
	return class, false
}

func (g *Guard) hostAllowed(host string) bool {
	return host != "" && slices.Contains(g.allowHosts, strings.ToLower(strings.TrimSuffix(host, ".")))
}

// CheckURL checks u before a request: an http or https URL whose host is
// an allowed address, or a name every address of which is allowed. It
// returns the checked addresses, or a *BlockedError.
func (g *Guard) CheckURL(ctx context.Context, u *url.URL) ([]netip.Addr, error) {
	return g.checkURL(ctx, u, StageResolve)
}

func (g *Guard) checkURL(ctx context.Context, u *url.URL, stage string) ([]netip.Addr, error) {
	// What the URL itself says (its scheme, an address literal) is
	// refused at stage url, or at redirect when a redirect named it.
	urlStage := stage
	if stage == StageResolve {
		urlStage = StageURL
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &BlockedError{URL: u.Redacted(), Host: u.Hostname(), Class: "scheme", Stage: urlStage}
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("check %s: the URL has no host", u.Redacted())
	}
	if a, err := netip.ParseAddr(host); err == nil {
		stage = urlStage
		if class, ok := g.allowed("", a); !ok {
			return nil, &BlockedError{URL: u.Redacted(), Host: host, Addr: a.String(), Class: class, Stage: stage}
		}
		return []netip.Addr{a}, nil
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if class, ok := g.allowed(host, a); !ok {
			return nil, &BlockedError{URL: u.Redacted(), Host: host, Addr: a.String(), Class: class, Stage: stage}
		}
	}
	return addrs, nil
}

// resolve looks host up; IPv4 answers the resolver gives in IPv4-mapped
// form are unmapped (they are IPv4 answers, not mapped destinations).
func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = a.Unmap()
	}
	return out, nil
}

// DialContext connects to addr ("host:port"): it resolves the host, checks
// every address, and connects to the first allowed one that answers, the
// dialer's Control hook checking the address once more as the socket
// connects.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return g.dial(ctx, network, addr, nil)
}

// DialVia is DialContext connecting through dial: the host is resolved
// and every address checked as DialContext does, and dial is given the
// checked address (an IP literal and the port), so it resolves nothing
// itself. For a client with a dialer of its own (a test's, which maps
// addresses to its servers); a nil dial gives DialContext.
func (g *Guard) DialVia(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		return g.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return g.dial(ctx, network, addr, dial)
	}
}

// dial is DialContext, connecting through connect when it is not nil.
func (g *Guard) dial(ctx context.Context, network, addr string, connect func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	var addrs []netip.Addr
	if a, perr := netip.ParseAddr(host); perr == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = g.resolve(ctx, host); err != nil {
		return nil, err
	}
	if connect == nil {
		d := net.Dialer{Timeout: g.timeout, Control: g.control(host)}
		connect = d.DialContext
	}
	var errs []error
	for _, a := range addrs {
		if class, ok := g.allowed(host, a); !ok {
			return nil, &BlockedError{URL: addr, Host: host, Addr: a.String(), Class: class, Stage: StageConnect}
		}
		conn, err := connect(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		var blocked *BlockedError
		if errors.As(err, &blocked) {
			return nil, blocked
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("dial %s: %w", addr, errors.Join(errs...))
}

// control is the dialer's Control hook for a connection to host: the
// address the socket is about to connect to must be allowed.
func (g *Guard) control(host string) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("network guard: unparsable address %q: %w", address, err)
		}
		if class, ok := g.allowed(host, ap.Addr()); !ok {
			return &BlockedError{URL: address, Host: host, Addr: ap.Addr().String(), Class: class, Stage: StageConnect}
		}
		return nil
	}
}

// Client returns the guard's HTTP client, which connects only through the
// guard: no proxy from the environment, the guard's time cap, and each
// redirect checked (scheme, address, count) before it is followed. It is
// shared, so connections are reused across calls.
func (g *Guard) Client() *http.Client { return g.client }

func (g *Guard) newClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: g.timeout,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   g.timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > g.redirects {
				return fmt.Errorf("stopped after %d redirects (the limit)", g.redirects)
			}
			_, err := g.checkURL(req.Context(), req.URL, StageRedirect)
			return err
		},
	}
}

// ReadCapped reads at most max bytes from r; truncated reports that r
// held more.
func ReadCapped(r io.Reader, max int64) (data []byte, truncated bool, err error) {
	data, err = io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, fmt.Errorf("read the response: %w", err)
	}
	if int64(len(data)) > max {
		return data[:max], true, nil
	}
	return data, false, nil
}
