//go:build linux

package workspace

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// plantedTree makes a trusted directory holding a secret outside it and an
// agent-writable tree whose entries the tests replace with links.
func plantedTree(t *testing.T) (trusted, outside string) {
	t.Helper()
	base := t.TempDir()
	trusted = filepath.Join(base, "task")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{trusted, outside, filepath.Join(trusted, "work", "output")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return trusted, outside
}

func TestTreeRefusesLinksAtEveryComponent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(t *testing.T, trusted, outside string)
		rel   string
	}{
		{"top-level dir link", func(t *testing.T, tr, out string) {
			os.RemoveAll(filepath.Join(tr, "work"))
			must(t, os.Symlink(out, filepath.Join(tr, "work")))
		}, "work/output"},
		{"last dir link", func(t *testing.T, tr, out string) {
			os.RemoveAll(filepath.Join(tr, "work", "output"))
			must(t, os.Symlink(out, filepath.Join(tr, "work", "output")))
		}, "work/output"},
		{"link to root", func(t *testing.T, tr, out string) {
			os.RemoveAll(filepath.Join(tr, "work", "output"))
			must(t, os.Symlink("/", filepath.Join(tr, "work", "output")))
		}, "work/output/etc"},
		{"relative link inside", func(t *testing.T, tr, out string) {
			must(t, os.Symlink("output", filepath.Join(tr, "work", "alias")))
		}, "work/alias"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			trusted, outside := plantedTree(t)
			tc.plant(t, trusted, outside)
			d, err := OpenTrusted(trusted)
			must(t, err)
			defer d.Close()
			if sub, err := d.OpenPath(tc.rel); !errors.Is(err, ErrOutside) {
				if sub != nil {
					sub.Close()
				}
				t.Fatalf("OpenPath(%s) = %v, want ErrOutside", tc.rel, err)
			}
			if sub, err := d.MkdirPath(tc.rel+"/new", 0o755); !errors.Is(err, ErrOutside) {
				if sub != nil {
					sub.Close()
				}
				t.Fatalf("MkdirPath = %v, want ErrOutside", err)
			}
			if f, err := d.OpenFilePath(tc.rel + "/secret"); err == nil {
				f.Close()
				t.Fatal("OpenFilePath read through a link")
			}
			if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
				t.Fatal("MkdirPath created a directory outside")
			}
		})
	}
}

func TestTreeFileLinkAndFIFORefused(t *testing.T) {
	t.Parallel()
	trusted, outside := plantedTree(t)
	out := filepath.Join(trusted, "work", "output")
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(out, "passwd")))
	must(t, syscall.Mkfifo(filepath.Join(out, "fifo"), 0o644))
	d, err := OpenTrusted(trusted)
	must(t, err)
	defer d.Close()
	if _, err := d.OpenFilePath("work/output/passwd"); !errors.Is(err, ErrOutside) {
		t.Fatalf("link file: %v, want ErrOutside", err)
	}
	if _, err := d.OpenFilePath("work/output/fifo"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("fifo: %v, want not a regular file", err)
	}
}

func TestTreeWriteAtomicReplacesLinkNotTarget(t *testing.T) {
	t.Parallel()
	trusted, outside := plantedTree(t)
	logs := filepath.Join(trusted, "work", "output")
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(logs, "state.json")))
	d, err := OpenTrusted(trusted)
	must(t, err)
	defer d.Close()
	sub, err := d.MkdirPath("work/output", 0o755)
	must(t, err)
	defer sub.Close()
	must(t, sub.WriteFileAtomic("state.json", []byte("{}"), 0o644))
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cret" {
		t.Fatalf("target outside was changed: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(logs, "state.json"))
	must(t, err)
	if !fi.Mode().IsRegular() {
		t.Fatalf("state.json is %v, want a regular file", fi.Mode())
	}
	f, err := d.OpenFilePath("work/output/state.json")
	must(t, err)
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "{}" {
		t.Fatalf("read back %q", b)
	}
	if fi.Mode().Perm() != 0o644&^umaskForTest() {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
}

// A stream whose fill fails leaves the old file as it was and no
// temporary file behind; one that succeeds replaces it.
func TestTreeWriteStreamAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "log.jsonl"), []byte("old\n"), 0o600))
	d, err := OpenTrusted(dir)
	must(t, err)
	defer d.Close()
	boom := errors.New("boom")
	err = d.WriteStreamAtomic("log.jsonl", 0o600, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	ents, err := os.ReadDir(dir)
	must(t, err)
	if b, _ := os.ReadFile(filepath.Join(dir, "log.jsonl")); string(b) != "old\n" || len(ents) != 1 {
		t.Fatalf("after a failed fill: log.jsonl %q, %d entries", b, len(ents))
	}
	must(t, d.WriteStreamAtomic("log.jsonl", 0o600, func(w io.Writer) error {
		_, err := io.WriteString(w, "new\n")
		return err
	}))
	if b, _ := os.ReadFile(filepath.Join(dir, "log.jsonl")); string(b) != "new\n" {
		t.Fatalf("log.jsonl = %q", b)
	}
}

func umaskForTest() fs.FileMode {
	m := syscall.Umask(0o022)
	syscall.Umask(m)
	return fs.FileMode(m)
}

