package walk

import (
	"cmp"
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// TestBest: whatever the order of the offers, Best keeps the best max
// values, Admits agrees with Offer, and Sorted (a copy) and Sort (in
// place) list them best first.
func TestBest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		max    int
		offers []int
		want   []int
	}{
		{"fewer than max", 5, []int{3, 1, 2}, []int{1, 2, 3}},
		{"more than max", 3, []int{9, 4, 7, 1, 8, 2}, []int{1, 2, 4}},
		{"descending", 2, []int{5, 4, 3, 2, 1}, []int{1, 2}},
		{"ties", 2, []int{1, 1, 1}, []int{1, 1}},
		{"none", 3, nil, []int{}},
	}
	for _, tc := range tests {
		b := NewBest(tc.max, cmp.Compare[int])
		for _, v := range tc.offers {
			admits := b.Admits(v)
			if kept := b.Offer(v); kept != admits {
				t.Errorf("%s: Offer(%d) = %v, Admits said %v", tc.name, v, kept, admits)
			}
		}
		got := b.Sorted()
		if got == nil {
			got = []int{}
		}
		if diff := gocmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: Sorted (-want +got):\n%s", tc.name, diff)
		}
		if b.Len() != len(tc.want) || b.Full() != (len(tc.want) == tc.max) {
			t.Errorf("%s: Len %d Full %v", tc.name, b.Len(), b.Full())
		}
		if b.Len() > 0 && b.Worst() != tc.want[len(tc.want)-1] {
			t.Errorf("%s: Worst = %d, want %d", tc.name, b.Worst(), tc.want[len(tc.want)-1])
		}
		sorted := b.Sort() // in place, last
		if sorted == nil {
			sorted = []int{}
		}
		if diff := gocmp.Diff(tc.want, sorted); diff != "" {
			t.Errorf("%s: Sort (-want +got):\n%s", tc.name, diff)
		}
	}
}

// collector queues every directory and file it is shown and records the
// files it visits.
type collector struct {
	mu    *sync.Mutex
	files *[]string
}

func (c collector) List(d *Dir, entries []fs.DirEntry, rules *gitignore.Stack, err error) []Task {
	if d == nil {
		return nil
	}
	var tasks []Task
	for _, e := range entries {
		p := path.Join(d.Rel(), e.Name())
		if !e.Type().IsDir() && !e.Type().IsRegular() || rules.Match(p, e.IsDir()) {
			continue
		}
		tasks = append(tasks, Task{Name: e.Name(), IsDir: e.IsDir(), Rules: rules})
	}
	return tasks
}

func (c collector) File(t Task) {
	c.mu.Lock()
	*c.files = append(*c.files, path.Join(t.Dir.Rel(), t.Name))
	c.mu.Unlock()
}

func (c collector) Done() {}

func tree(t *testing.T, files map[string]string) *workspace.Root {
	t.Helper()
	dir := t.TempDir()
	wstest.WriteFiles(t, dir, files)
	if err := os.Symlink(dir, filepath.Join(dir, "a", "loop")); err != nil {
		t.Fatal(err)
	}
	root, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// TestWalk: every file below base is visited once, .gitignore files of
// base, its ancestors and its subdirectories apply, and a symbolic link to
// a directory is not followed.
func TestWalk(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{
		".gitignore":        "*.log\n",
		"a/x.go":            "",
		"a/x.log":           "",
		"a/b/.gitignore":    "skip/\n",
		"a/b/y.go":          "",
		"a/b/skip/z.go":     "",
		"a/b/c/d/e/deep.go": "",
		"top.go":            "",
	})
	for _, tc := range []struct {
		base string
		want []string
	}{
		{".", []string{".gitignore", "a/b/.gitignore", "a/b/c/d/e/deep.go", "a/b/y.go", "a/x.go", "top.go"}},
		{"a/b", []string{"a/b/.gitignore", "a/b/c/d/e/deep.go", "a/b/y.go"}},
	} {
		var mu sync.Mutex
		var files []string
		err := Walk(t.Context(), root, tc.base, func() Worker { return collector{&mu, &files} })
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(files)
		if diff := gocmp.Diff(tc.want, files); diff != "" {
			t.Errorf("base %s: files (-want +got):\n%s", tc.base, diff)
		}
	}
}

// TestWalkCancelled: a cancelled walk returns the context's error, and a
// missing base its open error.
func TestWalkCancelled(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{"a/x.go": "", "a/b/y.go": ""})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var mu sync.Mutex
	var files []string
	if err := Walk(ctx, root, ".", func() Worker { return collector{&mu, &files} }); err != context.Canceled {
		t.Errorf("cancelled walk = %v, want context.Canceled", err)
	}
	if err := Walk(t.Context(), root, "missing", func() Worker { return collector{&mu, &files} }); err == nil {
		t.Error("walk of a missing base succeeded")
	}
}
