package migrate_test

import (
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"

	"github.com/maestro-run/maestro/internal/migrate"
	"github.com/maestro-run/maestro/internal/pgtest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// backend opens a fresh empty database of one dialect. open may be called
// more than once to get independent pools on the same database.
type backend struct {
	name    string
	dialect migrate.Dialect
	open    func(t *testing.T) func() *sql.DB
}

func backends() []backend {
	return []backend{
		{"sqlite", migrate.SQLite, func(t *testing.T) func() *sql.DB {
			path := filepath.Join(t.TempDir(), "m.db")
			// Switch the file to WAL once, before any pool opens it, as the
			// store's writer does: SQLite answers a concurrent switch with
			// SQLITE_BUSY at once, without waiting for busy_timeout.
			first, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
			if err != nil {
				t.Fatal(err)
			}
			if err := first.PingContext(t.Context()); err != nil {
				t.Fatal(err)
			}
			first.Close()
			return func() *sql.DB {
				db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(30000)")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
		}},
		{"postgres", migrate.Postgres, func(t *testing.T) func() *sql.DB {
			dsn := pg.Cluster(t).NewSchema(t)
			return func() *sql.DB { return pgtest.OpenDB(t, dsn) }
		}},
	}
}

// eachBackend runs test in parallel on a fresh database of each dialect.
func eachBackend(t *testing.T, test func(t *testing.T, be backend)) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			test(t, be)
		})
	}
}

// mapFS holds files (name → body) in memory.
func mapFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, body := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fsys
}

func load(t *testing.T, files map[string]string) []migrate.Migration {
	t.Helper()
	ms, err := migrate.Load(mapFS(files))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return ms
}

// baseWith returns base with files added or replaced.
func baseWith(files map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, files)
	return out
}

var base = map[string]string{
	"001_items.sql":  "CREATE TABLE items (id integer PRIMARY KEY, name text NOT NULL);\nCREATE INDEX items_name ON items (name);",
	"002_extra.sql":  "ALTER TABLE items ADD COLUMN extra text;",
	"003_seed.sql":   "INSERT INTO items (id, name) VALUES (1, 'one');",
	"README.md":      "not a migration",
	"010_later.sql":  "CREATE TABLE later (id integer);",
	"sub/999_no.sql": "ignored: in a subdirectory",
}

func TestLoad(t *testing.T) {
	t.Parallel()
	ms := load(t, base)
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%d %s %d", m.Version, m.Name, len(m.Checksum)))
	}
	want := []string{"1 001_items.sql 64", "2 002_extra.sql 64", "3 003_seed.sql 64", "10 010_later.sql 64"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
	bad := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no version", map[string]string{"init.sql": ""}, "expected a name like"},
		{"upper case", map[string]string{"001_Init.sql": ""}, "expected a name like"},
		{"version zero", map[string]string{"000_init.sql": ""}, "positive version"},
		{"duplicate version", map[string]string{"001_a.sql": "", "1_b.sql": ""}, "share version 1"},
	}
	for _, tc := range bad {
		_, err := migrate.Load(mapFS(tc.files))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Load error = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestUp(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		db := be.open(t)()
		ctx := t.Context()
		ms := load(t, base)
		now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
		applied, err := migrate.Up(ctx, db, be.dialect, ms, now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{1, 2, 3, 10}, applied); diff != "" {
			t.Errorf("first Up applied (-want +got):\n%s", diff)
		}
		again, err := migrate.Up(ctx, db, be.dialect, ms, now)
		if err != nil || len(again) != 0 {
			t.Fatalf("second Up = %v, %v; want nothing applied", again, err)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != 1 {
			t.Fatalf("seed rows = %d, %v; want 1 (the seed ran once)", n, err)
		}
		got, err := migrate.Applied(ctx, db, be.dialect)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{1, 2, 3, 10}, got); diff != "" {
			t.Errorf("Applied (-want +got):\n%s", diff)
		}
		// A new migration later applies alone.
		more := baseWith(map[string]string{"011_more.sql": "CREATE TABLE more (id integer);"})
		applied, err = migrate.Up(ctx, db, be.dialect, load(t, more), now)
		if err != nil || !cmp.Equal(applied, []int{11}) {
			t.Fatalf("Up with one new migration = %v, %v; want [11]", applied, err)
		}
	})
}

func TestAppliedOnEmptyDatabase(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		got, err := migrate.Applied(t.Context(), be.open(t)(), be.dialect)
		if err != nil || len(got) != 0 {
			t.Fatalf("Applied on an empty database = %v, %v", got, err)
		}
	})
}

