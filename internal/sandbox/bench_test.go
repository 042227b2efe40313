package sandbox_test

import (
	"context"
	"testing"

	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/sandbox/sandboxtest"
)

// BenchmarkCommand runs `true` once per iteration in each kind, so the
// cost of the Landlock helper per Bash call compares with bubblewrap's in
// the same run. "off" (bash alone) is the baseline; the "+helper" and
// "bare" variants separate the helper (limits, cgroup, tree kill) from the
// isolation itself.
func BenchmarkCommand(b *testing.B) {
	helper := sandboxtest.Helper(b)
	kinds := []struct {
		name string
		new  func(b *testing.B) *sandbox.Sandbox
	}{
		{"off", func(b *testing.B) *sandbox.Sandbox { return sandboxtest.Off(b, sandbox.Config{}) }},
		{"off+helper", func(b *testing.B) *sandbox.Sandbox { return sandboxtest.Off(b, sandbox.Config{HelperPath: helper}) }},
		{"bwrap-bare", func(b *testing.B) *sandbox.Sandbox { return sandboxtest.Bwrap(b, sandbox.Config{}) }},
		{"bwrap", func(b *testing.B) *sandbox.Sandbox { return sandboxtest.Bwrap(b, sandbox.Config{HelperPath: helper}) }},
		{"landlock", func(b *testing.B) *sandbox.Sandbox { return sandboxtest.Landlock(b, sandbox.Config{}) }},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			sb := k.new(b)
			ws := b.TempDir()
			for b.Loop() {
				cmd, err := sb.Command(context.Background(), ws, "true", sandbox.CommandOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
	}
}
