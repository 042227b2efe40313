// Package edgetest sends the requests the tests of an HTTP edge need:
// forged Host and Origin headers, bodies of any content type, and a bounded
// wait, so that an event stream opened by an attack that got through ends
// instead of hanging the test. It also checks the edge's error answers.
package edgetest

import (
	"context"
	"encoding/json"
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

// ErrorBody is the headless error body (docs/spec/headless-wire-contract.md
// §11.5) as tests read it: error_type and code both carry the error's type.
type ErrorBody struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
	Code      string `json:"code"`
}

// WantError fails tb unless an answer (status and body) is the error
// wanted: wantStatus, a JSON body whose error_type and code are both
// wantType and whose message is wantText. what names the request in the
// failure.
func WantError(tb testing.TB, what string, status int, body []byte, wantStatus int, wantType, wantText string) {
	tb.Helper()
	wantError(tb, what, status, body, wantStatus, wantType, wantText, func(msg string) bool { return msg == wantText })
}

// WantErrorContaining is WantError for a message that contains wantText.
func WantErrorContaining(tb testing.TB, what string, status int, body []byte, wantStatus int, wantType, wantText string) {
	tb.Helper()
	wantError(tb, what, status, body, wantStatus, wantType, wantText, func(msg string) bool { return strings.Contains(msg, wantText) })
}

func wantError(tb testing.TB, what string, status int, body []byte, wantStatus int, wantType, wantText string, textOK func(string) bool) {
	tb.Helper()
	var e ErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		tb.Fatalf("%s: %d: error body %q is not JSON: %v", what, status, body, err)
	}
	if status != wantStatus || e.ErrorType != wantType || e.Code != wantType || !textOK(e.Error) {
		tb.Fatalf("%s: got %d %s, want %d {error: %q, error_type/code: %q}", what, status, body, wantStatus, wantText, wantType)
	}
}
