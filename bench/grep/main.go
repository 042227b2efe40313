// Command grep runs Maestro's Grep tool once over a directory and prints
// its result, for timing against ripgrep (see run.sh).
//
//	go run ./bench/grep -root "$(go env GOROOT)/src" -pattern 'func \w+Context\(' -max 100000000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/maestro-run/maestro/bench/internal/searchbench"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

func main() {
	pattern := flag.String("pattern", "", "regular expression")
	ignoreCase := flag.Bool("i", false, "ignore case")
	glob := flag.String("glob", "", "glob filter")
	maxResults := flag.Int("max", 0, "max_results (0: the tool's default)")
	searchbench.Main(func(ws *workspace.Root) (int, error) {
		input, err := json.Marshal(tool.GrepInput{
			Pattern:    *pattern,
			Glob:       *glob,
			IgnoreCase: *ignoreCase,
			MaxResults: *maxResults,
		})
		if err != nil {
			return 2, err
		}
		res, err := tool.NewGrep(ws).Run(context.Background(), tool.Call{ID: "bench", Input: input})
		if err != nil {
			return 2, err
		}
		fmt.Print(res.Content)
		if res.IsError {
			return 1, nil
		}
		return 0, nil
	})
}
