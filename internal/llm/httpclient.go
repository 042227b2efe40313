package llm

import (
	"net/http"
	"time"
)

// ResponseHeaderTimeout bounds the wait for response headers of
// DefaultHTTPClient; it does not limit how long a stream may run.
const ResponseHeaderTimeout = 10 * time.Minute

// DefaultHTTPClient is the HTTP client of a provider configured without
// one: a client on a copy of the default transport whose wait for
// response headers is bounded by ResponseHeaderTimeout.
func DefaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = ResponseHeaderTimeout
		return &http.Client{Transport: t}
	}
	return &http.Client{}
}
