package mcp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp/mcptest"
	"github.com/maestro-run/maestro/internal/tool"
)

// TestStdioServerStopsWithItsChildren: stopping a stdio server stops
// what it started too (a wrapper's child, a helper), not the server's
// own process only: a child of the server ran on after the session, and
// after Maestro's Ctrl-C and exit.
func TestStdioServerStopsWithItsChildren(t *testing.T) {
	t.Parallel()
	srv := stdioServer(t)
	fifo := filepath.Join(t.TempDir(), "child")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The child holds the FIFO open for writing until it dies: reading
	// it ends when the child is gone.
	exe := srv.Command
	srv.Command, srv.Args = "sh", []string{"-c", `sleep 30 >"$CHILD_FIFO" & exec "$SERVER"`}
	srv.Env["CHILD_FIFO"], srv.Env["SERVER"] = fifo, exe
	m := NewManager(Options{Servers: map[string]config.MCPServer{"local": srv}, LogDir: t.TempDir()})
	t.Cleanup(func() { m.Close() })
	if _, err := m.Tools(testCtx(t), "mcp__local__*"); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDONLY, 0) // returns once the child opened it
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := f.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("reading the FIFO of the server's child: %v; want EOF: the child outlived its server", err)
	}
}

// TestStdioServerStartErrors: a stdio server that does not start is
// reported with how it ended and the end of its stderr: one exiting at
// once was "connection closed: calling "initialize": client is closing:
// EOF", one hanging "context deadline exceeded", one printing a banner on
// stdout a JSON decoder's complaint alone.
func TestStdioServerStartErrors(t *testing.T) {
	t.Parallel()
	sh := func(script string) config.MCPServer {
		return config.MCPServer{Command: "sh", Args: []string{"-c", script}}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		srv  config.MCPServer
		want []string
	}{
		{"dies", sh("echo 'fatal: no config file' >&2; exit 3"),
			[]string{"MCP server dies exited before it answered (exit status 3)", `its stderr ends "fatal: no config file"`, "mcp-dies.log"}},
		{"hangs", sh("echo starting >&2; exec sleep 30"),
			[]string{"MCP server hangs did not answer its initialize request within 300ms", `its stderr ends "starting"`}},
		{"silent", config.MCPServer{Command: exe, Env: map[string]string{silentListerEnv: "1"}},
			[]string{"MCP server silent did not list its tools within 300ms"}},
		{"banner", sh("echo 'Server running on stdio'; echo 'waiting for the database' >&2; exec sleep 30"),
			[]string{"MCP server banner did not answer its initialize request within 300ms",
				`it wrote a line on its stdout that is not a JSON-RPC message, skipped (the first: "Server running on stdio"); its stderr ends "waiting for the database"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			logDir := t.TempDir()
			m := NewManager(Options{Servers: map[string]config.MCPServer{c.name: c.srv}, LogDir: logDir, StartTimeout: 300 * time.Millisecond})
			t.Cleanup(func() { m.Close() })
			err := m.Require(testCtx(t), []string{c.name})
			var missing *MissingError
			if !errors.As(err, &missing) {
				t.Fatalf("Require = %v, want a *MissingError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q\nwant it to hold %q", err, w)
				}
			}
		})
	}
}

// TestCallTimeout: a call the server does not answer in time fails with
// the timeout code, naming the server, the limit and where it is set
// ("context deadline exceeded after 3s" before); the server still
// answers the next call.
func TestCallTimeout(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := config.MCPServer{Command: exe, Env: map[string]string{hugeReplyEnv: "1"}}
	m := NewManager(Options{Servers: map[string]config.MCPServer{"slow": srv}, CallTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { m.Close() })
	tools, err := m.Tools(testCtx(t), "mcp__slow__*")
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, find(t, tools, "mcp__slow__hang"), `{}`)
	if res.ErrorCode() != tool.CodeTimeout || !strings.Contains(res.Content, "MCP server slow did not answer within 200ms") ||
		!strings.Contains(res.Content, "mcp_servers.slow") {
		t.Errorf("hang = %+v, want a timeout naming the server, the limit and the setting", res)
	}
	if res := run(t, find(t, tools, "mcp__slow__small"), `{}`); res.IsError || res.Content != "called small" {
		t.Errorf("the next call = %+v", res)
	}
}

// TestHTTPServerStartNamesURLAndUnsetVariables: an HTTP server that
// refuses is named with its URL (its query left out: it may hold a
// token), and a ${VAR} of its headers that is not set is said: the
// header went as "Bearer " and the user saw "Unauthorized" alone.
func TestHTTPServerStartNamesURLAndUnsetVariables(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(ts.Close)
	var mu sync.Mutex
	var reports []string
	srv := config.MCPServer{URL: ts.URL + "/mcp?key=s3cret", Headers: map[string]string{"Authorization": "Bearer ${TRACKER_TOKEN}"}}
	m := NewManager(Options{Servers: map[string]config.MCPServer{"tracker": srv}, Getenv: func(string) string { return "" },
		Report: func(s string) {
			mu.Lock()
			reports = append(reports, s)
			mu.Unlock()
		}})
	t.Cleanup(func() { m.Close() })
	err := m.Require(testCtx(t), []string{"tracker"})
	if err == nil || !strings.Contains(err.Error(), "connect to MCP server tracker at "+ts.URL+"/mcp: ") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Require = %v, want it to name the URL without its query", err)
	}
	mu.Lock()
	got := strings.Join(reports, "\n")
	mu.Unlock()
	if !strings.Contains(got, "MCP server tracker: headers.Authorization uses ${TRACKER_TOKEN}, which is not set") {
		t.Errorf("reports = %q, want the unset variable named", got)
	}
}

// TestHTTPServerHoldingItsEventStream: a server that holds its answer to
// the GET opening its event stream (one that sends its headers with its
// first event) fails the start, saying so, within the bound: the go-sdk
// waited for it inside Connect, under a context neither the start
// timeout nor Ctrl-C ends, and the session (and `maestro run`) hung for
// good. Not parallel: it shortens sseHeaderWait.
func TestHTTPServerHoldingItsEventStream(t *testing.T) {
	defer func(d time.Duration) { sseHeaderWait = d }(sseHeaderWait)
	sseHeaderWait = 200 * time.Millisecond
	srv := mcptest.NewServer()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			select { // holds the answer
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	m := NewManager(Options{Servers: map[string]config.MCPServer{"held": {URL: ts.URL + "/mcp"}}})
	t.Cleanup(func() { m.Close() })
	// First: Close and ts.Close wait for the held start and its handler.
	t.Cleanup(func() { close(release) })
	done := make(chan error, 1)
	go func() { done <- m.Require(testCtx(t), []string{"held"}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "MCP server held did not answer the GET that opens its event stream within 200ms") {
			t.Errorf("Require = %v, want it to say the event stream was not answered", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the start still waits for the event stream 20 s on")
	}
}

// TestCloseEndsAStart: closing the manager (the session ends: Ctrl-C)
// ends a server's start in progress at once; it waited for the start's
// timeout, the server's lock held by the start.
func TestCloseEndsAStart(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := config.MCPServer{Command: "sh", Args: []string{"-c", `echo >"$STARTED"; exec sleep 60`}, Env: map[string]string{"STARTED": fifo}}
	m := NewManager(Options{Servers: map[string]config.MCPServer{"slow": srv}, StartTimeout: time.Minute})
	started := make(chan error, 1)
	go func() { started <- m.Require(context.Background(), []string{"slow"}) }()
	f, err := os.OpenFile(fifo, os.O_RDONLY, 0) // returns once the server runs
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waits for the start 20 s on")
	}
	if err := <-started; err == nil || !strings.Contains(err.Error(), "slow") {
		t.Errorf("Require = %v, want the start to have failed", err)
	}
}

// TestCloseStopsServersAtOnce: servers that do not end when their stdin
// closes are stopped together: Close stopped them one after the other,
// each after its 2 s grace, and Ctrl-C of a session with four such
// servers took over 8 s.
func TestCloseStopsServersAtOnce(t *testing.T) {
	t.Parallel()
	servers := map[string]config.MCPServer{}
	for _, slug := range []string{"a", "b", "c", "d"} {
		srv := stdioServer(t)
		// Serves, then (its stdin closed) lingers as a busy server does.
		srv.Env["SERVER"] = srv.Command
		srv.Command, srv.Args = "sh", []string{"-c", `"$SERVER"; exec sleep 30`}
		servers[slug] = srv
	}
	m := NewManager(Options{Servers: servers})
	tools, err := m.All(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, slug := range []string{"a", "b", "c", "d"} {
		find(t, tools, "mcp__"+slug+"__echo") // it started
	}
	start := time.Now()
	m.Close()
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("Close took %v; the four servers were stopped one after the other", d)
	}
}
