package utility

import (
	"os"
	"testing"

	"github.com/maestro-run/maestro/internal/sandbox"
)

// TestMain makes the test binary its own supervisor, as Maestro's main
// does, so that the commands run as in Maestro: under the helper
// (sandbox.SuperviseSession).
func TestMain(m *testing.M) {
	sandbox.RunHelperIfRequested()
	os.Exit(m.Run())
}
