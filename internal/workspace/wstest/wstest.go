// Package wstest builds workspaces for tests: files from a map, symbolic
// links, and planted FIFOs for code that must never block on one (a FIFO opened for
// reading without a writer blocks forever, so every path that reads
// agent-writable files is tested with one planted).
package wstest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Timeout is how long an operation near a FIFO may take before the test
// counts it as blocked.
const Timeout = 2 * time.Second

// WriteFiles creates the files (slash-separated path → content) below
// dir, with their parent directories.
func WriteFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// Symlink creates the symbolic link link pointing to target.
func Symlink(tb testing.TB, target, link string) {
	tb.Helper()
	if err := os.Symlink(target, link); err != nil {
		tb.Fatal(err)
	}
}

// MakeFIFO creates a FIFO at path, and its parent directories.
func MakeFIFO(tb testing.TB, path string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		tb.Fatalf("mkfifo: %v", err)
	}
}

// Within runs op and returns its result, failing tb unless op returns
// within Timeout. A reader then blocked on fifo is released by opening it
// for writing, so that a failing test does not leave a goroutine blocked.
func Within[T any](tb testing.TB, fifo string, op func() T) T {
	tb.Helper()
	done := make(chan T, 1)
	go func() { done <- op() }()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v := <-done:
		return v
	case <-timer.C:
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		tb.Fatalf("still blocked after %s (a FIFO at %s)", Timeout, fifo)
		var zero T
		return zero
	}
}
