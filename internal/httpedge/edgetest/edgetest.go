// Package edgetest sends the requests the tests of an HTTP edge need:
// forged Host and Origin headers, bodies of any content type, and a bounded
// wait, so that an event stream opened by an attack that got through ends
// instead of hanging the test.
package edgetest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Call sends one request to url with body and the headers hdr ("Host" sets
// the request's Host) on hc, and returns the status and the body read
// until the response ends or timeout passes. A transport error fails tb.
func Call(tb testing.TB, hc *http.Client, method, url, body string, hdr map[string]string, timeout time.Duration) (int, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body) // a stream ends with the deadline
	return resp.StatusCode, data
}
