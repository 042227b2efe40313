package hostedrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeMaxConnections: the runner's listener bounds its open
// connections (--max-connections). With a limit of 1, a request in
// flight takes the place; the next is answered 503 in the headless shape
// with Retry-After (internal/httpedge's tests show a closed connection
// giving its place back).
func TestServeMaxConnections(t *testing.T) {
	t.Parallel()
	cfg := testConfig(newWorkspace(t))
	cfg.MaxConns = 1
	r, _ := newRunner(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln, nopCloser{}, nil, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
	})
	addr := ln.Addr().String()

	// A drain whose body never comes holds its connection busy.
	held, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	fmt.Fprintf(held, "POST /.well-known/evalops/remote-runner/drain HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", addr)

	get := func() (*http.Response, []byte) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}).Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	// The held connection is accepted first; should it be reclaimed
	// (it sent no complete request for a second, on a loaded machine),
	// try again.
	deadline := time.Now().Add(10 * time.Second)
	var resp *http.Response
	var body []byte
	for {
		resp, body = get()
		if resp.StatusCode == http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	var e struct {
		Error     string `json:"error"`
		ErrorType string `json:"error_type"`
		Code      string `json:"code"`
	}
	json.Unmarshal(body, &e)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || e.Code != "runtime_not_ready" || e.ErrorType != "runtime_not_ready" ||
		!strings.Contains(string(body), "limit of 1 open connections (--max-connections / MAESTRO_HOSTED_RUNNER_MAX_CONNECTIONS)") {
		t.Fatalf("past the limit: %s Retry-After %q %s", resp.Status, resp.Header.Get("Retry-After"), body)
	}
}

type nopCloser struct{}

func (nopCloser) Close() {}

// TestServeSignalDrain: a SIGTERM whose drain writes no manifest (the
// snapshot root is a file) makes Serve fail, so the process exits
// non-zero; it exited 0 as if the session had been handed over. A drain
// whose runtime flush fails fails too, saying why (the manifest's
// runtime.error; the operator reading the pod log could not tell). A
// drain that succeeds still returns nil.
func TestServeSignalDrain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, want string }{
		{"drained", ""},
		{"no manifest", "no manifest was written"},
		{"flush failed", "drain interrupted (runtime error: disk full): manifest "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(newWorkspace(t))
			if tc.name == "no manifest" {
				cfg.SnapshotRoot = filepath.Join(cfg.WorkspaceRoot, "file")
				if err := os.WriteFile(cfg.SnapshotRoot, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r, _ := newRunner(t, cfg)
			if tc.name == "flush failed" {
				r.flush = func() error { return errors.New("disk full") }
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			sig := make(chan os.Signal, 1)
			sig <- syscall.SIGTERM
			served := make(chan error, 1)
			go func() { served <- r.Serve(t.Context(), ln, nopCloser{}, sig, nil) }()
			var err2 error
			select {
			case err2 = <-served:
			case <-time.After(20 * time.Second):
				t.Fatal("Serve did not return after the signal")
			}
			switch {
			case tc.want != "" && (err2 == nil || !strings.Contains(err2.Error(), tc.want)):
				t.Errorf("Serve = %v, want the failed drain (%q)", err2, tc.want)
			case tc.want == "" && err2 != nil:
				t.Errorf("Serve = %v, want nil after a drain", err2)
			}
		})
	}
}
