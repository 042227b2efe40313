package mcp

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

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
