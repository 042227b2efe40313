package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// listing is what an index (or a fresh walk) holds: "f path" for regular
// files, "l path" for links, "d path" for directories.
func indexListing(t testing.TB, x *Index) []string {
	t.Helper()
	var out []string
	ok, err := x.Read(t.Context(), ".", func(top *Dir) {
		var rec func(d *Dir)
		rec = func(d *Dir) {
			if d.rel != "." {
				out = append(out, "d "+d.rel)
			}
			for n := range d.Files() {
				out = append(out, "f "+path.Join(d.rel, n))
			}
			for n := range d.Links() {
				out = append(out, "l "+path.Join(d.rel, n))
			}
			checkMasks(t, d)
			for _, c := range d.Dirs() {
				if c.parent != d || c.gone {
					t.Errorf("%s: child %s has a wrong parent or was dropped", d.rel, c.rel)
				}
				rec(c)
			}
		}
		rec(top)
	})
	if err != nil || !ok {
		t.Fatalf("Read: ok=%v err=%v", ok, err)
	}
	slices.Sort(out)
	return out
}

// checkMasks checks that the character masks of d are those of its names,
// or unknown (all bits set, no file masks).
func checkMasks(t testing.TB, d *Dir) {
	t.Helper()
	if d.masks == nil && d.chars == ^uint64(0) && d.first == ^uint64(0) {
		return // not known yet
	}
	chars, first, masks := d.charMasks()
	if d.chars != chars || d.first != first || !slices.Equal(d.masks, masks) {
		t.Errorf("%s: masks %x %x %x, want those of its names %x %x %x", d.rel, d.chars, d.first, d.masks, chars, first, masks)
	}
}

