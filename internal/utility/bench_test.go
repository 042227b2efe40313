package utility

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// BenchmarkFileRead reads line windows of text files: a small file whole,
// the first 400 lines of a 1 MiB file and 400 lines at its end.
func BenchmarkFileRead(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "small.md"), []byte("alpha\nbeta\ngamma\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	line := strings.Repeat("x", 63) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat(line, 16384)), 0o644); err != nil {
		b.Fatal(err)
	}
	root, err := workspace.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	m := New(Config{Root: root})
	defer m.Close()
	for _, tc := range []struct {
		name string
		req  protocol.UtilityFileRead
	}{
		{"small", protocol.UtilityFileRead{ReadID: "r", Path: "small.md"}},
		{"1MiB/head", protocol.UtilityFileRead{ReadID: "r", Path: "big.txt"}},
		{"1MiB/tail", protocol.UtilityFileRead{ReadID: "r", Path: "big.txt", Offset: ptr(16384 - 399)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.FileRead(b.Context(), tc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFileSearchStdlib searches the Go standard library source
// (about 11,500 files) by file name; bench/utility/run.sh compares the
// same search with ripgrep. warm: repeated searches of one workspace (its
// file index built before the timing); cold: each search opens the
// workspace anew, so it builds the index. cpu-ns/op is the process's CPU
// time (user + system, all threads), steadier than wall time on a loaded
// machine.
func BenchmarkFileSearchStdlib(b *testing.B) {
	src := filepath.Join(runtime.GOROOT(), "src")
	open := func() (*Manager, func()) {
		root, err := workspace.Open(src)
		if err != nil {
			b.Fatal(err)
		}
		m := New(Config{Root: root})
		return m, func() { m.Close(); root.Close() }
	}
	for _, mode := range []string{"warm", "cold"} {
		for _, q := range []string{"httpserver", "server.go", "ztest", "e"} {
			b.Run(mode+"/"+q, func(b *testing.B) {
				req := protocol.UtilityFileSearch{SearchID: "s", Query: q, Limit: ptr(MaxSearchLimit)}
				search := func(m *Manager) {
					if _, err := m.FileSearch(b.Context(), req); err != nil {
						b.Fatal(err)
					}
				}
				var warm *Manager
				if mode == "warm" {
					m, done := open()
					defer done()
					search(m)
					warm = m
				}
				b.ReportAllocs()
				cpu := proctest.CPUTime(b)
				for b.Loop() {
					if warm != nil {
						search(warm)
						continue
					}
					m, done := open()
					search(m)
					done()
				}
				b.ReportMetric(float64(proctest.CPUTime(b)-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
