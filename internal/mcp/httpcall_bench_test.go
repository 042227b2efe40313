package mcp

import (
	"encoding/json"
	"testing"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp/mcptest"
	"github.com/maestro-run/maestro/internal/tool"
)

// BenchmarkHTTPToolCall: one echo call to an in-process streamable HTTP
// server on 127.0.0.1, through the Manager's whole HTTP client
// (originTransport, headers, bounds).
func BenchmarkHTTPToolCall(b *testing.B) {
	m := NewManager(Options{Servers: map[string]config.MCPServer{
		"web": {URL: mcptest.Serve(b), Headers: map[string]string{"X-Test": "t"}},
	}})
	b.Cleanup(func() { m.Close() })
	tools, err := m.Tools(b.Context(), "mcp__web__echo")
	if err != nil || len(tools) != 1 {
		b.Fatal(tools, err)
	}
	for b.Loop() {
		if _, err := tools[0].Run(b.Context(), tool.Call{ID: "1", Input: json.RawMessage(`{"text":"hi"}`)}); err != nil {
			b.Fatal(err)
		}
	}
}
