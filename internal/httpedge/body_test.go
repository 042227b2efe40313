package httpedge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startPolicy serves h behind p on a loopback listener, as serve does
// (a header timeout, no whole-request timeout); it returns the address.
func startPolicy(t *testing.T, p *Policy, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p.Handler(h), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// stalledRequest sends a request declaring a body of 1,000 bytes, sends
// a few of them and nothing more, and returns the answer's status line
// and body; the server must close the connection after it (within 10 s).
func stalledRequest(t *testing.T, addr, headers string) (status, body string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /api/v1/tasks HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":\"", addr, headers)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a request whose body stalls was not answered: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The server gives the connection up: it is not left waiting for
	// the rest of the body.
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the answer to a request whose body stalls: read %d bytes, %v; want the connection closed", n, err)
	}
	return resp.Status, string(b)
}

// TestRefusalDoesNotWaitForBody: a request the edge refuses (no token, a
// foreign Host) whose declared body never comes is answered at once and
// its connection closed. net/http read the rest of the body before
// answering, without a deadline: anyone could hold a connection (one of
// --max-connections) and a goroutine for ever, unanswered.
func TestRefusalDoesNotWaitForBody(t *testing.T) {
	t.Parallel()
	p := &Policy{Token: "sekrit", RequireAuth: true}
	addr := startPolicy(t, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a refused request reached the handler")
	}))
	if status, body := stalledRequest(t, addr, ""); !strings.HasPrefix(status, "401") || !strings.Contains(body, MsgUnauthorizedREST) {
		t.Errorf("no token: %s %s", status, body)
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: attacker.example\r\nAuthorization: Bearer sekrit\r\nContent-Length: 1000\r\n\r\n{")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("foreign Host, body stalled: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %s", resp.Status)
	}
}

// TestBodyIdleTimeout: a body that stops coming (nothing for
// Policy.BodyIdle) fails the handler's read with a message that says so,
// the client is answered and the connection closed. Once the body is
// read whole, the deadline no longer applies.
func TestBodyIdleTimeout(t *testing.T) {
	t.Parallel()
	p := &Policy{BodyIdle: 100 * time.Millisecond}
	addr := startPolicy(t, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			WriteError(w, REST, &Error{Status: http.StatusBadRequest, Message: "request body: " + err.Error()})
			return
		}
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
				fmt.Fprintf(w, "read %d bytes, then cancelled", len(b))
				return
			case <-time.After(3 * p.BodyIdle):
			}
			fmt.Fprintf(w, "read %d bytes, still wanted", len(b))
			return
		}
		fmt.Fprintf(w, "read %d bytes", len(b))
	}))
	status, body := stalledRequest(t, addr, "")
	if !strings.HasPrefix(status, "400") || !strings.Contains(body, "nothing of the request body received for 100ms") {
		t.Errorf("stalled body: %s %s", status, body)
	}

	// A body read whole clears the deadline: the handler may take longer
	// than BodyIdle afterwards without its request being cancelled (the
	// server watches the connection for the client going away).
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /slow HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n0123456789")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "read 10 bytes, still wanted" {
		t.Errorf("a whole body, then a handler longer than BodyIdle: %s %s", resp.Status, b)
	}
}
