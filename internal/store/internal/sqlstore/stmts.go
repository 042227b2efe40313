package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// stmts caches prepared statements by query text. database/sql re-prepares
// a cached statement on each pooled connection the first time it is used
// there, and a transaction reuses its connection's preparation, so each
// query is parsed once per connection instead of once per call (SQLite
// spent ~40% of its time parsing SQL without this). A nil *stmts disables
// caching (pgx already caches statements per connection).
type stmts struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmts(db *sql.DB) *stmts { return &stmts{db: db, m: map[string]*sql.Stmt{}} }

// prepare prepares every query up front. It must not run inside a
// transaction: on the one-connection SQLite writer pool, preparing waits for
// the connection, which a transaction holds (so get never prepares lazily).
// Preparing everything at open also rejects a broken query at once.
func (c *stmts) prepare(ctx context.Context, queries []string) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range queries {
		if _, ok := c.m[q]; ok {
			continue
		}
		s, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(q), err)
		}
		c.m[q] = s
	}
	return nil
}

func firstLine(q string) string {
	q, _, _ = strings.Cut(strings.TrimSpace(q), "\n")
	return q
}

// get returns the prepared statement for q, or nil (run uncached) if caching
// is off or q was not prepared.
func (c *stmts) get(_ context.Context, q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

// close closes every cached statement.
func (c *stmts) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, s := range c.m {
		s.Close()
		delete(c.m, q)
	}
}

// pool runs plain (non-transactional) reads through the cache.
type pool struct {
	*sql.DB
	cache *stmts
}

// QueryRowContext shadows sql.DB's, using a cached statement.
func (p pool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := p.cache.get(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return p.DB.QueryRowContext(ctx, q, args...)
}

// QueryContext shadows sql.DB's, using a cached statement.
func (p pool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := p.cache.get(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return p.DB.QueryContext(ctx, q, args...)
}

// QueryRowContext shadows sql.Tx's, using the cached statement on the
// transaction's connection.
func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := t.cache.get(ctx, q); s != nil {
		return t.Tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}

// QueryContext shadows sql.Tx's, using a cached statement.
func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := t.cache.get(ctx, q); s != nil {
		return t.Tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// ExecContext shadows sql.Tx's, using a cached statement.
func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s := t.cache.get(ctx, q); s != nil {
		return t.Tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

// all lists the dialect's non-empty queries.
func (q *Queries) all() []string {
	v := reflect.ValueOf(*q)
	var out []string
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String && f.String() != "" {
			out = append(out, f.String())
		}
	}
	for _, t := range RecordTables {
		r := q.Records[t]
		out = append(out, r.Insert, r.Update, r.Get, r.List, r.Delete)
	}
	out = append(out, q.Live.all()...)
	out = append(out, q.Proc.all()...)
	out = append(out, q.Cursor.all()...)
	return out
}