// TestIndexCharMasks: the character masks of the names, left out of a full
// listing, are known from the Read after the watches are added, and kept
// right as files come and go; they hold what a search needs of them.
func TestIndexCharMasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{"a/Main.go", "a/b/z_9.TXT", "c/x"} {
		write(t, dir, p, "")
	}
	x := New(openRoot(t, dir))
	t.Cleanup(func() { x.Close() })
	known := func() (n int) {
		if _, err := x.Read(t.Context(), ".", func(top *Dir) {
			var rec func(d *Dir)
			rec = func(d *Dir) {
				if d.masks != nil {
					n++
				}
				checkMasks(t, d)
				for _, c := range d.dirs {
					rec(c)
				}
			}
			rec(top)
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := known(); n != 0 {
		t.Errorf("masks of %d directories known on the first Read, want none (left to watchTree)", n)
	}
	if n := known(); n != 3 {
		t.Errorf("masks of %d directories with files known after the watches, want 3", n)
	}
	write(t, dir, "c/Q-1.md", "")
	long := strings.Repeat("L", 63)
	write(t, dir, "c/"+long, "")
	if err := os.Remove(filepath.Join(dir, "a", "Main.go")); err != nil {
		t.Fatal(err)
	}
	known() // checked against the names
	x.Read(t.Context(), "a/b", func(d *Dir) {
		if got, want := d.FileMasks(), []uint32{FoldMask(CharMask("z_9.txt")) | 7<<26}; !slices.Equal(got, want) {
			t.Errorf("a/b masks %x, want %x", got, want)
		}
		if d.NameChars() != CharMask("z_9.txt") || d.FirstChars() != CharMask("z") {
			t.Errorf("a/b NameChars %x FirstChars %x", d.NameChars(), d.FirstChars())
		}
	})
	x.Read(t.Context(), "c", func(d *Dir) {
		lens := map[string]int{}
		i := 0
		for name := range d.Files() {
			lens[name] = MaskLen(d.FileMasks()[i])
			i++
		}
		if want := map[string]int{"x": 1, "Q-1.md": 6, long: -1}; !maps.Equal(lens, want) {
			t.Errorf("c: MaskLen %v, want %v", lens, want)
		}
	})
}

// walkListing lists the tree afresh with gitignore.Walk (Glob's walk).
func walkListing(t testing.TB, root *workspace.Root) []string {
	t.Helper()
	var out []string
	err := gitignore.Walk(context.Background(), root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil
		}
		switch typ := d.Type(); {
		case typ.IsDir():
			out = append(out, "d "+p)
		case typ.IsRegular():
			out = append(out, "f "+p)
		case typ&fs.ModeSymlink != 0:
			out = append(out, "l "+p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// write creates one file below dir.
func write(t testing.TB, dir, rel, content string) {
	t.Helper()
	wstest.WriteFiles(t, dir, map[string]string{rel: content})
}

func openRoot(t testing.TB, dir string) *workspace.Root {
	t.Helper()
	root, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// seedTree makes a small tree with ignore rules, hidden entries, a link
// and a FIFO.
func seedTree(t testing.TB) string {
	dir := t.TempDir()
	wstest.WriteFiles(t, dir, map[string]string{
		".gitignore":        "*.log\nbuild/\n",
		"a.go":              "",
		"x.log":             "",
		".hidden/h.txt":     "",
		"build/out.bin":     "",
		"src/.gitignore":    "gen/\n!keep.log\n",
		"src/keep.log":      "",
		"src/gen/g.go":      "",
		"src/pkg/deep/d.go": "",
		".git/HEAD":         "ref: refs/heads/main\n",
	})
	wstest.Symlink(t, "a.go", filepath.Join(dir, "link.go"))
	wstest.MakeFIFO(t, filepath.Join(dir, "fifo"))
	return dir
}

func TestIndexMatchesWalk(t *testing.T) {
	dir := seedTree(t)
	root := openRoot(t, dir)
	x := Of(root)
	if Of(root) != x {
		t.Fatal("Of returned a second index for one root")
	}
	got, want := indexListing(t, x), walkListing(t, root)
	if !slices.Equal(got, want) {
		t.Fatalf("index:\n%q\nwalk:\n%q", got, want)
	}
	for _, must := range []string{"f a.go", "l link.go", "f .hidden/h.txt", "f src/keep.log", "f src/pkg/deep/d.go"} {
		if !slices.Contains(got, must) {
			t.Errorf("index lacks %q", must)
		}
	}
	for _, mustNot := range []string{"f x.log", "d build", "d src/gen", "d .git", "f fifo"} {
		if slices.Contains(got, mustNot) {
			t.Errorf("index holds %q", mustNot)
		}
	}
	// Sub-directory reads and misses.
	for _, tc := range []struct {
		base string
		ok   bool
	}{{"src/pkg", true}, {"src/gen", false}, {"missing", false}, {"a.go", false}, {"./src/../src", true}} {
		ok, err := x.Read(t.Context(), tc.base, func(d *Dir) {
			if d.Rel() != path.Clean(tc.base) {
				t.Errorf("Read(%q) gave %q", tc.base, d.Rel())
			}
		})
		if err != nil || ok != tc.ok {
			t.Errorf("Read(%q): ok=%v err=%v, want ok=%v", tc.base, ok, err, tc.ok)
		}
	}
}

// TestIndexFollowsChanges: each change is seen by the very next Read, with
// no wait (the notifications are drained when the index is read).
func TestIndexFollowsChanges(t *testing.T) {
	dir := seedTree(t)
	root := openRoot(t, dir)
	x := Of(root)
	indexListing(t, x)
	p := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	steps := []struct {
		name string
		do   func() error
	}{
		{"create a file", func() error { return os.WriteFile(p("new.txt"), nil, 0o644) }},
		{"create a tree at once", func() error {
			if err := os.MkdirAll(p("t1/t2/t3"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p("t1/t2/t3/f.go"), nil, 0o644)
		}},
		{"remove a file", func() error { return os.Remove(p("a.go")) }},
		{"rename a directory", func() error { return os.Rename(p("src/pkg"), p("src/lib")) }},
		{"change a file in the renamed directory", func() error { return os.WriteFile(p("src/lib/deep/e.go"), nil, 0o644) }},
		{"ignore more", func() error { return os.WriteFile(p("src/.gitignore"), []byte("gen/\nlib/\n"), 0o644) }},
		{"unignore", func() error { return os.Remove(p("src/.gitignore")) }},
		{"new .gitignore in a subdirectory", func() error { return os.WriteFile(p("t1/.gitignore"), []byte("t2\n"), 0o644) }},
		{"top .gitignore rewritten", func() error { return os.WriteFile(p(".gitignore"), []byte("*.go\n"), 0o644) }},
		{"remove a tree", func() error { return os.RemoveAll(p("src")) }},
		{"a directory becomes a file", func() error {
			if err := os.RemoveAll(p(".hidden")); err != nil {
				return err
			}
			return os.WriteFile(p(".hidden"), nil, 0o644)
		}},
		{"move a directory in from outside", func() error {
			out := t.TempDir()
			write(t, out, "m/n.txt", "")
			return os.Rename(filepath.Join(out, "m"), p("moved"))
		}},
		{"move a directory out", func() error { return os.Rename(p("moved"), filepath.Join(t.TempDir(), "gone")) }},
		{"recreate a removed directory", func() error {
			if err := os.RemoveAll(p("t1")); err != nil {
				return err
			}
			return os.MkdirAll(p("t1/again"), 0o755)
		}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, want := indexListing(t, x), walkListing(t, root)
		if !slices.Equal(got, want) {
			t.Fatalf("after %q:\nindex %q\nwalk  %q", st.name, got, want)
		}
	}
	// Only the rewrite of the top .gitignore lists the whole tree again.
	if x.scans != 2 {
		t.Errorf("the tree was listed %d times, want 2 (the first Read, the top .gitignore)", x.scans)
	}
}

// TestIndexConcurrentWrites creates, renames and deletes files and
// directories while searches read the index: files never touched are
// always found, no path is listed twice, and once the writers stop the
// index equals a fresh walk.
func TestIndexConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		write(t, dir, fmt.Sprintf("stable/s%02d/keep.go", i), "")
	}
	root := openRoot(t, dir)
	x := Of(root)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	stop := make(chan struct{})
	var writers sync.WaitGroup
	for w := range 3 {
		writers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := filepath.Join(dir, fmt.Sprintf("churn%d/d%d", w, i%7))
				_ = os.MkdirAll(d, 0o755)
				f := filepath.Join(d, fmt.Sprintf("f%d.go", i))
				_ = os.WriteFile(f, nil, 0o644)
				_ = os.Rename(f, f+".renamed")
				if i%3 == 0 {
					_ = os.Remove(f + ".renamed")
				}
				if i%5 == 0 {
					_ = os.Rename(d, d+fmt.Sprintf("-moved%d", i))
				}
				if i%11 == 0 {
					_ = os.RemoveAll(filepath.Join(dir, fmt.Sprintf("churn%d", w)))
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for range 150 {
				if ctx.Err() != nil {
					return
				}
				var seen []string
				ok, err := x.Read(ctx, ".", func(top *Dir) {
					var rec func(d *Dir)
					rec = func(d *Dir) {
						for n := range d.Files() {
							seen = append(seen, path.Join(d.rel, n))
						}
						for _, c := range d.Dirs() {
							rec(c)
						}
					}
					rec(top)
				})
				if err != nil || !ok {
					t.Errorf("Read during writes: ok=%v err=%v", ok, err)
					return
				}
				slices.Sort(seen)
				if i := len(seen) - len(slices.Compact(slices.Clone(seen))); i != 0 {
					t.Errorf("%d paths listed twice", i)
				}
				for i := range 20 {
					if _, found := slices.BinarySearch(seen, fmt.Sprintf("stable/s%02d/keep.go", i)); !found {
						t.Errorf("stable/s%02d/keep.go missing during writes", i)
					}
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	writers.Wait()
	if got, want := indexListing(t, x), walkListing(t, root); !slices.Equal(got, want) {
		t.Fatalf("after the writes:\nindex %d entries\nwalk  %d entries\nfirst difference: %s", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("index %q, walk %q", a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

// limitWatcher fails every add after the first n, as the inotify watch
// limit does.
type limitWatcher struct {
	watcher
	n int
}

func (l *limitWatcher) add(dir string, fd int) (int32, error) {
	if l.n == 0 {
		return -1, fmt.Errorf("watch %s: %w", dir, errWatchLimit)
	}
	l.n--
	return l.watcher.add(dir, fd)
}

// TestIndexWithoutWatches: when watches run out (or the system has no
// notifications), every Read lists the tree again, so it is still exact.
func TestIndexWithoutWatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		mk   func() (watcher, error)
	}{
		{"watch limit", func() (watcher, error) {
			w, err := newWatcher()
			if err != nil {
				return nil, err
			}
			return &limitWatcher{watcher: w, n: 2}, nil
		}},
		{"no notifications", func() (watcher, error) { return nil, errors.New("unsupported") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := seedTree(t)
			root := openRoot(t, dir)
			x := New(root)
			x.newWatcher = tc.mk
			defer x.Close()
			indexListing(t, x)
			write(t, dir, "src/pkg/deep/new.go", "")
			if got, want := indexListing(t, x), walkListing(t, root); !slices.Equal(got, want) {
				t.Fatalf("index %q\nwalk  %q", got, want)
			}
			if x.scans < 2 {
				t.Errorf("listed %d times; without watches each Read lists the tree", x.scans)
			}
		})
	}
}

func TestIndexClosedWithRoot(t *testing.T) {
	root, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	x := Of(root)
	if err := x.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	root.Close()
	if _, err := x.Read(t.Context(), ".", func(*Dir) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after the root closed: %v, want ErrClosed", err)
	}
}

// gapWatcher makes changes in a directory just before its watch is added,
// after the directory was listed: the window a full listing leaves while
// its watches are added in the background.
type gapWatcher struct {
	watcher
	before func(dir string)
}

func (g *gapWatcher) add(dir string, fd int) (int32, error) {
	g.before(dir)
	return g.watcher.add(dir, fd)
}

// TestIndexChangesBeforeWatch: files created, removed and directories made
// in a directory after its listing but before its watch (added in the
// background) are seen by the next Read.
func TestIndexChangesBeforeWatch(t *testing.T) {
	dir := seedTree(t)
	root := openRoot(t, dir)
	x := New(root)
	defer x.Close()
	done := map[string]bool{}
	x.newWatcher = func() (watcher, error) {
		w, err := newWatcher()
		if err != nil {
			return nil, err
		}
		return &gapWatcher{watcher: w, before: func(abs string) {
			rel, err := filepath.Rel(dir, abs)
			if err != nil || done[rel] {
				return
			}
			done[rel] = true
			switch filepath.ToSlash(rel) {
			case "src/pkg":
				write(t, dir, "src/pkg/late.go", "")
				write(t, dir, "src/pkg/newdir/n.go", "")
			case ".":
				if err := os.Remove(filepath.Join(dir, "a.go")); err != nil {
					t.Error(err)
				}
			}
		}}, nil
	}
	first := indexListing(t, x)
	if !slices.Contains(first, "f a.go") || slices.Contains(first, "f src/pkg/late.go") {
		t.Fatalf("the first Read should list the tree as it was: %q", first)
	}
	if got, want := indexListing(t, x), walkListing(t, root); !slices.Equal(got, want) {
		t.Fatalf("after changes made before the watches:\nindex %q\nwalk  %q", got, want)
	}
	if x.scans != 1 {
		t.Errorf("the tree was listed %d times, want 1 (changed directories are listed again alone)", x.scans)
	}
}
