// Package sandboxtest builds sandboxes for tests: real bubblewrap and
// Landlock sandboxes that skip loudly where they cannot run (and fail when
// CI=true), and off sandboxes on any machine.
package sandboxtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/sandbox"
)

// newTimeout bounds sandbox.New (it probes bubblewrap).
const newTimeout = 30 * time.Second

// Bwrap returns a bubblewrap sandbox (cfg.Mode is forced to bwrap). When
// bubblewrap is missing or cannot build a sandbox here, the test is
// skipped with a loud reason — or fails when the environment variable CI
// is "true", because CI must run the isolation tests.
func Bwrap(t testing.TB, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	cfg.Mode = sandbox.ModeBwrap
	return build(t, cfg, "BUBBLEWRAP UNAVAILABLE: sandbox isolation test: %v (scripts/install-deps.sh installs bubblewrap)")
}

// Landlock returns a Landlock sandbox (cfg.Mode is forced to landlock).
// The helper is the test binary unless cfg.HelperPath says otherwise, so
// the package's TestMain must call sandbox.RunHelperIfRequested first.
// Where the kernel offers no Landlock the test is skipped loudly, or fails
// when CI=true.
func Landlock(t testing.TB, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	cfg.Mode = sandbox.ModeLandlock
	if cfg.HelperPath == "" {
		cfg.HelperPath = Helper(t)
	}
	return build(t, cfg, "LANDLOCK UNAVAILABLE: sandbox isolation test: %v")
}

// build is newBounded(cfg); a failure skips the test with unavailable (a
// format with one %v, the error), or fails it when CI=true.
func build(t testing.TB, cfg sandbox.Config, unavailable string) *sandbox.Sandbox {
	t.Helper()
	sb, err := newBounded(cfg)
	if err != nil {
		proctest.SkipOrFail(t, unavailable, err)
	}
	return sb
}

// newBounded is sandbox.New(cfg), bounded by newTimeout.
func newBounded(cfg sandbox.Config) (*sandbox.Sandbox, error) {
	ctx, cancel := context.WithTimeout(context.Background(), newTimeout)
	defer cancel()
	return sandbox.New(ctx, cfg)
}

// Helper returns the running test binary as the sandbox helper (its
// TestMain must call sandbox.RunHelperIfRequested).
func Helper(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("finding the test binary: %v", err)
	}
	return exe
}

// Off returns a sandbox with isolation switched off.
func Off(t testing.TB, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	cfg.Mode = sandbox.ModeOff
	return mustNew(t, cfg, sandbox.KindOff)
}

func mustNew(t testing.TB, cfg sandbox.Config, kind string) *sandbox.Sandbox {
	t.Helper()
	sb, err := newBounded(cfg)
	if err != nil {
		t.Fatalf("sandbox.New(%s): %v", cfg.Mode, err)
	}
	if sb.Kind() != kind {
		t.Fatalf("sandbox.New(%s).Kind() = %q, want %q", cfg.Mode, sb.Kind(), kind)
	}
	return sb
}