func TestRefusesChangedOrUnknownMigrations(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		db := be.open(t)()
		ctx := t.Context()
		if _, err := migrate.Up(ctx, db, be.dialect, load(t, base), nil); err != nil {
			t.Fatal(err)
		}
		changed := baseWith(map[string]string{
			"002_extra.sql": "ALTER TABLE items ADD COLUMN extra2 text;",
			"011_new.sql":   "CREATE TABLE never (id integer);",
		})
		applied, err := migrate.Up(ctx, db, be.dialect, load(t, changed), nil)
		if !errors.Is(err, migrate.ErrChecksum) {
			t.Fatalf("Up with a modified applied migration = %v, want ErrChecksum", err)
		}
		if !strings.HasPrefix(err.Error(), "applied migration was modified: 002_extra.sql was applied with checksum") ||
			!strings.Contains(err.Error(), "add a new migration") {
			t.Errorf("error %q should name the file and say what to do", err)
		}
		if len(applied) != 0 {
			t.Errorf("Up applied %v despite the checksum mismatch", applied)
		}
		var exists bool
		if err := db.QueryRowContext(ctx, existsQuery(be.dialect, "never")).Scan(&exists); err != nil || exists {
			t.Fatalf("table of the new migration exists = %v, %v; nothing may run after a mismatch", exists, err)
		}
		// A binary that knows fewer migrations than the database has.
		older := map[string]string{"001_items.sql": base["001_items.sql"]}
		_, err = migrate.Up(ctx, db, be.dialect, load(t, older), nil)
		if !errors.Is(err, migrate.ErrUnknownVersion) {
			t.Fatalf("Up by an older binary = %v, want ErrUnknownVersion", err)
		}
	})
}

func TestFailedMigrationRollsBack(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		db := be.open(t)()
		ctx := t.Context()
		files := map[string]string{
			"001_ok.sql":   "CREATE TABLE ok (id integer);",
			"002_bad.sql":  "CREATE TABLE half (id integer);\nTHIS IS NOT SQL;",
			"003_next.sql": "CREATE TABLE next (id integer);",
		}
		applied, err := migrate.Up(ctx, db, be.dialect, load(t, files), nil)
		if err == nil || !strings.Contains(err.Error(), "002_bad.sql") {
			t.Fatalf("Up = %v, want an error naming 002_bad.sql", err)
		}
		if !cmp.Equal(applied, []int{1}) {
			t.Errorf("applied = %v, want [1]", applied)
		}
		for table, want := range map[string]bool{"ok": true, "half": false, "next": false} {
			var exists bool
			if err := db.QueryRowContext(ctx, existsQuery(be.dialect, table)).Scan(&exists); err != nil {
				t.Fatal(err)
			}
			if exists != want {
				t.Errorf("table %s exists = %v, want %v", table, exists, want)
			}
		}
		got, err := migrate.Applied(ctx, db, be.dialect)
		if err != nil || !cmp.Equal(got, []int{1}) {
			t.Errorf("Applied = %v, %v; want [1]", got, err)
		}
	})
}

// TestConcurrentStarters: several processes starting at once on one empty
// database all succeed and every migration runs exactly once.
func TestConcurrentStarters(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		open := be.open(t)
		ms := load(t, base)
		const starters = 6
		var wg sync.WaitGroup
		results := make(chan []int, starters)
		errs := make(chan error, starters)
		for range starters {
			db := open() // its own pool, like its own process
			wg.Go(func() {
				applied, err := migrate.Up(t.Context(), db, be.dialect, ms, nil)
				if err != nil {
					errs <- err
				}
				results <- applied
			})
		}
		wg.Wait()
		close(errs)
		close(results)
		for err := range errs {
			t.Fatal(err)
		}
		count := map[int]int{}
		for r := range results {
			for _, v := range r {
				count[v]++
			}
		}
		if diff := cmp.Diff(map[int]int{1: 1, 2: 1, 3: 1, 10: 1}, count); diff != "" {
			t.Fatalf("times each version was applied (-want +got):\n%s", diff)
		}
		var n int
		if err := open().QueryRowContext(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil || n != 1 {
			t.Fatalf("seed rows = %d, %v; want 1", n, err)
		}
	})
}

func TestUnknownDialect(t *testing.T) {
	t.Parallel()
	if _, err := migrate.Up(t.Context(), nil, "oracle", nil, nil); err == nil {
		t.Fatal("Up with an unknown dialect succeeded")
	}
}

func existsQuery(d migrate.Dialect, table string) string {
	if d == migrate.Postgres {
		return "SELECT to_regclass('" + table + "') IS NOT NULL"
	}
	return "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = '" + table + "'"
}
