// Command maestro runs coding agents: `maestro run "task"` in a repository,
// and the rest of the surfaces listed by `maestro --help`.
package main

import (
	"os"

	"github.com/maestro-run/maestro/internal/cli"
	"github.com/maestro-run/maestro/internal/sandbox"
)

func main() {
	// Maestro re-executes itself as the Bash sandbox helper; that process
	// must do nothing else.
	sandbox.RunHelperIfRequested()
	os.Exit(cli.Main())
}
