package mcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp/mcptest"
)

// TestHTTPServerLosesTheSession: a streamable HTTP server that no longer
// knows Maestro's session (it restarted, or ended the session) answers
// 404, and Maestro starts a new session and sends the call again, as the
// MCP specification says; every time, not as the one restart a crashed
// server gets. The call failed ("session not found"), then every call
// ("stopped during the call"), then "stopped again after a restart".
func TestHTTPServerLosesTheSession(t *testing.T) {
	t.Parallel()
	var h atomic.Pointer[http.Handler]
	restart := func() {
		srv := mcptest.NewServer()
		var x http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
		h.Store(&x)
	}
	restart()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	m := NewManager(Options{Servers: map[string]config.MCPServer{"web": {URL: ts.URL + "/mcp"}}})
	t.Cleanup(func() { m.Close() })
	echo, err := m.Tools(testCtx(t), "mcp__web__echo")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if i > 0 {
			restart()
		}
		if res := run(t, echo[0], `{"text":"x"}`); res.IsError || res.Content != "echo: x" {
			t.Fatalf("call %d (after %d restarts of the server) = %+v", i+1, i, res)
		}
	}
}

// TestServerLogMessages: the log messages a server sends while it works
// (notifications/message) are kept in its log, beside its stderr: they
// were dropped.
func TestServerLogMessages(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[info indexer] indexed 3 files\n", `[error] {"error":"unreadable","file":"b.go"}` + "\n"}
	log := &waitingLog{want: want, done: make(chan struct{})}
	m := NewManager(Options{Servers: map[string]config.MCPServer{"busy": {Command: exe, Env: map[string]string{hugeReplyEnv: "1"}}},
		Stderr: func(string) io.Writer { return log }})
	t.Cleanup(func() { m.Close() })
	ctx := testCtx(t)
	tools, err := m.Tools(ctx, "mcp__busy__logs")
	if err != nil || len(tools) != 1 {
		t.Fatalf("Tools = %v, %v", tools, err)
	}
	if res := run(t, tools[0], `{}`); res.IsError || res.Content != "called logs" {
		t.Fatalf("logs = %+v", res)
	}
	// The messages are handled beside the call's answer, not before it.
	wait := time.NewTimer(10 * time.Second)
	defer wait.Stop()
	select {
	case <-log.done:
	case <-wait.C:
		log.mu.Lock()
		defer log.mu.Unlock()
		t.Fatalf("the server's log does not hold %q:\n%s", want, log.b.String())
	}
}

// waitingLog is a server's log that closes done once it holds every
// string of want.
type waitingLog struct {
	mu   sync.Mutex
	b    strings.Builder
	want []string
	done chan struct{}
}

func (l *waitingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if l.want != nil && !slices.ContainsFunc(l.want, func(w string) bool { return !strings.Contains(l.b.String(), w) }) {
		l.want = nil
		close(l.done)
	}
	return len(p), nil
}

// TestHTTPURLNotAnEndpoint: a URL that is no streamable HTTP endpoint
// (an older HTTP+SSE server's /sse, a wrong path, another service's
// API such as maestro serve's /api/v1/tasks answering 400) is reported
// with what to check: it said "Not Found", "Method Not Allowed" or "Bad
// Request" alone. A 401 or 403 (the credentials) and an MCP server's
// JSON-RPC error (it said why) get no such hint.
func TestHTTPURLNotAnEndpoint(t *testing.T) {
	t.Parallel()
	const rpcError = `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unsupported protocol version"}}`
	for _, tc := range []struct {
		status int
		body   string
		hint   bool
	}{
		{http.StatusNotFound, "Not Found", true},
		{http.StatusMethodNotAllowed, "Method Not Allowed", true},
		{http.StatusBadRequest, `{"error":"invalid task: unknown field \"jsonrpc\""}`, true},
		{http.StatusUnprocessableEntity, "Unprocessable Entity", true},
		{http.StatusUnauthorized, "Unauthorized", false},
		{http.StatusForbidden, "Forbidden", false},
		{http.StatusBadRequest, rpcError, false},
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet { // an HTTP+SSE server's stream
				w.Header().Set("Content-Type", "text/event-stream")
				return
			}
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		t.Cleanup(ts.Close)
		m := NewManager(Options{Servers: map[string]config.MCPServer{"old": {URL: ts.URL + "/sse"}}})
		t.Cleanup(func() { m.Close() })
		err := m.Require(testCtx(t), []string{"old"})
		hint := fmt.Sprintf("(HTTP %d to its POST: is the URL the server's streamable HTTP endpoint, often …/mcp? "+
			"Maestro speaks streamable HTTP, not the older HTTP+SSE transport, whose URL often ends in /sse)", tc.status)
		if err == nil || strings.Contains(err.Error(), hint) != tc.hint {
			t.Errorf("HTTP %d %s: Require = %v\nwant the hint: %v", tc.status, tc.body, err, tc.hint)
		}
	}
}

// TestToolNameOfTwoServers: two servers' tools of one name (slugs a and
// a_, tools _echo and echo: mcp__a___echo both) give the model one tool,
// and the one left out is said once as a status line: it went missing
// with a log line alone.
func TestToolNameOfTwoServers(t *testing.T) {
	t.Parallel()
	serve := func(tool string) string {
		srv := sdk.NewServer(&sdk.Implementation{Name: tool, Version: "1"}, nil)
		sdk.AddTool(srv, &sdk.Tool{Name: tool}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: tool}}}, nil, nil
		})
		ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	var mu sync.Mutex
	var reports []string
	m := NewManager(Options{Servers: map[string]config.MCPServer{"a": {URL: serve("_echo")}, "a_": {URL: serve("echo")}},
		Report: func(s string) { mu.Lock(); reports = append(reports, s); mu.Unlock() }})
	t.Cleanup(func() { m.Close() })
	for range 2 {
		tools, err := m.All(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := names(tools); !slices.Equal(got, []string{"mcp__a___echo"}) {
			t.Fatalf("tools = %v, want [mcp__a___echo]", got)
		}
		if res := run(t, tools[0], `{}`); res.Content != "_echo" {
			t.Errorf("mcp__a___echo called %q, want server a's _echo", res.Content)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := `MCP server a_: tool "echo" is left out: its name mcp__a___echo is that of a tool of MCP server a (rename one of the two servers in config.yaml)`
	if n := slices.Index(reports, want); n < 0 || slices.Index(reports[n+1:], want) >= 0 {
		t.Errorf("reports = %q\nwant %q once", reports, want)
	}
}
