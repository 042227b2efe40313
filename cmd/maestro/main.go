// Command maestro runs coding agents: `maestro run "task"` in a repository,
// and the rest of the surfaces listed by `maestro --help`.
package main

import (
	"os"

	"github.com/maestro-run/maestro/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
