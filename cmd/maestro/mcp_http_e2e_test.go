package main

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/proctest"
)

// bearer adds a token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// `maestro mcp` over streamable HTTP at serve's /mcp, behind serve's
// token, driven by the go-sdk client: the same tools as over stdio; it
// lists the pieces, runs the bundled replay piece demo in a fresh
// workspace and reads its result; without the token the endpoint
// answers 401 (issue 20).
func TestMaestroMCPOverServeHTTP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	url, stderr, stop := startServe(ctx, t, proctest.NoModelEnv(home), "--workers", "1", "--data-dir", home, "--token", "s3cret")
	defer stop()

	resp, err := http.Post(url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /mcp without the token: %d, want 401", resp.StatusCode)
	}

	hc := &http.Client{Transport: bearer{token: "s3cret", base: http.DefaultTransport}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v\n%s", url, err, stderr.String())
	}
	defer cs.Close()
	checkMaestroTools(t, ctx, cs)
	var pieces struct{ Pieces []mcp.PieceInfo }
	callJSON(t, ctx, cs, &sdk.CallToolParams{Name: "list_pieces", Arguments: map[string]any{}}, &pieces)
	if !slices.ContainsFunc(pieces.Pieces, func(p mcp.PieceInfo) bool { return p.Name == "general" }) {
		t.Errorf("list_pieces = %v, want the general piece", pieces.Pieces)
	}
	var info mcp.TaskInfo
	callJSON(t, ctx, cs, &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "say hello", "piece": "general"}}, &info)
	if info.Status != mcp.TaskSucceeded || !strings.Contains(info.Result, "replay demo") {
		t.Fatalf("run_task = %+v, want the demo's result\nstderr:\n%s", info, stderr.String())
	}
	// A task that names no workspace gets a fresh one under the data
	// directory, as a session of the HTTP attach API does.
	made, _ := filepath.Glob(filepath.Join(home, "workspaces", "*", "output", "hello-maestro", "greet.txt"))
	if len(made) != 1 {
		t.Errorf("the demo's file is not in one fresh workspace under %s: %v", filepath.Join(home, "workspaces"), made)
	}
	var result mcp.TaskInfo
	callJSON(t, ctx, cs, &sdk.CallToolParams{Name: "task_result", Arguments: map[string]any{"task_id": info.TaskID}}, &result)
	if result.Status != mcp.TaskSucceeded || result.Result != info.Result {
		t.Errorf("task_result = %+v, want %+v", result, info)
	}
	// A workspace the server does not allow is refused (serve on
	// loopback allows any existing directory; a missing one is not).
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "x", "workspace": filepath.Join(home, "missing")}})
	if err != nil || !res.IsError {
		t.Errorf("run_task in a missing workspace = %v, %v; want an error result", res, err)
	}
}
