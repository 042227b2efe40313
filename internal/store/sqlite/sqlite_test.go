package sqlite_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/storetest"
)

func open(tb testing.TB, now func() time.Time) store.Store {
	tb.Helper()
	s, err := sqlite.Open(tb.Context(), filepath.Join(tb.TempDir(), "maestro.db"), sqlite.Options{Now: now})
	if err != nil {
		tb.Fatalf("open SQLite store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, open)
}

// TestSecondOpenFailsFast: a second Open fails at once, and the lock is
// free again once the first is closed, even when another test forks a
// subprocess at that moment (Close unlocks before it closes the file).
func TestSecondOpenFailsFast(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "maestro.db")
	first, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(t.Context(), path, sqlite.Options{})
	if !errors.Is(err, sqlite.ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	again.Close()
}

// TestReopenWhileForking: a store closed while the process forks
// subprocesses can be opened again at once. Close used to only close the
// lock file; a child forked at that moment held the flock until its exec,
// and the reopen failed with ErrLocked (a worker restarted in a test
// process that runs commands).
func TestReopenWhileForking(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "maestro.db")
	ctx, cancel := context.WithCancel(t.Context())
	var forks sync.WaitGroup
	for range 2 {
		forks.Go(func() {
			for ctx.Err() == nil {
				_ = exec.CommandContext(ctx, "true").Run()
			}
		})
	}
	defer forks.Wait()
	defer cancel()
	for i := range 30 {
		st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
