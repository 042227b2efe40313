// Package searchbench holds what the search benchmarks' commands
// (bench/grep, bench/utility) share: a -root flag naming the directory
// searched, opened as a workspace, and the exit status of one search.
package searchbench

import (
	"flag"
	"fmt"
	"os"

	"github.com/maestro-run/maestro/internal/workspace"
)

// Main declares -root, parses the command line (the command declares its
// other flags before the call), opens the -root directory as a workspace
// and runs search over it, then exits: with 2 when the workspace cannot be
// opened, else with the status search returns, after printing its error
// when there is one.
func Main(search func(ws *workspace.Root) (int, error)) {
	os.Exit(run(flag.CommandLine, os.Args[1:], search))
}

// run is Main's work on the flag set fs and the arguments args; it
// returns the exit status.
func run(fs *flag.FlagSet, args []string, search func(ws *workspace.Root) (int, error)) int {
	root := fs.String("root", ".", "workspace directory to search")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ws, err := workspace.Open(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ws.Close()
	status, err := search(ws)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return status
}
