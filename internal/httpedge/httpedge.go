// Package httpedge is the one request policy of every Maestro HTTP
// listener: `maestro serve` (the REST API and the remote-attach routes it
// mounts) and `maestro hosted-runner` (identity, drain, health and the
// attach routes). docs/sandbox.md ("HTTP edge") documents it for users.
//
// A Policy checks, in this order, before any handler runs:
//
//  1. Host: the request's Host must be a loopback name (localhost,
//     *.localhost, 127.0.0.0/8, [::1]), a configured public name
//     (Policy.AllowedHosts) or the literal host of a non-wildcard listen
//     address; an IP literal is also accepted when the policy requires the
//     token (an IP literal cannot be rebound by DNS). Anything else is a
//     DNS-rebinding page or a misrouted request: 403.
//  2. Origin: a request that a browser marks cross-site or same-site
//     (Sec-Fetch-Site), or whose Origin is not the origin it was sent to,
//     is refused with 403, whatever its method; top-level navigations
//     (GET/HEAD with Sec-Fetch-Mode: navigate) are let through, since the
//     page that caused them cannot read the answer.
//  3. Authentication: RFC 7235 bearer token (scheme case-insensitive,
//     constant-time comparison) or the contract's x-maestro-api-key /
//     x-composer-api-key headers; 401 with one WWW-Authenticate header.
//  4. Body size: Policy.MaxBody bounds what a handler can read.
//
// Handlers that read a JSON body call RequireJSON (415 unless
// Content-Type is application/json), so that a text/plain "simple" request,
// which a browser sends cross-site without a CORS preflight, never acts.
//
// Every error answer goes through WriteError, in the shape of the surface
// that serves the route: Maestro's REST API ({"error", "field"?},
// docs/api.md) or the headless wire contract ({"error", "error_type",
// "code", "details"?}, headless-wire-wire contract §11.5).
package httpedge

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Surface names the error shape of a route.
type Surface int

const (
	// REST is `maestro serve`'s API: {"error": msg, "field"?: name}.
	REST Surface = iota
	// Headless is the headless wire contract's body (§11.5):
	// {"error": msg, "error_type": code, "code": code, "details"?: [...]}.
	Headless
)

// Error codes of headless bodies that the edge itself uses.
const (
	CodeBadRequest      = "bad_request"
	CodeAccessDenied    = "access_denied"
	CodeRuntimeNotReady = "runtime_not_ready"
	CodeInternal        = "internal_error"
)

// Texts of the edge's refusals.
const (
	// MsgUnauthorizedREST is serve's 401 text.
	MsgUnauthorizedREST = "missing or invalid bearer token"
	// MsgNoTokenConfigured is the 401 text of a server that requires a
	// token but has none configured: no token a client sends can help.
	MsgNoTokenConfigured = "this server requires a bearer token but has none configured, so it refuses every request whatever token is sent; configure the server's token (maestro serve --token or MAESTRO_API_TOKEN; the hosted runner's auth token) and send that one"
	// MsgUnauthorizedHeadless is the attach routes' 401 text.
	MsgUnauthorizedHeadless = "Unauthorized: a valid API key is required (Authorization: Bearer <token> or x-maestro-api-key)"
)

// MaxEcho bounds how much of a client's input an error message repeats.
const MaxEcho = 128

// DefaultRetryAfter is the Retry-After (seconds) of a 503 whose Error
// does not set one.
const DefaultRetryAfter = 5

