package index

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/maestro-run/maestro/internal/proctest"
)

// BenchmarkIndex indexes the Go standard library source (about 11,500
// files). listed: New and the first Read, which lists the tree (a cold
// search waits for this); built: Warm, which also waits for the watches
// added in the background after the listing (the whole cost of
// building); read is a Read that finds no change (a warm search's
// overhead). cpu-ns/op is the process's CPU time, user + system; B/file
// the live heap the built index holds, per indexed file.
func BenchmarkIndex(b *testing.B) {
	src := filepath.Join(runtime.GOROOT(), "src")
	for _, watched := range []bool{false, true} {
		b.Run(map[bool]string{false: "listed", true: "built"}[watched], func(b *testing.B) {
			root := openRoot(b, src)
			var files int
			cpu := proctest.CPUTime(b)
			for b.Loop() {
				x := New(root)
				if watched {
					if err := x.Warm(b.Context()); err != nil {
						b.Fatal(err)
					}
					files = countFiles(b, x)
				} else if _, err := x.Read(b.Context(), ".", func(*Dir) {}); err != nil {
					b.Fatal(err)
				}
				x.Close()
			}
			b.ReportMetric(float64(proctest.CPUTime(b)-cpu)/float64(b.N), "cpu-ns/op")
			if watched {
				b.ReportMetric(float64(files), "files")
			}
		})
	}
	b.Run("read", func(b *testing.B) {
		root := openRoot(b, src)
		x := New(root)
		defer x.Close()
		before := liveHeap()
		if err := x.Warm(b.Context()); err != nil {
			b.Fatal(err)
		}
		perFile := float64(liveHeap()-before) / float64(countFiles(b, x))
		cpu := proctest.CPUTime(b)
		for b.Loop() {
			if _, err := x.Read(b.Context(), ".", func(*Dir) {}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(proctest.CPUTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(perFile, "B/file")
	})
}

func countFiles(b *testing.B, x *Index) int {
	n := 0
	_, err := x.Read(b.Context(), ".", func(top *Dir) {
		var rec func(d *Dir)
		rec = func(d *Dir) {
			n += d.FileCount()
			for _, c := range d.Dirs() {
				rec(c)
			}
		}
		rec(top)
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