func TestTreeMkdirRenameRemove(t *testing.T) {
	t.Parallel()
	trusted, _ := plantedTree(t)
	d, err := OpenTrusted(trusted)
	must(t, err)
	defer d.Close()
	in, err := d.MkdirPath("work/input/sub", 0o755)
	must(t, err)
	defer in.Close()
	stage, err := d.MkdirPath("staging", 0o700)
	must(t, err)
	defer stage.Close()
	f, err := stage.Create("up.txt", 0o644)
	must(t, err)
	f.WriteString("data")
	f.Close()
	if _, err := stage.Create("up.txt", 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Create: %v, want ErrExist", err)
	}
	must(t, stage.Rename("up.txt", in, "up.txt"))
	if b, err := os.ReadFile(filepath.Join(trusted, "work", "input", "sub", "up.txt")); err != nil || string(b) != "data" {
		t.Fatalf("moved file: %q %v", b, err)
	}
	fi, err := in.Lstat("up.txt")
	must(t, err)
	if !fi.Mode().IsRegular() || fi.Size() != 4 {
		t.Fatalf("Lstat: %v %d", fi.Mode(), fi.Size())
	}
	must(t, d.RemoveAll("work"))
	if _, err := os.Stat(filepath.Join(trusted, "work")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("RemoveAll left %v", err)
	}
	must(t, d.RemoveAll("work")) // missing is fine
}

func TestTreeRemoveAllDoesNotFollowLinks(t *testing.T) {
	t.Parallel()
	trusted, outside := plantedTree(t)
	must(t, os.Symlink(outside, filepath.Join(trusted, "work", "output", "out")))
	d, err := OpenTrusted(trusted)
	must(t, err)
	defer d.Close()
	must(t, d.RemoveAll("work"))
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatalf("RemoveAll followed a link: %v", err)
	}
}

func TestTreeWalkLimits(t *testing.T) {
	t.Parallel()
	trusted, _ := plantedTree(t)
	out := filepath.Join(trusted, "work", "output")
	for i := range 30 {
		must(t, os.WriteFile(filepath.Join(out, "f"+strings.Repeat("x", i)), nil, 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(out, "a", "b", "c", "d"), 0o755))
	must(t, os.Symlink("/", filepath.Join(out, "root")))
	d, err := OpenTrusted(trusted)
	must(t, err)
	defer d.Close()
	sub, err := d.OpenPath("work/output")
	must(t, err)
	defer sub.Close()

	var seen []string
	must(t, sub.Walk(WalkLimits{}, func(rel string, e fs.DirEntry) error {
		seen = append(seen, rel)
		if strings.HasPrefix(rel, "root/") {
			t.Fatalf("walk followed a link: %s", rel)
		}
		return nil
	}))
	if len(seen) != 30+4+1 {
		t.Fatalf("walk saw %d entries: %v", len(seen), seen)
	}
	n := 0
	err = sub.Walk(WalkLimits{MaxEntries: 10}, func(string, fs.DirEntry) error { n++; return nil })
	if !errors.Is(err, ErrWalkLimit) || n != 10 {
		t.Fatalf("entry limit: n=%d err=%v", n, err)
	}
	err = sub.Walk(WalkLimits{MaxDepth: 2}, func(string, fs.DirEntry) error { return nil })
	if !errors.Is(err, ErrWalkLimit) {
		t.Fatalf("depth limit: %v", err)
	}
}

func TestTreeBadPaths(t *testing.T) {
	t.Parallel()
	trusted, _ := plantedTree(t)
	d, err := OpenTrusted(trusted)
	must(t, err)
	defer d.Close()
	for _, rel := range []string{"../outside", "/etc", "work/../../x", strings.Repeat("a/", 10) + "\x00"} {
		if sub, err := d.OpenPath(rel); err == nil {
			sub.Close()
			t.Errorf("OpenPath(%q) succeeded", rel)
		}
	}
	long := strings.Repeat("x", 10<<20)
	_, err = d.OpenPath("../" + long)
	if err == nil || len(err.Error()) > 1024 {
		t.Fatalf("long path error not bounded: %d bytes", len(err.Error()))
	}
	self, err := d.OpenPath(".")
	must(t, err)
	self.Close()
	if _, err := d.ReadDir(); err != nil {
		t.Fatalf("d unusable after closing its OpenPath(.): %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// An entry's Info comes from the directory it was listed from, not from a
// path relative to the working directory.
func TestTreeEntryInfoFromHandle(t *testing.T) {
	t.Parallel()
	trusted, _ := plantedTree(t)
	must(t, os.WriteFile(filepath.Join(trusted, "work", "output", "f"), []byte("12345"), 0o644))
	d, err := OpenTrusted(trusted)
	must(t, err)
	defer d.Close()
	var sizes []int64
	must(t, d.Walk(WalkLimits{}, func(rel string, e fs.DirEntry) error {
		if rel == "work/output/f" {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			sizes = append(sizes, fi.Size())
		}
		return nil
	}))
	if len(sizes) != 1 || sizes[0] != 5 {
		t.Fatalf("Info sizes %v, want [5]", sizes)
	}
}
