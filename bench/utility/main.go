// Command utility runs one utility_file_search of Maestro's headless
// utility operations (internal/utility) over a directory and prints the
// matching paths, one a line, for timing against ripgrep (see run.sh).
//
//	go run ./bench/utility -root "$(go env GOROOT)/src" -query httpserver -limit 500
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
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
	searchbench.Main(func(ws *workspace.Root) (int, error) {
		m := utility.New(utility.Config{Root: ws})
		defer m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := m.FileSearch(ctx, protocol.UtilityFileSearch{SearchID: "bench", Query: *query, Limit: limit})
		if err != nil {
			return 1, err
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
