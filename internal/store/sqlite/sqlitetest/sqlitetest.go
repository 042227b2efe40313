// Package sqlitetest opens throwaway SQLite stores for tests.
package sqlitetest

import (
	"path/filepath"
	"testing"

	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// Open opens a store in a new file under tb.TempDir(), with options o; it
// is closed when the test ends.
func Open(tb testing.TB, o sqlite.Options) *sqlite.Store {
	tb.Helper()
	st, err := sqlite.Open(tb.Context(), filepath.Join(tb.TempDir(), "maestro.db"), o)
	if err != nil {
		tb.Fatalf("open a SQLite store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}
