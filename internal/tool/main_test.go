package tool

import (
	"os"
	"testing"

	"github.com/maestro-run/maestro/internal/sandbox"
)

// TestMain lets the Landlock cases of the Bash tests re-execute this test
// binary as the sandbox helper.
func TestMain(m *testing.M) {
	sandbox.RunHelperIfRequested()
	os.Exit(m.Run())
}
