// Package migrate applies versioned SQL migrations embedded in the binary,
// one dialect directory per database (SQLite, PostgreSQL).
//
// A migration is a file NNN_name.sql (NNN a positive decimal version, name
// in [a-z0-9_]) holding one or more statements. Applied versions are
// recorded in schema_migrations(version, name, checksum, applied_at). Each
// file runs in its own transaction together with its bookkeeping row, so a
// failed migration leaves nothing behind. Starters racing on one database are
// serialised: PostgreSQL with a transaction-scoped advisory lock keyed on the
// current schema, SQLite with BEGIN IMMEDIATE. Running Up again is a no-op.
//
// Applied migrations are immutable: Up refuses to run when an applied file's
// checksum differs from the embedded one, or when the database holds a
// version this binary does not know (a newer binary migrated it).
package migrate

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Dialect selects the SQL flavour and the locking strategy.
type Dialect string

// Supported dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Migration is one versioned SQL file.
type Migration struct {
	Version int
	// Name is the file name, e.g. "001_init.sql".
	Name string
	SQL  string
	// Checksum is the hex SHA-256 of SQL.
	Checksum string
}

var fileRE = regexp.MustCompile(`^([0-9]+)_[a-z0-9_]+\.sql$`)

// Load reads the migrations at the root of fsys, sorted by version. Files
// not ending in .sql are ignored; a .sql file with a malformed name or a
// duplicated version is an error.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || len(name) < 4 || name[len(name)-4:] != ".sql" {
			continue
		}
		m := fileRE.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("migration %s: expected a name like 001_create_jobs.sql", name)
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: expected a positive version number", name)
		}
		if prev, ok := seen[v]; ok {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		sum := sha256.Sum256(data)
		out = append(out, Migration{Version: v, Name: name, SQL: string(data), Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	return out, nil
}

// ErrChecksum reports an applied migration whose file changed since.
var ErrChecksum = errors.New("applied migration was modified")

// ErrUnknownVersion reports a database migrated by a newer binary.
var ErrUnknownVersion = errors.New("database has a migration this binary does not know")

// Up applies the migrations not yet applied, in version order, and returns
// the versions it applied. now stamps applied_at (nil: time.Now).
func Up(ctx context.Context, db *sql.DB, d Dialect, ms []Migration, now func() time.Time) ([]int, error) {
	if now == nil {
		now = time.Now
	}
	q, err := queriesFor(d)
	if err != nil {
		return nil, err
	}
	if err := inTx(ctx, db, d, func(tx execer) error {
		_, err := tx.ExecContext(ctx, q.create)
		return err
	}); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	var applied []int
	for _, m := range ms {
		var done bool
		err := inTx(ctx, db, d, func(tx execer) error {
			ok, err := check(ctx, tx, q, ms, m)
			if err != nil || ok {
				done = ok
				return err
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, q.insert, int64(m.Version), m.Name, m.Checksum, q.stamp(now()))
			return err
		})
		if errors.Is(err, ErrChecksum) || errors.Is(err, ErrUnknownVersion) {
			return applied, err // names the offending file itself
		}
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if !done {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

// check verifies the recorded migrations against ms and reports whether m
// is applied already.
func check(ctx context.Context, tx execer, q queries, ms []Migration, m Migration) (bool, error) {
	rows, err := tx.QueryContext(ctx, q.list)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	known := map[int]Migration{}
	for _, k := range ms {
		known[k.Version] = k
	}
	applied := false
	for rows.Next() {
		var v int64
		var name, sum string
		if err := rows.Scan(&v, &name, &sum); err != nil {
			return false, err
		}
		k, ok := known[int(v)]
		if !ok {
			return false, fmt.Errorf("%w: version %d (%s) is applied; upgrade this binary", ErrUnknownVersion, v, name)
		}
		if k.Checksum != sum {
			return false, fmt.Errorf("%w: %s was applied with checksum %.12s… but the embedded file now has %.12s…; applied migrations must not change, add a new migration instead", ErrChecksum, k.Name, sum, k.Checksum)
		}
		if int(v) == m.Version {
			applied = true
		}
	}
	return applied, rows.Err()
}

// Applied returns the versions recorded in schema_migrations (none if the
// table does not exist yet).
func Applied(ctx context.Context, db *sql.DB, d Dialect) ([]int, error) {
	q, err := queriesFor(d)
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := db.QueryRowContext(ctx, q.exists).Scan(&exists); err != nil {
		return nil, fmt.Errorf("look for schema_migrations: %w", err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, q.list)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int64
		var name, sum string
		if err := rows.Scan(&v, &name, &sum); err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
		out = append(out, int(v))
	}
	return out, rows.Err()
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type queries struct {
	create, list, insert, exists string
	lock                         string
	stamp                        func(time.Time) any
}

// listApplied lists the applied migrations (both dialects).
const listApplied = `SELECT version, name, checksum FROM schema_migrations ORDER BY version`

// createTable is the statement creating schema_migrations with the
// dialect's column types for versions, text and the applied_at stamp.
func createTable(version, text, stamp string) string {
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
		version ` + version + ` PRIMARY KEY,
		name ` + text + ` NOT NULL,
		checksum ` + text + ` NOT NULL,
		applied_at ` + stamp + ` NOT NULL)`
}

func queriesFor(d Dialect) (queries, error) {
	switch d {
	case SQLite:
		return queries{
			create: createTable("INTEGER", "TEXT", "INTEGER"),
			list:   listApplied,
			insert: `INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)`,
			exists: `SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`,
			stamp:  func(t time.Time) any { return t.UnixMicro() },
		}, nil
	case Postgres:
		return queries{
			create: createTable("bigint", "text", "timestamptz"),
			list:   listApplied,
			insert: `INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1::bigint, $2::text, $3::text, $4::timestamptz)`,
			exists: `SELECT to_regclass('schema_migrations') IS NOT NULL`,
			// Keyed on the schema so that separate schemas (one per test)
			// migrate independently.
			lock:  `SELECT pg_advisory_xact_lock(hashtext('maestro.migrate.' || current_schema()))`,
			stamp: func(t time.Time) any { return t.UTC() },
		}, nil
	}
	return queries{}, fmt.Errorf("migrate: unknown dialect %q", d)
}

// inTx runs fn in a transaction that excludes other migrators: an advisory
// lock on PostgreSQL, BEGIN IMMEDIATE (the write lock, taken up front) on
// SQLite.
func inTx(ctx context.Context, db *sql.DB, d Dialect, fn func(execer) error) error {
	if d == Postgres {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		q, _ := queriesFor(d)
		if _, err := tx.ExecContext(ctx, q.lock); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit()
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(conn); err != nil {
		// Use a fresh context: the rollback must happen even if ctx ended.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
