package sqlite_test

import (
	"errors"
	"path/filepath"
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

// TestSecondOpenFailsFast is deliberately not parallel: a test forking a
// subprocess at the moment of Close shares the lock file's open file
// description until its exec, which keeps the flock held for that instant
// and makes the reopen below fail spuriously.
func TestSecondOpenFailsFast(t *testing.T) {
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
