package transporttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Request builds a request for url carrying "Authorization: Bearer
// token" (none when token is empty) and then headers; a header whose
// value is "-" is removed, so that a test can send a request without
// the token.
func Request(t testing.TB, ctx context.Context, method, url, token string, body io.Reader, headers map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		if v == "-" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	return req
}

// Call sends one request through hc within 30 s and returns the status
// and the answer's body. A string body is sent as it is, any other
// non-nil body as JSON; a body is labelled application/json unless
// headers set Content-Type. The token and headers apply as in Request.
// (runnerProc.call in cmd/maestro/hostedrunner_e2e_test.go still repeats
// this; it is to call Call when that file is next changed.)
func Call(t testing.TB, hc *http.Client, method, url, token string, body any, headers map[string]string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encode the body of %s %s: %v", method, url, err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if rd != nil {
		withType := map[string]string{"Content-Type": "application/json"}
		maps.Copy(withType, headers)
		headers = withType
	}
	req := Request(t, ctx, method, url, token, rd, headers)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer to %s %s: %v", method, url, err)
	}
	return resp.StatusCode, data
}

// SSE reads the envelopes of one event stream (wire contract: the
// events route of docs/remote-attach.md) in the background.
type SSE struct {
	t    testing.TB
	wait time.Duration
	ch   chan string
	errs chan error
}

// ReadSSE reads body's "data: " lines until it ends. Every envelope must
// decode strictly (protocol.DecodeEnvelope) and pass check when check is
// not nil; the first that does not, or a line that is not a data line,
// ends the reading and fails the next call of Next or Ended. wait bounds
// each Next and Ended. The caller ends the stream (cancelling its
// request or closing body).
func ReadSSE(t testing.TB, body io.Reader, wait time.Duration, check func(data []byte) error) *SSE {
	st := &SSE{t: t, wait: wait, ch: make(chan string, 4096), errs: make(chan error, 1)}
	go func() {
		defer close(st.ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				st.errs <- &streamError{"SSE line is not a data line: " + line}
				return
			}
			if check != nil {
				if err := check([]byte(data)); err != nil {
					st.errs <- &streamError{"envelope does not validate: " + data + ": " + err.Error()}
					return
				}
			}
			if _, err := protocol.DecodeEnvelope([]byte(data)); err != nil {
				st.errs <- &streamError{"envelope does not decode strictly: " + data + ": " + err.Error()}
				return
			}
			st.ch <- data
		}
	}()
	return st
}

type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

// Next returns the next envelope's JSON; the stream ending, a bad
// envelope or none within the wait fails the test.
func (st *SSE) Next() []byte {
	st.t.Helper()
	select {
	case data, ok := <-st.ch:
		if !ok {
			select {
			case err := <-st.errs:
				st.t.Fatalf("event stream: %v", err)
			default:
			}
			st.t.Fatalf("event stream ended")
		}
		return []byte(data)
	case err := <-st.errs:
		st.t.Fatalf("event stream: %v", err)
	case <-time.After(st.wait):
		st.t.Fatalf("no envelope within %v", st.wait)
	}
	return nil
}

// Ended waits for the stream to end, skipping what is left to read; a
// bad envelope or the stream still open after the wait fails the test.
func (st *SSE) Ended() {
	st.t.Helper()
	timeout := time.NewTimer(st.wait)
	defer timeout.Stop()
	for {
		select {
		case _, ok := <-st.ch:
			if !ok {
				return
			}
		case err := <-st.errs:
			st.t.Fatalf("event stream: %v", err)
		case <-timeout.C:
			st.t.Fatalf("event stream did not end within %v", st.wait)
		}
	}
}
