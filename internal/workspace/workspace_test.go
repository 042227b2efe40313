package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// setup makes a workspace directory "ws" next to a directory "outside"
// holding secret.txt, and returns the opened root and the outside path.
func setup(t *testing.T) (*Root, string) {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{ws, outside, filepath.Join(ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(outside, "secret.txt"), "secret")
	mustWrite(t, filepath.Join(ws, "real.txt"), "real")
	r, err := Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, outside
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRel(t *testing.T) {
	t.Parallel()
	r, outside := setup(t)
	// A second name for the workspace through a symlinked parent: absolute
	// paths under either name are inside.
	alias := filepath.Join(t.TempDir(), "alias")
	wstest.Symlink(t, r.Dir(), alias)
	ra, err := Open(alias)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	if ra.Dir() != r.Dir() {
		t.Fatalf("Dir() through alias = %q, want %q", ra.Dir(), r.Dir())
	}

	tests := []struct {
		path    string
		want    string
		outside bool
	}{
		{path: "a/b", want: filepath.FromSlash("a/b")},
		{path: "./a//b/", want: filepath.FromSlash("a/b")},
		{path: "", want: "."},
		{path: ".", want: "."},
		{path: "a/../b", want: "b"},
		{path: "..a", want: "..a"},
		{path: filepath.Join(r.Dir(), "x", "y"), want: filepath.FromSlash("x/y")},
		{path: r.Dir(), want: "."},
		{path: r.Dir() + "/", want: "."},
		{path: filepath.Join(alias, "x"), want: "x"},
		{path: "..", outside: true},
		{path: "../x", outside: true},
		{path: "a/../../x", outside: true},
		{path: "a/b/../../../x", outside: true},
		{path: "/etc/passwd", outside: true},
		{path: "/", outside: true},
		{path: r.Dir() + "/../outside/secret.txt", outside: true},
		{path: r.Dir() + "2/x", outside: true},
		{path: filepath.Join(outside, "secret.txt"), outside: true},
	}
	for _, tt := range tests {
		got, err := ra.Rel(tt.path)
		if tt.outside {
			if !errors.Is(err, ErrOutside) {
				t.Errorf("Rel(%q) = %q, %v; want ErrOutside", tt.path, got, err)
				continue
			}
			var oe *OutsideError
			if !errors.As(err, &oe) || oe.Path != tt.path {
				t.Errorf("Rel(%q) error = %#v; want *OutsideError naming the path", tt.path, err)
			}
			if want := "path is outside the workspace: " + tt.path; err.Error() != want {
				t.Errorf("Rel(%q) error text = %q, want %q", tt.path, err.Error(), want)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Rel(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
}

func TestRelRejectsNUL(t *testing.T) {
	t.Parallel()
	r, _ := setup(t)
	if _, err := r.Rel("a\x00b"); err == nil {
		t.Fatal("Rel accepted a NUL byte")
	}
}

// TestEscapeDetection checks that every operation refuses paths that leave
// the workspace, lexically or through symbolic links, with ErrOutside, and
// that nothing outside is read, changed or created.
func TestEscapeDetection(t *testing.T) {
	t.Parallel()
	r, outside := setup(t)
	ws := r.Dir()
	wstest.Symlink(t, "/etc", filepath.Join(ws, "etc"))
	wstest.Symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(ws, "secret-abs"))
	wstest.Symlink(t, "../outside/secret.txt", filepath.Join(ws, "secret-rel"))
	wstest.Symlink(t, "../outside", filepath.Join(ws, "updir"))
	wstest.Symlink(t, "../../outside", filepath.Join(ws, "sub", "deep"))
	wstest.Symlink(t, "../outside/new.txt", filepath.Join(ws, "dangling"))
	wstest.Symlink(t, "/nonexistent-maestro/new.txt", filepath.Join(ws, "dangling-abs"))
	wstest.Symlink(t, "loop2", filepath.Join(ws, "loop1"))
	wstest.Symlink(t, "loop1", filepath.Join(ws, "loop2"))

	paths := []string{
		"../outside/secret.txt",
		"sub/../../outside/secret.txt",
		filepath.Join(outside, "secret.txt"),
		"/etc/passwd",
		"etc/passwd",
		"etc/new-file",
		"secret-abs",
		"secret-rel",
		"updir/secret.txt",
		"updir/new.txt",
		"updir/newdir/new.txt",
		"sub/deep/secret.txt",
		"dangling",
		"dangling-abs",
	}
	ops := []struct {
		name string
		do   func(p string) error
	}{
		{"ReadFile", func(p string) error { _, err := r.ReadFile(p); return err }},
		{"WriteFile", func(p string) error { return r.WriteFile(p, []byte("pwned"), 0o644) }},
		{"Stat", func(p string) error { _, err := r.Stat(p); return err }},
		{"Open", func(p string) error {
			f, err := r.Open(p)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"Resolve", func(p string) error { _, err := r.Resolve(p); return err }},
	}
	for _, op := range ops {
		for _, p := range paths {
			if op.name == "Stat" || op.name == "Open" || op.name == "ReadFile" {
				if strings.HasSuffix(p, "new.txt") || strings.HasSuffix(p, "new-file") || strings.HasPrefix(p, "dangling") {
					// Missing targets: reading them fails either way;
					// only the writers and Resolve must say "outside".
					continue
				}
			}
			err := op.do(p)
			if !errors.Is(err, ErrOutside) {
				t.Errorf("%s(%q) error = %v; want ErrOutside", op.name, p, err)
			}
		}
	}
	for _, p := range []string{"updir/newdir", "etc/maestro", "sub/deep/x"} {
		if err := r.MkdirAll(p, 0o755); !errors.Is(err, ErrOutside) {
			t.Errorf("MkdirAll(%q) error = %v; want ErrOutside", p, err)
		}
	}
	if _, err := r.ReadFile("loop1"); err == nil || errors.Is(err, ErrOutside) {
		t.Errorf("ReadFile(loop1) error = %v; want a link-loop error", err)
	}
	if _, err := r.Resolve("loop1"); err == nil {
		t.Error("Resolve(loop1) succeeded on a link loop")
	}

	data, err := os.ReadFile(filepath.Join(outside, "secret.txt"))
	if err != nil || string(data) != "secret" {
		t.Errorf("outside file changed: %q, %v", data, err)
	}
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"secret.txt"}, names); diff != "" {
		t.Errorf("files outside the workspace (-want +got):\n%s", diff)
	}
}

func TestSymlinksInside(t *testing.T) {
	t.Parallel()
	r, _ := setup(t)
	ws := r.Dir()
	wstest.Symlink(t, "real.txt", filepath.Join(ws, "link.txt"))
	wstest.Symlink(t, "sub", filepath.Join(ws, "subdir"))
	wstest.Symlink(t, "../real.txt", filepath.Join(ws, "sub", "up.txt"))
	wstest.Symlink(t, "sub/later.txt", filepath.Join(ws, "dangling-in"))

	if data, err := r.ReadFile("link.txt"); err != nil || string(data) != "real" {
		t.Errorf("ReadFile(link.txt) = %q, %v", data, err)
	}
	if data, err := r.ReadFile("subdir/up.txt"); err != nil || string(data) != "real" {
		t.Errorf("ReadFile(subdir/up.txt) = %q, %v", data, err)
	}
	resolveTests := map[string]string{
		"link.txt":            "real.txt",
		"subdir/new/file.txt": "sub/new/file.txt",
		"subdir/up.txt":       "real.txt",
		"dangling-in":         "sub/later.txt",
		".":                   ".",
		ws + "/subdir":        "sub",
	}
	for in, want := range resolveTests {
		got, err := r.Resolve(in)
		if err != nil || got != filepath.Join(ws, filepath.FromSlash(want)) {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, filepath.Join(ws, want))
		}
	}

	// Writing through a link replaces the target and keeps the link.
	if err := r.WriteFile("link.txt", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(ws, "link.txt"))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("link.txt is no longer a symlink: %v, %v", fi, err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "real.txt")); string(data) != "new" {
		t.Errorf("real.txt = %q, want %q", data, "new")
	}
	// A dangling link inside creates its target.
	if err := r.WriteFile("dangling-in", []byte("later"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "sub", "later.txt")); string(data) != "later" {
		t.Errorf("sub/later.txt = %q, want %q", data, "later")
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	r, _ := setup(t)
	ws := r.Dir()

	if err := r.WriteFile("a/b/c.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a", "b", "c.txt")); string(data) != "hello" {
		t.Errorf("a/b/c.txt = %q", data)
	}

	// Existing files keep their mode.
	script := filepath.Join(ws, "run.sh")
	mustWrite(t, script, "#!/bin/sh\n")
	if err := os.Chmod(script, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("run.sh", []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(script)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("run.sh mode = %v, want 0750", fi.Mode().Perm())
	}

	// Absolute paths inside are fine.
	if err := r.WriteFile(filepath.Join(ws, "abs.txt"), []byte("abs"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Directories are not files.
	if err := r.WriteFile("sub", []byte("x"), 0o644); err == nil {
		t.Error("WriteFile over a directory succeeded")
	}
	if err := r.WriteFile(".", []byte("x"), 0o644); err == nil {
		t.Error("WriteFile over the root succeeded")
	}

	// No temporary files are left behind.
	var all []string
	err = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		all = append(all, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	want := []string{".", "a", "a/b", "a/b/c.txt", "abs.txt", "real.txt", "run.sh", "sub"}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("workspace contents (-want +got):\n%s", diff)
	}
}

func TestOperations(t *testing.T) {
	t.Parallel()
	r, _ := setup(t)
	if err := r.MkdirAll("x/y", 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := r.Stat("x/y"); err != nil || !fi.IsDir() {
		t.Errorf("Stat(x/y) = %v, %v", fi, err)
	}
	wstest.Symlink(t, "real.txt", filepath.Join(r.Dir(), "l"))
	if fi, err := r.Lstat("l"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(l) = %v, %v; want a symlink", fi, err)
	}
	f, err := r.Open("real.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := r.Remove("x/y"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stat("x/y"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat after Remove: %v", err)
	}
	if err := r.Remove("."); err == nil {
		t.Error("Remove(.) succeeded")
	}
	if err := r.Remove("../outside/secret.txt"); !errors.Is(err, ErrOutside) {
		t.Errorf("Remove outside: %v", err)
	}
	data, err := fs.ReadFile(r.FS(), "real.txt")
	if err != nil || string(data) != "real" {
		t.Errorf("FS ReadFile = %q, %v", data, err)
	}
	sub, err := r.OpenDir("sub")
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	if _, err := r.OpenDir("../outside"); !errors.Is(err, ErrOutside) {
		t.Errorf("OpenDir outside: %v", err)
	}
	if _, err := r.ReadFile("missing.txt"); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrOutside) {
		t.Errorf("ReadFile(missing) = %v; want ErrNotExist", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("Open(missing) succeeded")
	}
	file := filepath.Join(dir, "f")
	mustWrite(t, file, "x")
	if _, err := Open(file); err == nil {
		t.Error("Open(file) succeeded")
	}
}
