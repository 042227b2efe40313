package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// TestFIFORefused: every way of reading through a Root refuses a FIFO at
// once, naming it, instead of blocking in open(2).
func TestFIFORefused(t *testing.T) {
	r, _ := setup(t)
	fifo := filepath.Join(r.Dir(), "pipe")
	wstest.MakeFIFO(t, fifo)
	// A link to the FIFO, and a directory name that is a FIFO.
	if err := os.Symlink("pipe", filepath.Join(r.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	ops := map[string]func(name string) error{
		"Open":        func(n string) error { f, err := r.Open(n); closeIf(f); return err },
		"OpenRegular": func(n string) error { f, _, err := r.OpenRegular(n); closeIf(f); return err },
		"ReadFile":    func(n string) error { _, err := r.ReadFile(n); return err },
		"ReadFileMax": func(n string) error { _, err := r.ReadFileMax(n, 100); return err },
		"FS.Open":     func(n string) error { f, err := r.FS().Open(n); closeIf(f); return err },
		"fs.ReadFile": func(n string) error { _, err := fs.ReadFile(r.FS(), n); return err },
		"fs.ReadDir":  func(n string) error { _, err := fs.ReadDir(r.FS(), n); return err },
		"OpenDir":     func(n string) error { d, err := r.OpenDir(n); closeIf(d); return err },
		"WriteFile":   func(n string) error { return r.WriteFile(n, []byte("x"), 0o644) },
	}
	for name, op := range ops {
		for _, target := range []string{"pipe", "link"} {
			t.Run(name+"/"+target, func(t *testing.T) {
				err := wstest.Within(t, fifo, func() error { return op(target) })
				if err == nil {
					t.Fatalf("%s(%s) succeeded on a FIFO", name, target)
				}
				if name == "OpenDir" || name == "fs.ReadDir" {
					return // refused as not a directory
				}
				if !errors.Is(err, ErrNotRegular) {
					t.Fatalf("%s(%s) = %v, want ErrNotRegular", name, target, err)
				}
				if !strings.Contains(err.Error(), "a FIFO") {
					t.Errorf("error %q does not say it is a FIFO", err)
				}
			})
		}
	}
	// The FIFO is still there: WriteFile did not replace it.
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
		t.Errorf("FIFO changed: %v %v", fi, err)
	}
}

func closeIf[T interface{ Close() error }](c T) {
	if any(c) != nil && !isNilPtr(c) {
		c.Close()
	}
}

func isNilPtr(v any) bool {
	switch p := v.(type) {
	case *os.File:
		return p == nil
	case *Dir:
		return p == nil
	case fs.File:
		return p == nil
	}
	return false
}

// TestDeviceRefused: a character device reached through the workspace is
// refused by the regular-file readers.
func TestDeviceRefused(t *testing.T) {
	r, _ := setup(t)
	if err := syscall.Mknod(filepath.Join(r.Dir(), "zero"), syscall.S_IFCHR|0o666, int(1<<8|5)); err != nil {
		proctest.SkipOrFail(t, "mknod (needs root): %v", err)
	}
	if _, err := r.ReadFile("zero"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a character device") {
		t.Fatalf("ReadFile(/dev/zero clone) = %v, want a character device refused", err)
	}
}

// TestReadFileMax: a file over the limit is refused from its size, and
// the limit bounds what is read.
func TestReadFileMax(t *testing.T) {
	r, _ := setup(t)
	mustWrite(t, filepath.Join(r.Dir(), "big.txt"), strings.Repeat("x", 1000))
	if _, err := r.ReadFileMax("big.txt", 999); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFileMax over the limit = %v, want ErrTooLarge", err)
	}
	var tl *TooLargeError
	if _, err := r.ReadFileMax("big.txt", 10); !errors.As(err, &tl) || tl.Size != 1000 || tl.Max != 10 {
		t.Fatalf("ReadFileMax error = %#v", tl)
	}
	data, err := r.ReadFileMax("big.txt", 1000)
	if err != nil || len(data) != 1000 {
		t.Fatalf("ReadFileMax at the limit = %d bytes, %v", len(data), err)
	}
	if _, err := r.ReadFileMax("sub", 1000); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("ReadFileMax(directory) = %v, want ErrNotRegular", err)
	}
}

// TestErrorsEchoBoundedPrefix: a 10 MB path is not repeated whole by the
// errors that name it.
func TestErrorsEchoBoundedPrefix(t *testing.T) {
	r, _ := setup(t)
	long := strings.Repeat("a", 10<<20)
	cases := map[string]func() error{
		"outside":     func() error { _, err := r.Rel("../" + long); return err },
		"nul":         func() error { _, err := r.Rel(long + "\x00"); return err },
		"not regular": func() error { return &NotRegularError{Path: long, Mode: fs.ModeNamedPipe} },
		"too large":   func() error { return &TooLargeError{Path: long, Size: 2, Max: 1} },
	}
	for name, op := range cases {
		t.Run(name, func(t *testing.T) {
			msg := op().Error()
			if len(msg) > MaxEcho+100 {
				t.Fatalf("error is %d bytes long", len(msg))
			}
			if !strings.Contains(msg, "bytes)") {
				t.Errorf("error %q does not give the input's length", msg)
			}
		})
	}
}

func TestExcerpt(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"short", "short"},
		{strings.Repeat("a", MaxEcho), strings.Repeat("a", MaxEcho)},
		{strings.Repeat("a", MaxEcho+1), strings.Repeat("a", MaxEcho) + "… (257 bytes)"},
		// A character across the cut is left out whole.
		{strings.Repeat("a", MaxEcho-2) + "é", strings.Repeat("a", MaxEcho-2) + "é"},
		{strings.Repeat("a", MaxEcho-1) + "é", strings.Repeat("a", MaxEcho-1) + "… (257 bytes)"},
	}
	for _, tt := range tests {
		if got := Excerpt(tt.in); got != tt.want {
			t.Errorf("Excerpt(%d bytes) = %q, want %q", len(tt.in), got, tt.want)
		}
	}
}
