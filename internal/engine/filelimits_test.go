package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/tool"
)

// A movement's Read, Write and Edit honour Config.FileLimits (the
// max_file_bytes setting), not only the tools' 10 MiB default.
func TestMovementToolsHonourFileLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "ask", func(c *Config) { c.FileLimits = tool.FileLimits{MaxFileBytes: 16} })
	if err := os.WriteFile(filepath.Join(h.ws, "big.txt"), []byte(strings.Repeat("x", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	e := h.engine()
	r := e.newRun(h.piece("ask"), &State{RunID: "run_limits"})
	m := &piece.Movement{Name: "work", Edit: true, AllowedTools: []string{"Read", "Write", "Edit"}}
	set, omitted := r.movementTools(m, &movementCtl{})
	if len(omitted) != 0 {
		t.Fatalf("omitted %v", omitted)
	}
	cases := []struct {
		tool  string
		input map[string]any
	}{
		{"Write", map[string]any{"path": "new.txt", "content": strings.Repeat("y", 32)}},
		{"Read", map[string]any{"path": "big.txt"}},
		{"Edit", map[string]any{"path": "big.txt", "old_string": "x", "new_string": "z", "replace_all": true}},
	}
	for _, tc := range cases {
		tl, ok := set.Get(tc.tool)
		if !ok {
			t.Fatalf("no %s tool", tc.tool)
		}
		in, _ := json.Marshal(tc.input)
		res, err := tl.Run(context.Background(), tool.Call{ID: "c1", Input: in})
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		if !res.IsError || !strings.Contains(res.Content, "16") {
			t.Errorf("%s over the 16-byte limit: %+v, want an error naming the limit", tc.tool, res)
		}
	}
	if _, err := os.Stat(filepath.Join(h.ws, "new.txt")); err == nil {
		t.Error("Write over the limit created the file")
	}
}
