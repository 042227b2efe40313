// Package postgres is the store backend for several Maestro processes on
// several machines sharing one PostgreSQL database (pgx v5).
//
// Queries go through database/sql (pgx/v5/stdlib), sharing the Go flow with
// the SQLite backend; the SQL is PostgreSQL's own, with every parameter typed
// and claims using FOR UPDATE SKIP LOCKED. Wake-ups use LISTEN/NOTIFY: store
// changes that queue a job or append events send pg_notify inside their
// transaction (delivered on commit), and one dedicated native pgx.Conn per
// Store LISTENs and fans notifications out to in-process subscribers. After
// that connection drops and comes back, every subscriber gets an empty
// notification (notifications may have been missed: re-read).
//
// The channel is "maestro_" plus the connection's current schema, so
// separate schemas (one per test, or per deployment) do not wake each other.
package postgres

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/maestro-run/maestro/internal/migrate"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/internal/sqlstore"
	"github.com/maestro-run/maestro/internal/store/migrations"
)

// maxNotifyBytes keeps topic and payload under PostgreSQL's 8000-byte
// NOTIFY payload limit.
const maxNotifyBytes = 7900

// Options configures Open.
type Options struct {
	// Now is the clock (default time.Now). Processes sharing a database
	// need synchronised clocks (see package store).
	Now func() time.Time
	// MaxConns bounds the connection pool (default 16), not counting the
	// one LISTEN connection.
	MaxConns int
	// Logger receives listener reconnection notices (default: discarded).
	Logger *slog.Logger
}

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	*sqlstore.DB
	db        *sql.DB
	hub       *store.Hub
	lis       *listener
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at dsn (a postgres:// URL or key=value
// string; search_path selects a schema) and applies pending migrations.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL store: parse the connection string: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	maxConns := opts.MaxConns
	if maxConns <= 0 {
		maxConns = 16
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	var schema sql.NullString
	var searchPath, dbName string
	if err := db.QueryRowContext(ctx, `SELECT current_schema(), current_setting('search_path'), current_database()`).Scan(&schema, &searchPath, &dbName); err != nil {
		db.Close()
		return nil, fmt.Errorf("open PostgreSQL store: %w", connectError(cfg, err))
	}
	if !schema.Valid {
		// No schema of the search path exists: the tables would have
		// nowhere to go (it said 'sql: Scan error on column index 0, name
		// "current_schema": converting NULL to string is unsupported').
		db.Close()
		return nil, fmt.Errorf("open PostgreSQL store: no schema of the search_path %q exists in database %q: create it (CREATE SCHEMA …) or name an existing one in the URL's search_path", searchPath, dbName)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hub := store.NewHub()
	channel := channelName(schema.String)
	s := &Store{db: db, hub: hub, lis: &listener{cfg: cfg, channel: channel, hub: hub, log: log}}
	s.DB, err = sqlstore.New(sqlstore.Config{
		Writer: db, Reader: db, Now: opts.Now, Hub: hub,
		Dialect: sqlstore.Dialect{
			Name:       migrate.Postgres,
			Queries:    newQueries(),
			Migrations: migrations.Postgres(),
			Time:       func(t time.Time) any { return t },
			List: func(v []string) any {
				if v == nil {
					return []string{}
				}
				return v
			},
			Classify: classify,
			Channel:  channel,
			NotifyTx: func(ctx context.Context, tx *sql.Tx, ns []store.Notification) error {
				msgs := make([]string, len(ns))
				for i, n := range ns {
					msgs[i] = n.Topic + "\n" + n.Payload
				}
				_, err := tx.ExecContext(ctx, `SELECT pg_notify($1::text, m) FROM unnest($2::text[]) AS m`, channel, msgs)
				return err
			},
		},
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open PostgreSQL store: %w", err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open PostgreSQL store: %w", err)
	}
	return s, nil
}

// connectError says why the first connection failed and what to do, in
// place of pgx's report of every attempt (TLS first, then without).
func connectError(cfg *pgx.ConnConfig, err error) error {
	addr := cfg.Host
	if !strings.HasPrefix(addr, "/") {
		addr = net.JoinHostPort(addr, strconv.Itoa(int(cfg.Port)))
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		why := fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
		switch {
		case strings.HasPrefix(pe.Code, "28"): // invalid_authorization_specification, invalid_password
			return fmt.Errorf("PostgreSQL at %s refused user %q: %s: check the user name and password in the URL", addr, cfg.User, why)
		case pe.Code == "3D000": // invalid_catalog_name
			return fmt.Errorf("PostgreSQL at %s: %s: create it (createdb -O %s %s) or name an existing database in the URL", addr, why, cfg.User, cfg.Database)
		}
		return fmt.Errorf("PostgreSQL at %s: %s", addr, why)
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return fmt.Errorf("PostgreSQL host %q is not known (%v): check the URL's host", cfg.Host, de)
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return fmt.Errorf("PostgreSQL at %s cannot be reached (%v): is the server running, and are the URL's host and port right?", addr, oe.Err)
	}
	return err
}

// channelName derives the NOTIFY channel from the schema, within the
// 63-byte identifier limit.
func channelName(schema string) string {
	ch := "maestro_" + schema
	if len(ch) <= 63 {
		return ch
	}
	sum := sha256.Sum256([]byte(schema))
	return "maestro_" + hex.EncodeToString(sum[:12])
}

func classify(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "23505": // unique_violation
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case "23503": // foreign_key_violation
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return err
}

// Notify sends a notification to every process's subscribers (see
// store.Notifier).
func (s *Store) Notify(ctx context.Context, topic, payload string) error {
	if err := store.ValidateTopic(topic); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if len(topic)+len(payload) > maxNotifyBytes {
		return fmt.Errorf("notify: %w", &store.FieldError{Field: "payload", Message: fmt.Sprintf("expected topic and payload within %d bytes", maxNotifyBytes)})
	}
	if _, err := s.db.ExecContext(ctx, `SELECT pg_notify($1::text, $2::text)`, s.lis.channel, topic+"\n"+payload); err != nil {
		return fmt.Errorf("notify %q: %w", topic, err)
	}
	return nil
}

// Subscribe subscribes to a topic (see store.Notifier). The first call
// opens the LISTEN connection; Subscribe returns once it listens.
func (s *Store) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	if err := store.ValidateTopic(topic); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	if err := s.lis.ensure(ctx); err != nil {
		return nil, fmt.Errorf("subscribe to %q: %w", topic, err)
	}
	return s.hub.Subscribe(ctx, topic)
}

// Close stops the listener, ends subscriptions and closes the pool.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.lis.close()
		s.hub.Close()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// listener owns the LISTEN connection.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	hub     *store.Hub
	log     *slog.Logger

	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc
	done   chan struct{}
}

