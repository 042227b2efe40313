package searchbench

import (
	"errors"
	"flag"
	"io"
	"path/filepath"
	"testing"

	"github.com/maestro-run/maestro/internal/workspace"
)

// TestRun: the search runs over the -root directory and its status is the
// exit status; a root that cannot be opened is status 2 without a search.
func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		name       string
		args       []string
		status     int
		err        error
		wantStatus int
		wantSearch bool
	}{
		{"searched", []string{"-root", dir}, 0, nil, 0, true},
		{"search status", []string{"-root", dir}, 1, nil, 1, true},
		{"search error", []string{"-root", dir}, 2, errors.New("bad pattern"), 2, true},
		{"missing root", []string{"-root", filepath.Join(dir, "missing")}, 0, nil, 2, false},
		{"unknown flag", []string{"-nosuch"}, 0, nil, 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("searchbench", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			searched := false
			got := run(fs, tt.args, func(ws *workspace.Root) (int, error) {
				searched = true
				if ws.Dir() != dir {
					t.Errorf("searched %s, want %s", ws.Dir(), dir)
				}
				return tt.status, tt.err
			})
			if got != tt.wantStatus || searched != tt.wantSearch {
				t.Errorf("run(%q) = %d, searched %v; want %d, searched %v", tt.args, got, searched, tt.wantStatus, tt.wantSearch)
			}
		})
	}
}
