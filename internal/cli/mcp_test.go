package cli

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maestro mcp's pieces name the piece files the catalog ignored, with
// the reason, so that list_pieces and run_task can say why a piece of
// the workspace is not there (an invalid file was left out silently,
// and run_task said "unknown piece").
func TestMCPPiecesNameTheIgnoredFiles(t *testing.T) {
	t.Parallel()
	home, ws := t.TempDir(), t.TempDir()
	dir := filepath.Join(ws, ".maestro", "pieces")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "deploy.yaml")
	if err := os.WriteFile(file, []byte("name: deploy\ndescription: d\ncolour: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ios := &IOStreams{Getenv: func(k string) string {
		if k == "MAESTRO_HOME" {
			return home
		}
		return ""
	}}
	o := mcpServerOptions(ios, "maestro", slog.New(slog.NewTextHandler(io.Discard, nil)))
	pieces, err := o.Pieces(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range pieces {
		if p.Ignored == "" {
			continue
		}
		found = true
		if p.Name != "deploy" || p.Source != file || !strings.Contains(p.Ignored, "deploy.yaml:3:1: colour: unknown field") {
			t.Errorf("ignored piece %+v, want deploy from %s, its error", p, file)
		}
	}
	if !found {
		t.Errorf("pieces %+v name no ignored file", pieces)
	}
}
