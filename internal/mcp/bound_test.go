package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/config"
)

// serveHuge serves over streamable HTTP a server whose tool "huge"
// answers 100 KiB of text and "small" a line; json makes it answer a
// POST with application/json rather than an event stream.
func serveHuge(t *testing.T, json bool) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "huge", Version: "1"}, nil)
	for name, text := range map[string]string{"huge": strings.Repeat("y", 100<<10), "small": "called small"} {
		sdk.AddTool(srv, &sdk.Tool{Name: name}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
		})
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: json})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

type none struct{}

// TestMessageOverTheBound: a server answering with a message over the
// bound fails that call saying so, and the next call restarts the
// server, whether it speaks stdio or streamable HTTP (a JSON answer or an
// event stream). Over HTTP the bound did not apply: the go-sdk reads a
// JSON answer whole, so a server answering with an endless body took all
// of Maestro's memory, and an event was bounded only by the SDK's own
// 16 MiB whatever MaxMessageBytes said.
func TestMessageOverTheBound(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, srv := range map[string]config.MCPServer{
		"stdio":      {Command: exe, Env: map[string]string{hugeReplyEnv: "1"}},
		"http json":  {URL: serveHuge(t, true)},
		"http event": {URL: serveHuge(t, false)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := NewManager(Options{Servers: map[string]config.MCPServer{"big": srv}, MaxMessageBytes: 64 << 10})
			t.Cleanup(func() { m.Close() })
			tools, err := m.Tools(testCtx(t), "mcp__big__*")
			if err != nil {
				t.Fatal(err)
			}
			res := run(t, find(t, tools, "mcp__big__huge"), `{}`)
			if !res.IsError || !strings.Contains(res.Content, "MCP server big answered with a message over 64 KiB") ||
				!strings.Contains(res.Content, "restarted at its next use") {
				t.Errorf("huge = error %v, %d bytes %.200q, want an error saying the message was over 64 KiB", res.IsError, len(res.Content), res.Content)
			}
			if res := run(t, find(t, tools, "mcp__big__small"), `{}`); res.IsError || res.Content != "called small" {
				t.Errorf("the next call = %+v, want it answered by the restarted server", res)
			}
		})
	}
}
