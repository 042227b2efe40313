package eventbus

import (
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// cpuNs is the process's CPU time (user and system), in nanoseconds.
func cpuNs(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkJobCursorSave is what the job follower pays to record where a
// job's publishing is, with jobs jobs in the store, in CPU per call
// (cpu-ns/op): file is the cursor file it wrote before (the whole map,
// once per read of a job's log), advance the store's cursor (one upsert
// per acknowledged page) and read the store's cursor (once per read of a
// job's log, before publishing), on SQLite.
func BenchmarkJobCursorSave(b *testing.B) {
	for _, jobs := range []int{100, 10000} {
		b.Run("file/jobs="+strconv.Itoa(jobs), func(b *testing.B) {
			st := struct {
				Jobs map[string]int64 `json:"jobs"`
			}{Jobs: map[string]int64{}}
			for i := range jobs {
				st.Jobs[strconv.Itoa(i+1)] = 40
			}
			path := filepath.Join(b.TempDir(), "eventbus-jobs.json")
			i := 0
			measure(b, func() {
				st.Jobs[strconv.Itoa(i%jobs+1)]++
				i++
				if err := writeJSON(path, st); err != nil {
					b.Fatal(err)
				}
			})
		})
		for _, op := range []string{"advance", "read"} {
			b.Run(op+"/jobs="+strconv.Itoa(jobs), func(b *testing.B) {
				ctx := b.Context()
				s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "maestro.db"), sqlite.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				for range jobs {
					j, err := s.Enqueue(ctx, store.NewJob{Piece: "noop"})
					if err != nil {
						b.Fatal(err)
					}
					if err := s.AdvanceJobEventCursor(ctx, j.ID, 40); err != nil {
						b.Fatal(err)
					}
				}
				seq := map[int64]int64{}
				i := 0
				measure(b, func() {
					id := int64(i%jobs + 1)
					i++
					if op == "read" {
						if _, err := s.JobEventCursor(ctx, id); err != nil {
							b.Fatal(err)
						}
						return
					}
					seq[id]++
					if err := s.AdvanceJobEventCursor(ctx, id, 40+seq[id]); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

func measure(b *testing.B, op func()) {
	b.ReportAllocs()
	start := cpuNs(b)
	n := 0
	for b.Loop() {
		op()
		n++
	}
	b.ReportMetric(float64(cpuNs(b)-start)/float64(n), "cpu-ns/op")
}
