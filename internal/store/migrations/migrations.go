// Package migrations embeds the store's versioned schema migrations, one
// directory per dialect (sqlite/, postgres/), applied by internal/migrate.
// Files are immutable once released: change the schema by adding the next
// NNN_name.sql to both directories, or to the one dialect the change is
// for (postgres/009 drops a foreign key SQLite keeps: SQLite has no 009,
// and its next migration is 010).
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// SQLite returns the SQLite migrations.
func SQLite() fs.FS { return sub("sqlite") }

// Postgres returns the PostgreSQL migrations.
func Postgres() fs.FS { return sub("postgres") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		// fs.Sub fails only for an invalid path, and dir is a constant.
		panic(err)
	}
	return f
}
