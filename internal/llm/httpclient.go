package llm

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ResponseHeaderTimeout bounds the wait for response headers of
// DefaultHTTPClient; it does not limit how long a stream may run.
const ResponseHeaderTimeout = 10 * time.Minute

// DefaultHTTPClient is the HTTP client of a provider configured without
// one: a client on a copy of the default transport whose wait for
// response headers is bounded by ResponseHeaderTimeout, following
// redirects only within the origin of the request (SameOriginRedirect).
func DefaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = ResponseHeaderTimeout
		return &http.Client{Transport: t, CheckRedirect: SameOriginRedirect}
	}
	return &http.Client{CheckRedirect: SameOriginRedirect}
}

// SameOriginRedirect is the redirect policy of model API clients: a
// redirect is followed (at most 10) only to the origin (scheme, host and
// port) of the first request. The SDKs send the key in headers such as
// x-api-key, which Go's client copies to any redirect target: a base
// URL that redirected to another host would hand it the key.
func SameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if from := via[0].URL; !SameOrigin(req.URL, from) {
		return fmt.Errorf("refused a redirect from %s to %s: a model API's credentials go only to its base URL's origin", origin(from), origin(req.URL))
	}
	return nil
}

// origin is u's scheme://host[:port].
func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// SameOrigin reports whether a and b have the same scheme, host and port
// (default ports implied): where a credential meant for a may be sent.
func SameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}