// ensure starts the listener if it is not running: the first connection and
// LISTEN happen here, so an unreachable database is reported to the caller.
func (l *listener) ensure(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return store.ErrClosed
	}
	if l.done != nil {
		return nil
	}
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(rctx, conn)
	return nil
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect the listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("listen on %s: %w", l.channel, err)
	}
	return conn, nil
}

// run delivers notifications until ctx ends, reconnecting with backoff when
// the connection fails.
func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				conn.Close(context.WithoutCancel(ctx))
				conn = nil
				if ctx.Err() != nil {
					return
				}
				l.log.Warn("store listener lost its connection; reconnecting", "channel", l.channel, "error", err)
				break
			}
			publish(l.hub, n.Payload)
			backoff = 100 * time.Millisecond
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, 5*time.Second)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := l.connect(cctx)
		cancel()
		if err != nil {
			l.log.Warn("store listener could not reconnect", "channel", l.channel, "error", err)
			continue
		}
		conn = c
		// Anything sent while we were away is lost: tell everyone to re-read.
		l.hub.Resync()
	}
}

// publish hands one NOTIFY payload to the hub: "topic\npayload", or a
// batch of topics with empty payloads, "\ntopic1\ntopic2…" (notifyJobs: a
// statement that moves many jobs sends one notification per batch, not one
// per job). A topic is never empty nor holds a newline (store.ValidateTopic),
// so the two forms cannot be confused.
func publish(hub *store.Hub, msg string) {
	topic, payload, _ := strings.Cut(msg, "\n")
	if topic != "" {
		hub.Publish(store.Notification{Topic: topic, Payload: payload})
		return
	}
	for t := range strings.SplitSeq(payload, "\n") {
		if t != "" {
			hub.Publish(store.Notification{Topic: t})
		}
	}
}

func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
