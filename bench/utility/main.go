// Command utility runs one utility_file_search of Maestro's headless
// utility operations (internal/utility) over a directory and prints the
// matching paths, one a line, for timing against ripgrep (see run.sh).
//
//	go run ./bench/utility -root "$(go env GOROOT)/src" -query httpserver -limit 500
//
// With -repeat N (at least 2) it searches N more times in the same
// process (warm: the workspace file index is built by the first search)
// and prints to stderr "first_us first_cpu_us warm_median_us
// warm_cpu_mean_us second_us second_cpu_us": the wall and CPU (user +
// system) times of the first search, of the repeats after the second,
// and of the second alone (the first repeat, which also waits for the
// index's watches, added in the background after the first search).
// run.sh builds this same driver against an older revision's packages
// too, so the two are timed alike.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/bench/internal/searchbench"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

func main() {
	query := flag.String("query", "", "file search query")
	limit := flag.Int("limit", utility.MaxSearchLimit, "result limit (1..500)")
	scores := flag.Bool("scores", false, "print each result's score before its path")
	repeat := flag.Int("repeat", 0, "search this many more times and print the timings to stderr")
	searchbench.Main(func(ws *workspace.Root) (int, error) {
		m := utility.New(utility.Config{Root: ws})
		defer m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req := protocol.UtilityFileSearch{SearchID: "bench", Query: *query, Limit: limit}
		t0, c0 := time.Now(), cpuTime()
		res, err := m.FileSearch(ctx, req)
		if err != nil {
			return 1, err
		}
		first, firstCPU := time.Since(t0), cpuTime()-c0
		if *repeat > 1 {
			t1, c1 := time.Now(), cpuTime()
			if _, err := m.FileSearch(ctx, req); err != nil {
				return 1, err
			}
			second, secondCPU := time.Since(t1), cpuTime()-c1
			walls := make([]time.Duration, *repeat-1)
			c2 := cpuTime()
			for i := range walls {
				t := time.Now()
				if _, err := m.FileSearch(ctx, req); err != nil {
					return 1, err
				}
				walls[i] = time.Since(t)
			}
			cpu := (cpuTime() - c2) / time.Duration(len(walls))
			slices.Sort(walls)
			fmt.Fprintf(os.Stderr, "%d %d %d %d %d %d\n", first.Microseconds(), firstCPU.Microseconds(),
				walls[len(walls)/2].Microseconds(), cpu.Microseconds(), second.Microseconds(), secondCPU.Microseconds())
		}
		for _, r := range res.Results {
			if *scores {
				fmt.Printf("%g\t", r.Score)
			}
			fmt.Println(r.Path)
		}
		if res.Truncated {
			fmt.Fprintln(os.Stderr, "(truncated)")
		}
		return 0, nil
	})
}

// cpuTime returns the process's CPU time so far, user + system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
