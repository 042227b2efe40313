package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// A job's event bus cursor goes with the job: SQLite gives the id of the
// highest job deleted to the next one, which must not start from the
// deleted job's cursor (its events would never be published).
func TestJobEventCursorGoesWithItsJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "maestro.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j, err := s.Enqueue(ctx, store.NewJob{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceJobEventCursor(ctx, j.ID, 9); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `DELETE FROM jobs WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	again, err := s.Enqueue(ctx, store.NewJob{})
	if err != nil {
		t.Fatal(err)
	}
	if seq, err := s.JobEventCursor(ctx, again.ID); err != nil || seq != 0 {
		t.Errorf("cursor of job %d (the deleted job %d's id: %v) = %d, %v; want 0", again.ID, j.ID, again.ID == j.ID, seq, err)
	}
}
