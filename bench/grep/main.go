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
	"os"

	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

func main() {
	os.Exit(run())
}

func run() int {
	root := flag.String("root", ".", "workspace directory to search")
	pattern := flag.String("pattern", "", "regular expression")
	ignoreCase := flag.Bool("i", false, "ignore case")
	glob := flag.String("glob", "", "glob filter")
	maxResults := flag.Int("max", 0, "max_results (0: the tool's default)")
	flag.Parse()

	ws, err := workspace.Open(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ws.Close()
	input, err := json.Marshal(tool.GrepInput{
		Pattern:    *pattern,
		Glob:       *glob,
		IgnoreCase: *ignoreCase,
		MaxResults: *maxResults,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res, err := tool.NewGrep(ws).Run(context.Background(), tool.Call{ID: "bench", Input: input})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Print(res.Content)
	if res.IsError {
		return 1
	}
	return 0
}
