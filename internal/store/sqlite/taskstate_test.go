package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/maestro-run/maestro/internal/migrate"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/migrations"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// TestTaskStateBackfill: migration 003 gives the tasks of an older
// database the state of their latest job (none: no state), so the state
// filter finds them.
func TestTaskStateBackfill(t *testing.T) {
	t.Parallel()
	s := openAfterRows(t, 2,
		`INSERT INTO tasks (id, title, created_at, updated_at) VALUES (1, 'retried', 0, 0), (2, 'queued', 0, 0), (3, 'no job', 0, 0)`,
		`INSERT INTO jobs (id, task_id, state, max_attempts, scheduled_at, created_at, updated_at) VALUES
			(10, 1, 'failed', 1, 0, 0, 0), (11, 2, 'queued', 1, 0, 0, 0), (12, 1, 'succeeded', 1, 0, 0, 0)`,
	)
	for _, tc := range []struct {
		state store.State
		want  []int64
	}{
		{store.StateSucceeded, []int64{1}},
		{store.StateFailed, nil},
		{store.StateQueued, []int64{2}},
	} {
		tasks, err := s.ListTasks(t.Context(), store.TaskFilter{States: []store.State{tc.state}})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, task := range tasks {
			got = append(got, task.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("state %s: tasks %v, want %v", tc.state, got, tc.want)
		}
	}
}

// openAfterRows makes a database of the first n migrations holding rows
// (SQL statements), then opens it with sqlite.Open, which applies the
// rest: how a backfill meets an older database.
func openAfterRows(t *testing.T, n int, rows ...string) *sqlite.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "maestro.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(migrations.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(t.Context(), db, migrate.SQLite, ms[:n], nil); err != nil {
		t.Fatalf("migrate to %03d: %v", n, err)
	}
	for _, q := range rows {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open (applies the migrations after %03d): %v", n, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
