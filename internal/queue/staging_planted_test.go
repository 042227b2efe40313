package queue

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// TestMoveStagedInputPlantedLinks: the agent of a task replaced its
// input/ (or a directory in it) by a link, to a directory outside the data
// directory or to another task's input/; moving the files uploaded with
// the task writes nothing there (issue 14 item 2).
func TestMoveStagedInputPlantedLinks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// plant makes the link in work (task 1's workspace) and returns
		// the directory it leads to.
		plant func(t *testing.T, data, work string) string
	}{
		{"input → outside", func(t *testing.T, data, work string) string {
			dir := t.TempDir()
			wstest.Symlink(t, dir, filepath.Join(work, "input"))
			return dir
		}},
		{"input → another task's input", func(t *testing.T, data, work string) string {
			dir := filepath.Join(WorkDir(data, 2), "input")
			mkdir(t, dir)
			rel, err := filepath.Rel(work, dir)
			if err != nil {
				t.Fatal(err)
			}
			wstest.Symlink(t, rel, filepath.Join(work, "input"))
			return dir
		}},
		{"input/docs → another task's input", func(t *testing.T, data, work string) string {
			dir := filepath.Join(WorkDir(data, 2), "input")
			mkdir(t, dir)
			mkdir(t, filepath.Join(work, "input"))
			rel, err := filepath.Rel(filepath.Join(work, "input"), dir)
			if err != nil {
				t.Fatal(err)
			}
			wstest.Symlink(t, rel, filepath.Join(work, "input", "docs"))
			return dir
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			work := WorkDir(data, 1)
			mkdir(t, work)
			target := tt.plant(t, data, work)
			writeFiles(t, staging.Dir(data, testKey), map[string]string{"a.txt": "A", "docs/b.txt": "B"})
			err := moveStagedInput(data, TaskDir(data, 1), testKey)
			if err == nil {
				t.Errorf("the move into a planted link succeeded")
			}
			if got := readTree(t, target); len(got) != 0 {
				t.Errorf("the move wrote %v into the link's target", got)
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
