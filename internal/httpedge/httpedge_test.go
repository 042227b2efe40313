package httpedge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckHost(t *testing.T) {
	t.Parallel()
	local := &Policy{}
	public := &Policy{Listen: "0.0.0.0:8080", Token: "t", RequireAuth: true, AllowedHosts: []string{"maestro.example.com", "*.runners.example.com", "[2001:db8::5]"}}
	named := &Policy{Listen: "devbox.lan:7878", Token: "t", RequireAuth: true}
	star := &Policy{Listen: "0.0.0.0:8080", Token: "t", RequireAuth: true, AllowedHosts: []string{"*"}}
	// "*" without a token (which Validate refuses at start-up) still
	// turns nothing off: a rebinding page would otherwise reach an open
	// listener.
	starNoToken := &Policy{Listen: "127.0.0.1:8080", AllowedHosts: []string{"*"}}
	tests := []struct {
		p    *Policy
		host string
		ok   bool
	}{
		{local, "localhost", true},
		{local, "LOCALHOST:7878", true},
		{local, "localhost.", true},
		{local, "app.localhost:3000", true},
		{local, "127.0.0.1:7878", true},
		{local, "127.9.9.9", true},
		{local, "[::1]:7878", true},
		{local, "[::1]", true},
		{local, "[::ffff:127.0.0.1]:7878", true},
		{local, "attacker.example", false},
		{local, "localhost.attacker.example", false},
		{local, "127.0.0.1.attacker.example", false},
		// The port is not a port: the name goes on after the colon.
		{local, "127.0.0.1:7878.attacker.example", false},
		{local, "localhost:80.attacker.example", false},
		{local, "[::1]:x.attacker.example", false},
		{local, "localhost:", true},
		{local, "192.168.1.5:7878", false}, // no token: loopback only
		{local, "", false},
		{local, "[::1", false},
		{local, "a b", false},
		{public, "maestro.example.com", true},
		{public, "Maestro.Example.Com.:443", true},
		{public, "pod-1.runners.example.com:8080", true},
		{public, "runners.example.com", false},
		{public, "evilrunners.example.com", false},
		{public, "maestro.example.com.attacker.example", false},
		{public, "10.1.2.3:8080", true}, // an IP literal cannot be rebound
		{public, "[2001:db8::9]:8080", true},
		{public, "attacker.example", false},
		{named, "devbox.lan:7878", true},
		{named, "other.lan", false},
		{star, "whatever.example", true},
		{starNoToken, "attacker.example", false},
		{starNoToken, "localhost:8080", true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = tt.host
		if got := tt.p.CheckHost(r) == nil; got != tt.ok {
			t.Errorf("%+v Host %q: allowed %v, want %v", tt.p.AllowedHosts, tt.host, got, tt.ok)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = strings.Repeat("h", 1<<20)
	if e := local.CheckHost(r); e == nil || len(e.Message) > 2*MaxEcho+300 || e.Status != http.StatusForbidden {
		t.Fatalf("a 1 MB Host: %v (%d bytes)", e, len(e.Message))
	}
}

func TestCheckOrigin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, host string
		hdr                map[string]string
		ok                 bool
	}{
		{"no headers (curl)", "POST", "127.0.0.1:7878", nil, true},
		{"same origin", "POST", "127.0.0.1:7878", map[string]string{"Origin": "http://127.0.0.1:7878", "Sec-Fetch-Site": "same-origin"}, true},
		{"same origin, default port", "POST", "maestro.example.com", map[string]string{"Origin": "https://maestro.example.com"}, true},
		{"same origin, explicit default port", "POST", "maestro.example.com:443", map[string]string{"Origin": "https://maestro.example.com"}, true},
		{"user typed", "GET", "127.0.0.1:7878", map[string]string{"Sec-Fetch-Site": "none"}, true},
		{"other host", "POST", "127.0.0.1:7878", map[string]string{"Origin": "https://attacker.example"}, false},
		{"other port", "POST", "127.0.0.1:7878", map[string]string{"Origin": "http://127.0.0.1:7879"}, false},
		{"other scheme's port", "POST", "127.0.0.1:80", map[string]string{"Origin": "https://127.0.0.1"}, false},
		{"null origin", "POST", "127.0.0.1:7878", map[string]string{"Origin": "null"}, false},
		{"file origin", "POST", "127.0.0.1:7878", map[string]string{"Origin": "file://"}, false},
		{"cross-site", "DELETE", "127.0.0.1:7878", map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{"same-site", "PUT", "127.0.0.1:7878", map[string]string{"Sec-Fetch-Site": "same-site"}, false},
		{"cross-site event stream", "GET", "127.0.0.1:7878", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Origin": "https://attacker.example"}, false},
		{"cross-site navigation", "GET", "127.0.0.1:7878", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, true},
		{"cross-site POST navigation", "POST", "127.0.0.1:7878", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, "/", nil)
		r.Host = tt.host
		for k, v := range tt.hdr {
			r.Header.Set(k, v)
		}
		if got := CheckOrigin(r) == nil; got != tt.ok {
			t.Errorf("%s: allowed %v, want %v", tt.name, got, tt.ok)
		}
	}
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	required := &Policy{Token: "s3cret", RequireAuth: true}
	optional := &Policy{Token: "s3cret"}
	locked := &Policy{RequireAuth: true}
	open := &Policy{}
	// A token read with its line end (a Kubernetes secret made from a
	// file, an EnvironmentFile): no client could send it, since header
	// values cannot end in a line break or a space.
	newline := &Policy{Token: "s3cret\n", RequireAuth: true}
	tests := []struct {
		name string
		p    *Policy
		hdr  map[string]string
		ok   bool
	}{
		{"bearer", required, map[string]string{"Authorization": "Bearer s3cret"}, true},
		{"bearer lower case", required, map[string]string{"Authorization": "bearer s3cret"}, true},
		{"bearer upper case, spaces", required, map[string]string{"Authorization": "BEARER   s3cret "}, true},
		{"api key", required, map[string]string{"x-maestro-api-key": "s3cret"}, true},
		{"composer api key", required, map[string]string{"x-composer-api-key": "s3cret"}, true},
		{"none", required, nil, false},
		{"wrong", required, map[string]string{"Authorization": "Bearer s3cre"}, false},
		{"basic", required, map[string]string{"Authorization": "Basic s3cret"}, false},
		{"no scheme", required, map[string]string{"Authorization": "s3cret"}, false},
		{"empty bearer", required, map[string]string{"Authorization": "Bearer "}, false},
		{"optional, none", optional, nil, true},
		{"optional, wrong", optional, map[string]string{"Authorization": "Bearer wrong"}, false},
		{"optional, wrong api key", optional, map[string]string{"x-maestro-api-key": "wrong"}, false},
		{"locked", locked, map[string]string{"Authorization": "Bearer anything"}, false},
		{"open", open, map[string]string{"Authorization": "Bearer anything"}, true},
		{"token ending in a newline", newline, map[string]string{"Authorization": "Bearer s3cret"}, true},
		{"token ending in a newline, api key", newline, map[string]string{"x-maestro-api-key": "s3cret"}, true},
		{"token ending in a newline, wrong", newline, map[string]string{"Authorization": "Bearer s3cre"}, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		for k, v := range tt.hdr {
			r.Header.Set(k, v)
		}
		e := tt.p.Authorize(r)
		if (e == nil) != tt.ok {
			t.Errorf("%s: authorized %v, want %v", tt.name, e == nil, tt.ok)
		}
		if e != nil && e.Status != http.StatusUnauthorized {
			t.Errorf("%s: status %d", tt.name, e.Status)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p  Policy
		ok bool
	}{
		{Policy{}, true},
		{Policy{Listen: "127.0.0.1:0"}, true},
		{Policy{Listen: "localhost:7878"}, true},
		{Policy{Listen: "[::1]:7878"}, true},
		{Policy{Listen: "0.0.0.0:8080"}, false},
		{Policy{Listen: ":8080"}, false},
		{Policy{Listen: "0.0.0.0:8080", Token: "t"}, false},
		{Policy{Listen: "0.0.0.0:8080", Token: "t", RequireAuth: true}, true},
		{Policy{Listen: "nonsense"}, false},
		{Policy{AllowedHosts: []string{"*"}}, false},
		{Policy{AllowedHosts: []string{"*"}, Token: "t", RequireAuth: true}, true},
		{Policy{AllowedHosts: []string{"http://x/"}}, false},
		{Policy{AllowedHosts: []string{""}}, false},
		{Policy{AllowedHosts: []string{"maestro.example.com"}}, true},
	}
	for _, tt := range tests {
		if err := tt.p.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: %v, want ok %v", tt.p, err, tt.ok)
		}
	}
}

func TestRequireJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ct   string
		body string
		ok   bool
	}{
		{"application/json", "{}", true},
		{"Application/JSON; charset=utf-8", "{}", true},
		{"text/plain", "{}", false},
		{"text/plain;charset=UTF-8", "{}", false},
		{"application/x-www-form-urlencoded", "{}", false},
		{"multipart/form-data; boundary=x", "{}", false},
		{"", "{}", false},
		{"application/jsonp", "{}", false},
		{"", "", true},
		{"text/plain", "", true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
		if tt.ct != "" {
			r.Header.Set("Content-Type", tt.ct)
		}
		e := RequireJSON(r)
		if (e == nil) != tt.ok {
			t.Errorf("%q with %q: %v, want ok %v", tt.ct, tt.body, e, tt.ok)
		}
		if e != nil && e.Status != http.StatusUnsupportedMediaType {
			t.Errorf("%q: status %d", tt.ct, e.Status)
		}
	}
}

func TestWriteError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s      Surface
		e      *Error
		body   string
		header map[string]string
	}{
		{REST, &Error{Status: 400, Message: "title: required", Field: "title"}, `{"error":"title: required","field":"title"}`, nil},
		{REST, &Error{Status: 401, Code: CodeAccessDenied, Message: MsgUnauthorizedREST}, `{"error":"missing or invalid bearer token"}`, map[string]string{"WWW-Authenticate": `Bearer realm="maestro"`}},
		{Headless, &Error{Status: 401, Code: CodeAccessDenied, Message: MsgUnauthorizedHeadless},
			`{"error":"Unauthorized: a valid API key is required (Authorization: Bearer <token> or x-maestro-api-key)","error_type":"access_denied","code":"access_denied"}`,
			map[string]string{"WWW-Authenticate": `Bearer realm="maestro"`}},
		{Headless, &Error{Status: 503, Code: CodeRuntimeNotReady, Message: "draining"}, `{"error":"draining","error_type":"runtime_not_ready","code":"runtime_not_ready"}`, map[string]string{"Retry-After": "5"}},
		{Headless, &Error{Status: 503, Code: CodeRuntimeNotReady, Message: "x", RetryAfter: 1}, `{"error":"x","error_type":"runtime_not_ready","code":"runtime_not_ready"}`, map[string]string{"Retry-After": "1"}},
		{Headless, &Error{Status: 415, Message: "m"}, `{"error":"m","error_type":"bad_request","code":"bad_request"}`, nil},
		{Headless, &Error{Status: 409, Code: "runtime_owned_elsewhere", Message: "m", Details: []ErrorInfo{{Type: "t", Reason: "r", Domain: "d"}}},
			`{"error":"m","error_type":"runtime_owned_elsewhere","code":"runtime_owned_elsewhere","details":[{"@type":"t","reason":"r","domain":"d"}]}`, nil},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		WriteError(rec, tt.s, tt.e)
		if rec.Code != tt.e.Status || strings.TrimSpace(rec.Body.String()) != tt.body {
			t.Errorf("%d %s, want %d %s", rec.Code, rec.Body, tt.e.Status, tt.body)
		}
		for k, v := range tt.header {
			if got := rec.Header().Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: %q, want [%q]", k, got, v)
			}
		}
		if rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("headers %v", rec.Header())
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Errorf("invalid JSON %s", rec.Body)
		}
	}
}

