package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
)

// TestServeEdgeAbuse: against the built binary with a token and
// --max-connections 4, as a client without the token:
//   - requests that declare a body and never send it (on each POST route,
//     on the attach routes, with a foreign Host) are each answered at once
//     (401 or 403, in the route's error shape) and their connections
//     closed, so that four of them do not fill the server: before, each
//     was never answered and held its place for ever, and the token
//     holder's next request got 503;
//   - one address holding every place with event streams gives one up to
//     a request from another address (127.0.0.2), not to its own.
func TestServeEdgeAbuse(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	env := append(proctest.NoModelEnv(home), "MAESTRO_API_TOKEN=sekrit")
	url, stderr, stop := startServe(ctx, t, env, "--workers", "0", "--data-dir", home, "--max-connections", "4")
	defer stop() // before cancel, which would kill it
	addr := strings.TrimPrefix(url, "http://")

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for _, tc := range []struct{ path, host, want string }{
		{"/api/v1/tasks", addr, `{"error":"missing or invalid bearer token"}`},
		{"/api/v1/schedules", addr, `{"error":"missing or invalid bearer token"}`},
		{"/api/v1/pieces", addr, `{"error":"missing or invalid bearer token"}`},
		{"/api/headless/sessions", addr, `"error_type":"access_denied"`},
		{"/api/v1/tasks", "attacker.example", `is not a name of this server`},
		{"/api/v1/tasks/1/comments", addr, `{"error":"missing or invalid bearer token"}`},
	} {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c) // the client never closes it
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":\"", tc.path, tc.host)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("POST %s (Host %s), no token, body never sent: no answer: %v\n%s", tc.path, tc.host, err, stderr.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), tc.want) {
			t.Errorf("POST %s (Host %s), no token, body never sent: %s %s", tc.path, tc.host, resp.Status, body)
		}
		if n, err := br.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("POST %s (Host %s): after the answer, read %d bytes, %v; want the connection closed", tc.path, tc.host, n, err)
		}
	}

	get := func(c *http.Client, path string, stream bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
		req.Header.Set("Authorization", "Bearer sekrit")
		if stream {
			req.Header.Set("Accept", "text/event-stream")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, stderr.String())
		}
		if !stream {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		return resp
	}
	if resp := get(fromAddr(""), "/api/v1/tasks", false); resp.StatusCode != http.StatusOK {
		t.Fatalf("the token holder after the attacks: %s", resp.Status)
	}

	// A queued job to follow (no workers: its stream stays open).
	if out, errOut, err := tasksCLI(ctx, append(env, "MAESTRO_API_TOKEN=sekrit"), url, "submit", "say ok", "--piece", "noop"); err != nil {
		t.Fatalf("submit: %v\n%s\n%s", err, out, errOut)
	}
	var streams []*http.Response
	for len(streams) < 4 {
		// The submit's connections, idle or closing, make room.
		resp := get(fromAddr(""), "/api/v1/jobs/1/events", true)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %s", len(streams)+1, resp.Status)
		}
		streams = append(streams, resp)
	}
	if resp := get(fromAddr(""), "/api/v1/tasks", false); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the address holding every place asks for one more: %s, want 503", resp.Status)
	}
	other := fromAddr("127.0.0.2")
	if resp := get(other, "/api/v1/tasks", false); resp.StatusCode != http.StatusOK {
		t.Fatalf("another address while one holds every place with streams: %s, want 200\n%s", resp.Status, stderr.String())
	}
	stop() // its stderr is then read whole
	if !strings.Contains(stderr.String(), "client address 127.0.0.1 holds 4 of the 4 connections") {
		t.Errorf("serve's log does not say which address held the places:\n%s", stderr.String())
	}
}

// fromAddr is an HTTP client of its own connections, sent from the loopback
// address local ("": any).
func fromAddr(local string) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}}
}