// ErrorInfo is one google.rpc.ErrorInfo detail of a headless error body
// (wire contract §11.5).
type ErrorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Error is an HTTP error answer; WriteError renders it for a Surface.
type Error struct {
	Status int
	// Code is the headless error_type/code (REST bodies leave it out).
	Code    string
	Message string
	// Field names the request field at fault (REST bodies' "field").
	Field string
	// Details are the headless body's ErrorInfo details.
	Details []ErrorInfo
	// RetryAfter is the Retry-After of a 503 in seconds (default
	// DefaultRetryAfter).
	RetryAfter int
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// restBody is the REST API's error body.
type restBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// headlessBody is the headless contract's error body.
type headlessBody struct {
	Error     string      `json:"error"`
	ErrorType string      `json:"error_type"`
	Code      string      `json:"code"`
	Details   []ErrorInfo `json:"details,omitempty"`
}

// WriteError answers with e in the shape of surface s: the one error
// writer of every listener.
func WriteError(w http.ResponseWriter, s Surface, e *Error) {
	switch e.Status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(cmpInt(e.RetryAfter, DefaultRetryAfter)))
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="maestro"`)
	}
	if s == Headless {
		code := e.Code
		if code == "" {
			code = codeOf(e.Status)
		}
		WriteJSON(w, e.Status, headlessBody{Error: e.Message, ErrorType: code, Code: code, Details: e.Details})
		return
	}
	WriteJSON(w, e.Status, restBody{Error: e.Message, Field: e.Field})
}

// codeOf is the headless code of an edge status.
func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return CodeBadRequest
	case http.StatusUnauthorized, http.StatusForbidden:
		return CodeAccessDenied
	case http.StatusServiceUnavailable:
		return CodeRuntimeNotReady
	}
	return CodeInternal
}

// WriteJSON answers status with v as JSON (HTML characters unescaped),
// Cache-Control: no-store and X-Content-Type-Options: nosniff.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		enc.Encode(headlessBody{Error: "encode response: " + err.Error(), ErrorType: CodeInternal, Code: CodeInternal})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write([]byte(b.String()))
}

// Echo quotes client input for an error message: at most MaxEcho bytes of
// it (cut at a rune boundary, marked with "…"), Go-quoted so that control
// characters and invalid UTF-8 are visible.
func Echo(s string) string {
	if len(s) <= MaxEcho {
		return strconv.Quote(s)
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}

// Policy is the edge policy of one listener. The zero value is a
// loopback-only listener without a token.
type Policy struct {
	// Listen is the listen address (host:port). Its host, when it is not
	// a wildcard (empty, 0.0.0.0, ::), is an allowed Host.
	Listen string
	// AllowedHosts are the public names clients may use in Host: a name
	// ("maestro.example.com"), a name with its subdomains
	// ("*.example.com"), or "*" (no Host check; only with a token).
	// Ports are ignored.
	AllowedHosts []string
	// Token is the bearer token. When set, a request that presents
	// credentials must present it, even if RequireAuth is off.
	Token string
	// RequireAuth requires Token on every route Open does not exempt
	// (with RequireAuth and no Token, every such request is refused).
	RequireAuth bool
	// Open reports routes that need no token (health probes, the
	// hosted runner's /.well-known/…); nil: none.
	Open func(*http.Request) bool
	// Surface picks the error shape of a request's route; nil: REST.
	Surface func(*http.Request) Surface
	// MaxBody returns the largest body a route may read (0: the route
	// bounds it itself); nil: no edge bound.
	MaxBody func(*http.Request) int64
	// BodyIdle bounds how long a request's body may send nothing
	// (0: DefaultBodyIdle).
	BodyIdle time.Duration
}

// DefaultBodyIdle is how long a request body may send nothing before
// the read fails: without it, a request that declares a body and never
// sends it holds its connection (one of --max-connections) for ever.
const DefaultBodyIdle = 30 * time.Second

// Validate checks the policy before a listener starts: a listener beyond
// loopback needs a token, and "*" in AllowedHosts needs a token. Errors say
// how to fix the configuration.
func (p *Policy) Validate() error {
	loop, err := LoopbackListen(p.Listen)
	if err != nil {
		return err
	}
	if !loop && (p.Token == "" || !p.RequireAuth) {
		return fmt.Errorf("listen address %s accepts connections from other machines, so a bearer token is required: configure one, or listen on a loopback address such as 127.0.0.1", p.Listen)
	}
	for _, h := range p.AllowedHosts {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/ \t@") {
			return fmt.Errorf("allowed host %s: expected a host name such as maestro.example.com, *.example.com or *", Echo(h))
		}
		if h == "*" && (p.Token == "" || !p.RequireAuth) {
			return errors.New("allowed host \"*\" turns off the DNS-rebinding check, so it needs a bearer token")
		}
	}
	return nil
}

// LoopbackListen reports whether a listen address (host:port, or empty
// for none given) only accepts connections from this machine.
func LoopbackListen(addr string) (bool, error) {
	if addr == "" {
		return true, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("listen address %s: expected host:port: %w", Echo(addr), err)
	}
	// Only names that cannot resolve elsewhere: a *.localhost name is a
	// loopback Host for clients, but a listener's name is resolved by the
	// system resolver.
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback(), nil
}

// Handler wraps next with the policy: Host, Origin, authentication and
// body size, in that order.
func (p *Policy) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := p.surface(r)
		if e := p.CheckHost(r); e != nil {
			Refuse(w, r, s, e)
			return
		}
		if e := CheckOrigin(r); e != nil {
			Refuse(w, r, s, e)
			return
		}
		if p.Open == nil || !p.Open(r) {
			if e := p.Authorize(r); e != nil {
				Refuse(w, r, s, e)
				return
			}
		}
		idleBodyDeadline(w, r, cmpDuration(p.BodyIdle, DefaultBodyIdle))
		if p.MaxBody != nil && r.Body != nil {
			if n := p.MaxBody(r); n > 0 {
				r.Body = http.MaxBytesReader(w, r.Body, n)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hasBody reports whether r has a body still to read.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// refuseDrain is how long a refused request's connection stays open
// after the answer to read what is left of its body (at most 256 KB, as
// net/http does), so that the client, still sending it, reads the answer
// rather than a reset.
const refuseDrain = 500 * time.Millisecond

// Refuse answers a request that is not served with e, without waiting for
// its body: net/http reads what is left of a body before it answers (to
// keep the connection), with no deadline, so that a declared body that
// never came held the connection, unanswered, for ever. The answer goes
// out at once and the connection is closed after it, once the rest of
// the body is read or after refuseDrain.
func Refuse(w http.ResponseWriter, r *http.Request, s Surface, e *Error) {
	if hasBody(r) {
		w.Header().Set("Connection", "close")
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(refuseDrain))
	}
	WriteError(w, s, e)
}

// idleBodyDeadline bounds the wait for each part of r's body to idle: a
// body that sends nothing for that long fails the handler's read with an
// error saying so (and the connection is closed after the answer). The
// deadline is lifted once the body has been read whole, so that the rest
// of the request (an event stream, a long call) is not cut.
func idleBodyDeadline(w http.ResponseWriter, r *http.Request, idle time.Duration) {
	if !hasBody(r) {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(idle)) != nil {
		return // not a connection (a test recorder)
	}
	r.Body = &idleBody{ReadCloser: r.Body, rc: rc, idle: idle}
}

// idleBody is a request body under a sliding read deadline.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	done bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case b.done:
	case err == io.EOF:
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			err = &bodyIdleError{idle: b.idle, err: err}
		}
	case n > 0:
		b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
	return n, err
}

// bodyIdleError is the read error of a body that sent nothing for idle.
type bodyIdleError struct {
	idle time.Duration
	err  error
}

func (e *bodyIdleError) Error() string {
	return fmt.Sprintf("nothing of the request body received for %s: the client stopped sending it", e.idle)
}

func (e *bodyIdleError) Unwrap() error { return e.err }

// Timeout reports true: the error is a timeout, as the one it wraps.
func (e *bodyIdleError) Timeout() bool { return true }

// Temporary reports false (net.Error).
func (e *bodyIdleError) Temporary() bool { return false }

func (p *Policy) surface(r *http.Request) Surface {
	if p.Surface == nil {
		return REST
	}
	return p.Surface(r)
}

// CheckHost refuses (403) a Host that is neither loopback, nor allowed,
// nor the listen address's host.
func (p *Policy) CheckHost(r *http.Request) *Error {
	name := hostName(r.Host)
	if name != "" && p.hostAllowed(name) {
		return nil
	}
	msg := fmt.Sprintf("host %s is not a name of this server: it answers localhost, 127.0.0.1 and [::1]", Echo(r.Host))
	if p.Token == "" {
		msg += "; start it with a token and list its public names (--allowed-host) to serve other names"
	} else {
		msg += " and the names given with --allowed-host"
	}
	return &Error{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: msg}
}

func (p *Policy) hostAllowed(name string) bool {
	if LoopbackHost(name) {
		return true
	}
	if _, err := netip.ParseAddr(name); err == nil && p.tokenRequired() {
		// An IP literal cannot come from a DNS-rebinding page.
		return true
	}
	if host, _, err := net.SplitHostPort(p.Listen); err == nil && host != "" {
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsUnspecified() {
			if strings.EqualFold(strings.TrimSuffix(host, "."), name) {
				return true
			}
		}
	}
	for _, a := range p.AllowedHosts {
		a = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(a), "."))
		if h, _, err := net.SplitHostPort(a); err == nil {
			a = h
		}
		a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		switch {
		case a == "*":
			return p.tokenRequired()
		case strings.HasPrefix(a, "*."):
			if strings.HasSuffix(name, a[1:]) {
				return true
			}
		case a == name:
			return true
		}
	}
	return false
}

func (p *Policy) tokenRequired() bool { return p.RequireAuth && p.Token != "" }

// hostName is the lower-case host of a Host header without port,
// brackets or trailing dot; "" when it is malformed.
func hostName(host string) string {
	if h, port, err := net.SplitHostPort(host); err == nil {
		// SplitHostPort does not check the port: "127.0.0.1:80.evil.example"
		// would otherwise name 127.0.0.1.
		if strings.Trim(port, "0123456789") != "" {
			return ""
		}
		host = h
	} else if strings.HasPrefix(host, "[") {
		if !strings.HasSuffix(host, "]") {
			return ""
		}
		host = host[1 : len(host)-1]
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if strings.ContainsAny(host, "/@ \t[]") {
		return ""
	}
	return host
}

// LoopbackHost reports whether a host (without port; brackets allowed)
// names this machine: localhost, *.localhost (RFC 6761), 127.0.0.0/8 or
// ::1.
func LoopbackHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// CheckOrigin refuses (403) a request a browser sent from another site:
// Sec-Fetch-Site other than same-origin or none, or an Origin that is not
// the request's own (scheme http or https, the same host and port, default
// ports implied). A request without those headers (curl, SDKs) passes. A
// top-level navigation (GET or HEAD with Sec-Fetch-Mode: navigate) passes
// too: the page that caused it cannot read the answer.
func CheckOrigin(r *http.Request) *Error {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Sec-Fetch-Mode") == "navigate" {
		return nil
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return &Error{Status: http.StatusForbidden, Code: CodeAccessDenied,
			Message: fmt.Sprintf("cross-origin request refused (Sec-Fetch-Site: %s): this API answers only its own origin", Echo(site))}
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	if sameOrigin(origin, r.Host) {
		return nil
	}
	return &Error{Status: http.StatusForbidden, Code: CodeAccessDenied,
		Message: fmt.Sprintf("cross-origin request refused: Origin %s is not this server's origin (host %s)", Echo(origin), Echo(r.Host))}
}

// sameOrigin reports whether an Origin header names the host the request
// was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.User != nil {
		return false
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	norm := func(h string) string {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if name, port, err := net.SplitHostPort(h); err == nil && port == def {
			if strings.Contains(name, ":") {
				return "[" + name + "]"
			}
			return name
		}
		return h
	}
	return norm(u.Host) == norm(host)
}

// Authorize checks the credentials: none needed unless RequireAuth, but
// credentials presented while a Token is configured must be valid. It
// returns a 401 Error or nil.
func (p *Policy) Authorize(r *http.Request) *Error {
	presented := r.Header.Get("Authorization") != "" || apiKey(r) != ""
	switch {
	case p.Token == "" && p.RequireAuth:
		return &Error{Status: http.StatusUnauthorized, Code: CodeAccessDenied, Message: MsgNoTokenConfigured}
	case p.Token == "":
		return nil
	case !presented && !p.RequireAuth:
		return nil
	case ValidToken(r, p.Token):
		return nil
	}
	msg := MsgUnauthorizedREST
	if p.surface(r) == Headless {
		msg = MsgUnauthorizedHeadless
	}
	return &Error{Status: http.StatusUnauthorized, Code: CodeAccessDenied, Message: msg}
}

// ValidToken reports whether r carries token (not empty) as an RFC 7235
// bearer credential (scheme case-insensitive) or in x-maestro-api-key /
// x-composer-api-key, compared in constant time. Spaces and line breaks
// around the configured token are not part of it: a token read with its
// line end (a secret file, an EnvironmentFile) could never be sent, since
// HTTP trims header values.
func ValidToken(r *http.Request, token string) bool {
	token = strings.TrimSpace(token)
	if token == "" {
		return false
	}
	var given []string
	if scheme, cred, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "bearer") {
		given = append(given, strings.TrimSpace(cred))
	}
	given = append(given, r.Header.Get("x-maestro-api-key"), r.Header.Get("x-composer-api-key"))
	ok := false
	for _, g := range given {
		if g != "" && subtle.ConstantTimeCompare([]byte(g), []byte(token)) == 1 {
			ok = true
		}
	}
	return ok
}

func apiKey(r *http.Request) string {
	if k := r.Header.Get("x-maestro-api-key"); k != "" {
		return k
	}
	return r.Header.Get("x-composer-api-key")
}

// LoopbackPeer reports whether the request came from this machine
// (r.RemoteAddr is a loopback address).
func LoopbackPeer(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}

// RequireJSON refuses (415) a request whose body is not declared as JSON:
// a body is present (or its length unknown) and Content-Type is not
// application/json. Without this, a browser could send the body cross-site
// as text/plain without a CORS preflight.
func RequireJSON(r *http.Request) *Error {
	return RequireContentType(r, "application/json")
}

// RequireContentType refuses (415) a request with a body whose
// Content-Type (parameters ignored) is not one of types. A request
// without a body (Content-Length 0) passes.
func RequireContentType(r *http.Request, types ...string) *Error {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	for _, t := range types {
		if mt == t {
			return nil
		}
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Code: CodeBadRequest,
		Message: fmt.Sprintf("Content-Type %s: expected %s", Echo(ct), strings.Join(types, " or "))}
}

// SimpleContentType reports whether a request's Content-Type is one a
// browser may send cross-site without a CORS preflight (text/plain,
// application/x-www-form-urlencoded, multipart/form-data) or none.
func SimpleContentType(r *http.Request) bool {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	switch strings.ToLower(strings.TrimSpace(mt)) {
	case "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
		return true
	}
	return false
}

func cmpDuration(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

func cmpInt(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}
