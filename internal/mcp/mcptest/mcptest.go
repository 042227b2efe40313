// Package mcptest is a small MCP server for tests, built with the go-sdk:
// served in-process over streamable HTTP (Serve), or over stdio by a
// test binary that re-executes itself (RunStdioIfRequested).
//
// Its tools: echo {text} returns the text; add {a, b} returns the sum;
// ask {question} elicits {answer} from the client and returns what came
// back; crash exits the process (stdio only: a crashed server);
// files.read {path} returns "contents of <path>" (a name with a dot, as
// real servers give, which model APIs refuse as such).
package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/proctest"
)

// StdioEnv, set to "1" in a test binary's environment, makes
// RunStdioIfRequested serve the test server on stdin/stdout.
const StdioEnv = "MAESTRO_MCPTEST_STDIO"

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type askIn struct {
	Question string `json:"question"`
}

type none struct{}

type pathIn struct {
	Path string `json:"path"`
}

// NewServer returns the test server.
func NewServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text back.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two integers."},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
			return text(fmt.Sprint(in.A + in.B)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "ask", Description: "Ask the user a question."},
		func(ctx context.Context, req *sdk.CallToolRequest, in askIn) (*sdk.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{
				Message: in.Question,
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
					"answer": map[string]any{"type": "string"},
				}, "required": []string{"answer"}},
			})
			if err != nil {
				return nil, nil, fmt.Errorf("elicit: %w", err)
			}
			return text(fmt.Sprintf("action=%s answer=%v", res.Action, res.Content["answer"])), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "files.read", Description: "Read a file.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in pathIn) (*sdk.CallToolResult, any, error) {
			return text("contents of " + in.Path), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exit the server process."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	return s
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// Serve serves the test server over streamable HTTP on 127.0.0.1 until
// the test ends and returns its URL.
func Serve(t testing.TB) string {
	t.Helper()
	srv := NewServer()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(h) // on 127.0.0.1
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// RunStdioIfRequested serves the test server on stdin/stdout and exits
// when StdioEnv is "1" (call it first in TestMain).
func RunStdioIfRequested() {
	if os.Getenv(StdioEnv) != "1" {
		return
	}
	if err := NewServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ServersEnv names a directory that overrides where Installed looks for
// the servers scripts/install-mcp-servers.sh installs.
const ServersEnv = "MAESTRO_MCP_SERVERS"

// Installed returns the entry point of the npm MCP server name
// (server-everything, server-filesystem) that
// scripts/install-mcp-servers.sh installed into .cache/mcp-servers at the
// top of the module (or $MAESTRO_MCP_SERVERS), to run with node. When it
// or node is missing it calls proctest.SkipOrFail.
func Installed(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv(ServersEnv)
	if dir == "" {
		_, file, _, ok := goruntime.Caller(0)
		if !ok {
			tb.Fatal("mcptest: cannot locate the module")
		}
		dir = filepath.Join(filepath.Dir(file), "..", "..", "..", ".cache", "mcp-servers")
	}
	bin := filepath.Join(dir, "bin", name)
	if _, err := exec.LookPath("node"); err != nil {
		proctest.SkipOrFail(tb, "node NOT FOUND: the npm MCP server %s cannot run (integration tier skipped)", name)
		return ""
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		proctest.SkipOrFail(tb, "MCP SERVER %q NOT INSTALLED at %s: run scripts/install-mcp-servers.sh (integration tier skipped)", name, bin)
		return ""
	}
	return bin
}

// TrackerPiece is a piece (tickets) whose required_mcp names the server
// tracker, which tests do not configure.
const TrackerPiece = `name: tickets
description: |
  File tickets.
  Choose when: tickets. Do not choose when: anything else. Preconditions: none.
max_movements: 2
initial_movement: file
required_mcp: [tracker]
movements:
  - name: file
    edit: false
    persona: You file tickets.
    instruction: File it.
    allowed_tools: [mcp__tracker__*]
    rules: []
`

// LookupPiece is the start of a piece (lookup) that requires the server
// web; a test appends its one movement's allowed_tools and rules.
const LookupPiece = `name: lookup
description: |
  Look something up on the web server.
  Choose when: lookups. Do not choose when: anything else. Preconditions: none.
max_movements: 2
initial_movement: look
required_mcp: [web]
movements:
  - name: look
    edit: false
    persona: You look things up.
    instruction: Call the echo tool, then complete with what it said.
`
