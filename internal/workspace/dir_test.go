//go:build unix

package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

func TestDir(t *testing.T) {
	t.Parallel()
	r, outside := setup(t)
	ws := r.Dir()
	mustWrite(t, filepath.Join(ws, "sub", "a.txt"), "alpha")
	mustWrite(t, filepath.Join(ws, "sub", "big.txt"), "0123456789")
	wstest.Symlink(t, "a.txt", filepath.Join(ws, "sub", "link.txt"))
	wstest.Symlink(t, "../sub", filepath.Join(ws, "sub", "dirlink"))
	wstest.Symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(ws, "sub", "out.txt"))
	if err := syscall.Mkfifo(filepath.Join(ws, "sub", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "sub", "inner"), 0o755); err != nil {
		t.Fatal(err)
	}

	d, err := r.OpenDir("sub")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Rel() != "sub" {
		t.Errorf("Rel() = %q", d.Rel())
	}
	entries, err := d.ReadDir()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	want := []string{"a.txt", "big.txt", "dirlink", "fifo", "inner", "link.txt", "out.txt"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("ReadDir (-want +got):\n%s", diff)
	}

	buf := make([]byte, 0, 64)
	data, size, err := d.ReadFile("a.txt", buf, 100)
	if err != nil || string(data) != "alpha" || size != 5 {
		t.Errorf("ReadFile(a.txt) = %q, %d, %v", data, size, err)
	}
	if &data[:1][0] != &buf[:1][0] {
		t.Error("ReadFile did not reuse the buffer")
	}
	if _, size, err := d.ReadFile("big.txt", nil, 5); !errors.Is(err, ErrTooLarge) || size != 10 {
		t.Errorf("ReadFile(big.txt, max 5) = %d, %v; want ErrTooLarge and size 10", size, err)
	}
	f, err := d.Open("big.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 20)
	n, _ := f.Read(got)
	f.Close()
	if string(got[:n]) != "0123456789" {
		t.Errorf("Open(big.txt) read %q", got[:n])
	}

	// Links are never followed, whether they stay inside or not, and
	// only regular files are read.
	for _, name := range []string{"link.txt", "out.txt", "fifo", "inner"} {
		if _, _, err := d.ReadFile(name, nil, 100); err == nil {
			t.Errorf("ReadFile(%s) succeeded", name)
		}
		if f, err := d.Open(name); err == nil {
			f.Close()
			t.Errorf("Open(%s) succeeded", name)
		}
	}
	for _, name := range []string{"dirlink", "a.txt", "missing"} {
		if sub, err := d.OpenDir(name); err == nil {
			sub.Close()
			t.Errorf("OpenDir(%s) succeeded", name)
		}
	}
	for _, name := range []string{"", ".", "..", "inner/../a.txt", "/etc/passwd", "a\x00"} {
		if _, _, err := d.ReadFile(name, nil, 100); err == nil {
			t.Errorf("ReadFile(%q) succeeded", name)
		}
		if sub, err := d.OpenDir(name); err == nil {
			sub.Close()
			t.Errorf("OpenDir(%q) succeeded", name)
		}
	}

	inner, err := d.OpenDir("inner")
	if err != nil {
		t.Fatal(err)
	}
	if inner.Rel() != "sub/inner" {
		t.Errorf("inner Rel() = %q", inner.Rel())
	}
	inner.Close()
	if _, _, err := inner.ReadFile("x", nil, 1); err == nil {
		t.Error("ReadFile on a closed Dir succeeded")
	}

	top, err := r.OpenDir(".")
	if err != nil {
		t.Fatal(err)
	}
	if top.Rel() != "." {
		t.Errorf("top Rel() = %q", top.Rel())
	}
	top.Close()
}

func TestOpenDirRefusesEscapes(t *testing.T) {
	t.Parallel()
	r, _ := setup(t)
	wstest.Symlink(t, "../outside", filepath.Join(r.Dir(), "up"))
	for _, p := range []string{"..", "../outside", "up", "/etc"} {
		if d, err := r.OpenDir(p); !errors.Is(err, ErrOutside) {
			if err == nil {
				d.Close()
			}
			t.Errorf("OpenDir(%q) error = %v, want ErrOutside", p, err)
		}
	}
	if _, err := r.OpenDir("real.txt"); err == nil || errors.Is(err, ErrOutside) {
		t.Errorf("OpenDir(real.txt) error = %v, want not-a-directory", err)
	}
	if _, err := r.OpenDir("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenDir(missing) error = %v, want ErrNotExist", err)
	}
}