func TestHandlerOrderAndOpenRoutes(t *testing.T) {
	t.Parallel()
	p := &Policy{Token: "tok", RequireAuth: true, Open: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
		Surface: func(*http.Request) Surface { return Headless }, MaxBody: func(*http.Request) int64 { return 4 }}
	ran := 0
	h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		buf := make([]byte, 16)
		if n, err := r.Body.Read(buf); err == nil && n > 4 {
			t.Errorf("read %d bytes past MaxBody", n)
		}
		w.WriteHeader(204)
	}))
	tests := []struct {
		name, path, host string
		hdr              map[string]string
		want             int
	}{
		{"open route, foreign host", "/healthz", "attacker.example", nil, 403},
		{"open route", "/healthz", "localhost", nil, 204},
		{"closed route without token", "/api/x", "localhost", nil, 401},
		{"closed route, foreign host, token", "/api/x", "attacker.example", map[string]string{"Authorization": "Bearer tok"}, 403},
		{"closed route, cross-site, token", "/api/x", "localhost", map[string]string{"Authorization": "Bearer tok", "Sec-Fetch-Site": "cross-site"}, 403},
		{"closed route with token", "/api/x", "localhost", map[string]string{"Authorization": "Bearer tok"}, 204},
	}
	for _, tt := range tests {
		before := ran
		r := httptest.NewRequest("POST", tt.path, strings.NewReader("0123456789"))
		r.Host = tt.host
		for k, v := range tt.hdr {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, rec.Code, rec.Body, tt.want)
		}
		if (ran > before) != (tt.want == 204) {
			t.Errorf("%s: handler ran %v", tt.name, ran > before)
		}
	}
}

func TestLoopbackPeerAndEcho(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "[::ffff:127.0.0.1]:1": true, "192.0.2.1:1": false, "[2001:db8::1]:1": false, "": false, "garbage": false} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		if got := LoopbackPeer(r); got != want {
			t.Errorf("LoopbackPeer(%q) = %v", addr, got)
		}
	}
	if got := Echo("a\x00b"); got != `"a\x00b"` {
		t.Errorf("Echo = %s", got)
	}
	long := Echo(strings.Repeat("é", 10<<20))
	if len(long) > MaxEcho+40 || !strings.Contains(long, "bytes)") {
		t.Errorf("Echo of 20 MB: %d bytes: %.80s", len(long), long)
	}
}
