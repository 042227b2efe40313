package postgres_test

import (
	"os"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/pgtest"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
	"github.com/maestro-run/maestro/internal/store/storetest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// openDSN opens a store on dsn, closed when tb ends.
func openDSN(tb testing.TB, dsn string, now func() time.Time) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(tb.Context(), dsn, postgres.Options{Now: now})
	if err != nil {
		tb.Fatalf("open PostgreSQL store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

func open(tb testing.TB, now func() time.Time) store.Store {
	tb.Helper()
	return openDSN(tb, pg.Cluster(tb).NewSchema(tb), now)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, open)
}
