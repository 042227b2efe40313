package taskdir

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// tree returns every entry under dir as slash path → content ("<dir>" for
// a directory, "-> target" for a link).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got[filepath.ToSlash(rel)] = "-> " + target
		case d.IsDir():
			got[filepath.ToSlash(rel)] = "<dir>"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPrepareMigratesTheOldLayout: a task directory that was the
// workspace itself (input/, output/, subtasks/ and the run's logs/ in it),
// whole or left half migrated by a crash, ends as work/ (the agent's
// files) and state/logs/ (the run's state); Prepare again changes nothing.
func TestPrepareMigratesTheOldLayout(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"work": "<dir>", "work/input": "<dir>", "work/input/a.txt": "A",
		"work/output": "<dir>", "work/output/b.txt": "B",
		"work/subtasks": "<dir>", "work/subtasks/01-x.md": "X",
		"state": "<dir>", "state/logs": "<dir>", "state/logs/run-state.json": "{}",
	}
	tests := []struct {
		name   string
		before map[string]string
	}{
		{"old layout", map[string]string{"input/a.txt": "A", "output/b.txt": "B", "subtasks/01-x.md": "X", "logs/run-state.json": "{}"}},
		{"crashed while moving", map[string]string{".work-migrating/input/a.txt": "A", "output/b.txt": "B", "subtasks/01-x.md": "X", "logs/run-state.json": "{}"}},
		{"crashed after moving logs", map[string]string{".work-migrating/input/a.txt": "A", ".work-migrating/output/b.txt": "B", ".work-migrating/subtasks/01-x.md": "X", "state/logs/run-state.json": "{}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			wstest.WriteFiles(t, dir, tt.before)
			for range 2 {
				work, state, err := Prepare(dir)
				if err != nil {
					t.Fatal(err)
				}
				if work != filepath.Join(dir, "work") || state != filepath.Join(dir, "state") {
					t.Fatalf("Prepare = %s, %s", work, state)
				}
				if got := tree(t, dir); !maps.Equal(got, want) {
					t.Fatalf("task directory = %v\nwant %v", got, want)
				}
			}
		})
	}
}

// TestPrepareNeverTakesAgentFilesForState: a logs/ link planted in the old
// layout stays with the agent's files (not followed, not moved into
// state/), and a logs/ the agent makes in work/ later is never migrated.
func TestPrepareNeverTakesAgentFilesForState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := t.TempDir()
	wstest.WriteFiles(t, outside, map[string]string{"run-state.json": "forged"})
	wstest.WriteFiles(t, dir, map[string]string{"input/a.txt": "A"})
	if err := os.Symlink(outside, filepath.Join(dir, "logs")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prepare(dir); err != nil {
		t.Fatal(err)
	}
	wstest.WriteFiles(t, dir, map[string]string{"work/logs2/run-state.json": "forged"})
	if _, _, err := Prepare(dir); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"work": "<dir>", "work/input": "<dir>", "work/input/a.txt": "A", "work/logs": "-> " + outside,
		"work/logs2": "<dir>", "work/logs2/run-state.json": "forged", "state": "<dir>",
	}
	if got := tree(t, dir); !maps.Equal(got, want) {
		t.Fatalf("task directory = %v\nwant %v", got, want)
	}
	if got := tree(t, outside); !maps.Equal(got, map[string]string{"run-state.json": "forged"}) {
		t.Fatalf("the link's target changed: %v", got)
	}
}

// TestOpenWork: without create, a task directory that does not exist (or
// has no work/ yet) is fs.ErrNotExist; with create, work/ is made; a
// work/ replaced by a link is refused.
func TestOpenWork(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tasks", "1")
	if _, err := OpenWork(dir, false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenWork of a missing task directory: %v", err)
	}
	w, err := OpenWork(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if fi, err := os.Stat(filepath.Join(dir, "work")); err != nil || !fi.IsDir() {
		t.Fatalf("work/: %v", err)
	}
	other := t.TempDir()
	if err := os.Remove(filepath.Join(dir, "work")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(dir, "work")); err != nil {
		t.Fatal(err)
	}
	for _, create := range []bool{false, true} {
		if w, err := OpenWork(dir, create); err == nil {
			w.Close()
			t.Errorf("OpenWork(create %v) through a work/ link succeeded", create)
		}
	}
}

// TestTaskDirOwnerOnly: a task directory is its owner's only, so a data
// directory others can list (`--data-dir /srv/maestro` made with the
// usual umask) does not show them the task's uploads, deliverables or
// state. Task directories were created 0755, and every local user could
// read what a client uploaded (reproduced with maestro serve: input/ and
// its files readable by all); an existing one is restricted when the task
// is prepared or written to.
func TestTaskDirOwnerOnly(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(data, "tasks", "2")
	if err := os.MkdirAll(filepath.Join(old, Work), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o755); err != nil {
		t.Fatal(err)
	}
	mode := func(p string) fs.FileMode {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	fresh := filepath.Join(data, "tasks", "1")
	if _, _, err := Prepare(fresh); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWork(old, true)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	third := filepath.Join(data, "jobs", "3")
	if w, err = OpenWork(third, true); err != nil {
		t.Fatal(err)
	}
	w.Close()
	for _, p := range []string{fresh, old, third, filepath.Join(data, "jobs")} {
		if got := mode(p); got != Perm {
			t.Errorf("%s: mode %v, want %v", p, got, Perm)
		}
	}
}
