// Package sqlite is the default store backend: one SQLite file (modernc.org/
// sqlite, pure Go) used by one process that runs any number of workers.
//
// Every connection gets its settings from the DSN (a one-off PRAGMA would
// reach one pooled connection only): WAL journal, a 30 s busy timeout,
// synchronous=NORMAL, foreign keys on. Writes go through a writer pool of
// exactly one connection whose transactions begin IMMEDIATE (taking the
// write lock up front avoids the deferred read-then-upgrade SQLITE_BUSY that
// a busy timeout cannot resolve); plain reads use a separate read-only pool,
// which WAL lets run beside the writer.
//
// A lock file beside the database (<file>.lock, flock) makes a second
// process opening the same file fail at once with ErrLocked: SQLite is for
// one `maestro serve` with N workers; several processes share PostgreSQL.
//
// Wake-ups are in process: committing a change that queues a job or appends
// events publishes to an in-memory hub.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/maestro-run/maestro/internal/migrate"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/internal/sqlstore"
	"github.com/maestro-run/maestro/internal/store/migrations"
)

// ErrLocked is returned by Open when another process has the database open.
var ErrLocked = errors.New("database in use by another process")

// Options configures Open.
type Options struct {
	// Now is the clock (default time.Now). Tests inject a fake one.
	Now func() time.Time
	// Readers is the size of the read-only pool (default 4).
	Readers int
}

// Store is a store.Store on one SQLite file.
type Store struct {
	*sqlstore.DB
	path           string
	writer, reader *sql.DB
	hub            *store.Hub
	lock           *os.File
	closeOnce      sync.Once
	closeErr       error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path, takes its lock
// file and applies pending migrations.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open SQLite store: expected a file path without ? or #, found %q", path)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open SQLite store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open SQLite store: create its directory: %w", err)
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	s := &Store{path: path, lock: lock, hub: store.NewHub()}
	if err := s.open(ctx, opts); err != nil {
		s.Close()
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, opts Options) error {
	common := url.Values{}
	common.Add("_pragma", "busy_timeout(30000)")
	common.Add("_pragma", "foreign_keys(ON)")
	common.Add("_pragma", "synchronous(NORMAL)")
	w := cloneValues(common)
	w.Add("_pragma", "journal_mode(WAL)")
	w.Set("_txlock", "immediate")
	r := cloneValues(common)
	r.Add("_pragma", "query_only(ON)")

	var err error
	if s.writer, err = sql.Open("sqlite", s.path+"?"+w.Encode()); err != nil {
		return err
	}
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.writer.SetConnMaxLifetime(0)
	// The writer connection switches the file to WAL before any reader
	// connects.
	if err := s.writer.PingContext(ctx); err != nil {
		return err
	}
	if s.reader, err = sql.Open("sqlite", s.path+"?"+r.Encode()); err != nil {
		return err
	}
	readers := opts.Readers
	if readers <= 0 {
		readers = 4
	}
	s.reader.SetMaxOpenConns(readers)
	s.reader.SetMaxIdleConns(readers)
	s.DB, err = sqlstore.New(sqlstore.Config{
		Writer: s.writer, Reader: s.reader, Now: opts.Now, Hub: s.hub, PrepareStatements: true,
		Dialect: sqlstore.Dialect{
			Name:       migrate.SQLite,
			Queries:    newQueries(),
			Migrations: migrations.SQLite(),
			Time:       func(t time.Time) any { return t.UnixMicro() },
			List:       jsonList,
			Classify:   classify,
		},
	})
	if err != nil {
		return err
	}
	_, err = s.Migrate(ctx)
	return err
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func jsonList(v []string) any {
	if len(v) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(v) // []string always encodes
	return string(b)
}

func classify(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return err
}

// lockFile takes an exclusive, non-blocking flock on path and writes our
// pid into it. The lock dies with the process, so a crash never leaves a
// stale lock behind.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				owner = "process " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s holds %s; stop it, or point every process at one PostgreSQL database (--db postgres://…) to run several", ErrLocked, owner, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// Path returns the database file.
func (s *Store) Path() string { return s.path }

// Notify publishes a wake-up to this process's subscribers (see
// store.Notifier).
func (s *Store) Notify(ctx context.Context, topic, payload string) error {
	if err := store.ValidateTopic(topic); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	s.hub.Publish(store.Notification{Topic: topic, Payload: payload})
	return nil
}

// Subscribe subscribes to a topic (see store.Notifier).
func (s *Store) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	return s.hub.Subscribe(ctx, topic)
}

// Close closes the pools, ends subscriptions and releases the lock file.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.hub.Close()
		if s.DB != nil {
			s.CloseStatements()
		}
		var errs []error
		if s.reader != nil {
			errs = append(errs, s.reader.Close())
		}
		if s.writer != nil {
			errs = append(errs, s.writer.Close())
		}
		if s.lock != nil {
			// Unlocked before it is closed: a subprocess forked at this
			// moment (a tool's command, a test's binary) shares the lock's
			// open file description until its exec, and closing alone
			// would leave the lock held for that instant, failing a
			// reopen with ErrLocked.
			_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
			errs = append(errs, s.lock.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
