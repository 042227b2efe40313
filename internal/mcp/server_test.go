package mcp

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRunTaskRefusesBadArguments: run_task naming a workspace that is no
// directory, or a piece the workspace does not have, is a tool error
// saying so, and no task starts. Before, a task started and failed with
// maestro run's terminal output ("exit status 2", the replay banner,
// "Run 'maestro run --help' for usage."), answered as a result that was
// not an error.
func TestRunTaskRefusesBadArguments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := NewServer(ServerOptions{
		Exe: filepath.Join(dir, "no-maestro"), // a task that starts fails otherwise
		Dir: dir,
		Pieces: func(context.Context, string) ([]PieceInfo, error) {
			return []PieceInfo{{Name: "code"}, {Name: "review"}}, nil
		},
	})
	ctx := testCtx(t)
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_task", map[string]any{"prompt": "x", "workspace": filepath.Join(dir, "missing")}, "is not an existing directory"},
		{"run_task", map[string]any{"prompt": "x", "piece": "nosuch"}, `unknown piece "nosuch"; this workspace has: code, review`},
		{"list_pieces", map[string]any{"workspace": "missing"}, `workspace "missing" is not an existing directory`},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !res.IsError || !strings.Contains(text.String(), tt.want) {
			t.Errorf("%s %v: error %v %q, want an error containing %q", tt.tool, tt.args, res.IsError, text.String(), tt.want)
		}
	}
	srv.mu.Lock()
	n := len(srv.tasks)
	srv.mu.Unlock()
	if n != 0 {
		t.Errorf("%d tasks started, want none", n)
	}
}
