package queue

import (
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const testKey = "0123456789abcdef0123456789abcdef"

// writeFiles writes name → content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	wstest.WriteFiles(t, dir, files)
}

// readTree returns every regular file under dir as slash path → content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return got
}

// TestMoveStagedInputIdempotent: whatever an earlier attempt left (nothing
// moved, half moved, all moved but the directory not removed, all done),
// the move ends with every file in input/ and nothing in uploads/.
func TestMoveStagedInputIdempotent(t *testing.T) {
	t.Parallel()
	all := map[string]string{"a.txt": "A", "docs/b.txt": "B", "docs/deep/c.txt": "C", "d.txt": "D"}
	tests := []struct {
		name    string
		staged  map[string]string // still in uploads/<key>/
		moved   map[string]string // already in input/
		dirLeft bool              // the staging directory exists (possibly empty)
		jobFile bool              // uploads/<key>.job exists
	}{
		{name: "nothing moved yet", staged: all, dirLeft: true, jobFile: true},
		{name: "half moved, the attempt died", staged: map[string]string{"docs/b.txt": "B", "docs/deep/c.txt": "C"}, moved: map[string]string{"a.txt": "A", "d.txt": "D"}, dirLeft: true, jobFile: true},
		{name: "all moved, directory not removed", staged: nil, moved: all, dirLeft: true, jobFile: true},
		{name: "directory removed, job file left", moved: all, jobFile: true},
		{name: "all done", moved: all},
		{name: "no job file ever written", staged: all, dirLeft: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			dir := TaskDir(data, 7)
			staging := staging.Dir(data, testKey)
			if tt.dirLeft {
				if err := os.MkdirAll(filepath.Join(staging, "docs", "deep"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			writeFiles(t, staging, tt.staged)
			writeFiles(t, filepath.Join(WorkDir(data, 7), "input"), tt.moved)
			if tt.jobFile {
				writeFiles(t, filepath.Join(data, "uploads"), map[string]string{testKey + ".job": "3\n"})
			}
			// Twice: a second attempt after a complete move changes nothing.
			for i := range 2 {
				if err := moveStagedInput(data, dir, testKey); err != nil {
					t.Fatalf("move %d: %v", i+1, err)
				}
			}
			if got := readTree(t, filepath.Join(WorkDir(data, 7), "input")); !maps.Equal(got, all) {
				t.Errorf("input/ = %v, want %v", got, all)
			}
			if ents, err := os.ReadDir(filepath.Join(data, "uploads")); err == nil && len(ents) != 0 {
				t.Errorf("uploads/ still holds %v", ents)
			}
		})
	}
}

// TestMoveStagedInputConcurrentMovers: a runner and the sweep (or two
// attempts of a reclaimed job) moving one directory at once both succeed,
// and every file arrives once.
func TestMoveStagedInputConcurrentMovers(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	dir := TaskDir(data, 1)
	want := map[string]string{}
	for i := range 200 {
		want["d"+strconv.Itoa(i%7)+"/f"+strconv.Itoa(i)+".txt"] = strconv.Itoa(i)
	}
	writeFiles(t, staging.Dir(data, testKey), want)
	writeFiles(t, filepath.Join(data, "uploads"), map[string]string{testKey + ".job": "1\n"})
	const movers = 6
	errs := make([]error, movers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range movers {
		wg.Go(func() {
			<-start
			errs[i] = moveStagedInput(data, dir, testKey)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("mover %d: %v", i, err)
		}
	}
	if got := readTree(t, filepath.Join(WorkDir(data, 1), "input")); !maps.Equal(got, want) {
		t.Errorf("input/ holds %d files, want %d", len(got), len(want))
	}
	if ents, _ := os.ReadDir(filepath.Join(data, "uploads")); len(ents) != 0 {
		t.Errorf("uploads/ still holds %v", ents)
	}
}

// TestMoveStagedInputRefuses: a malformed key and a workspace outside the
// data directory are errors that say what was expected.
func TestMoveStagedInputRefuses(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	tests := []struct{ name, dir, key, want string }{
		{"malformed key", TaskDir(data, 1), "../../etc", `"input_staging": expected 32 lowercase hex digits`},
		{"workspace outside", t.TempDir(), testKey, "is not inside the data directory"},
	}
	for _, tt := range tests {
		err := moveStagedInput(data, tt.dir, tt.key)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}
