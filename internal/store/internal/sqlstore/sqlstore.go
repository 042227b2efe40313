// Package sqlstore is the database/sql implementation of store.Store shared
// by the SQLite and PostgreSQL backends. The Go flow (transactions, fencing
// diagnosis, status events, parent resumption, notifications) lives here
// once; each backend supplies a Dialect with its own hand-written SQL,
// parameter encodings and error classification.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/maestro-run/maestro/internal/migrate"
	"github.com/maestro-run/maestro/internal/store"
)

// Column lists every dialect's queries return, in this order.
const (
	JobColumns = "id, task_id, parent_job_id, piece, state, profile, task_class, priority, payload, " +
		"attempt, max_attempts, scheduled_at, attempted_at, lease_owner, lease_expires_at, heartbeat_at, " +
		"movement, checkpoint, wait_reason, result, error, event_seq, created_at, updated_at, finished_at"
	EventColumns    = "job_id, seq, attempt, type, data, created_at"
	CommentColumns  = "id, task_id, author_kind, author, body, created_at"
	PieceColumns    = "name, yaml, version, created_at, updated_at"
	ScheduleColumns = "id, name, cron_expr, enabled, owner, title, body, piece, profile, task_class, " +
		"next_run_at, last_fired_at, created_at, updated_at"
	AuditColumns   = "id, actor, action, target, details, created_at"
	SessionColumns = "id, job_id, executor_type, provider, model, workspace, title, created_at, updated_at"
	// TaskColumns is selected from tasks t LEFT JOIN jobs j (the latest job).
	TaskColumns = "t.id, t.owner, t.title, t.body, t.piece, t.schedule_id, t.created_at, t.updated_at, j.id, j.state, j.piece, " +
		"j.executor, j.model, j.agent, j.cost_usd, j.attempted_at, j.finished_at"
)

// Queries is a dialect's SQL. The comment of each field lists its
// parameters ($1, $2, …) in order; "?" marks a nullable one (nil for 0 or
// the zero time). Job queries return JobColumns unless stated otherwise.
type Queries struct {
	JobInsert string // task_id?, parent_job_id?, piece, profile, task_class, priority, payload, max_attempts, scheduled_at, now
	JobClaim  string // owners (list: the lease owner of the i-th job in claim order; its length is the limit), lease_expires_at, now, profiles (list), task_classes (list)
	// JobClaimStart is JobClaim for ClaimParams.Start: the jobs become
	// running at once (one status event each).
	JobClaimStart         string // as JobClaim
	JobStart              string // id, attempt, owner, now
	JobHeartbeat          string // id, attempt, owner, now, lease_expires_at → lease_expires_at
	JobCheckpoint         string // id, attempt, owner, now, movement, checkpoint? → id
	JobSetPiece           string // id, attempt, owner, now, piece → id
	JobComplete           string // id, attempt, owner, now, result
	JobFail               string // id, attempt, owner, now, error, final (bool), final_state, retry_at, not_counted (bool)
	JobWait               string // id, attempt, owner, now, state, reason
	JobRelease            string // id, attempt, owner, now
	JobReap               string // now, limit, error
	JobCancel             string // id, now, reason
	JobResume             string // id, now
	JobRetry              string // id, now, extra
	JobResumeParent       string // parent_id, now
	JobResumeWaitingHuman string // task_id, now
	JobLock               string // id; empty when the dialect needs no row lock (SQLite)
	JobGet                string // id
	JobList               string // task_id, parent_job_id, states (list), after_id, limit
	JobCounts             string // → state, count
	EventReserve          string // id, attempt, owner, n, now → event_seq, attempt
	EventReserveSystem    string // id, n, now → event_seq, attempt
	EventInsert           string // job_id, seq, attempt, type, data, created_at
	EventRead             string // job_id, after, limit → EventColumns
	TaskInsert            string // owner, title, body, piece, schedule_id?, now → id
	TaskGet               string // id → TaskColumns
	TaskList              string // owner, before_id (math.MaxInt64 for none), limit, search (lower case, '' for none), search_id (0 for none) → TaskColumns
	TaskListByState       string // as TaskList, then state: tasks whose latest job is in it (tasks.job_state, in index order)
	CommentInsert         string // task_id, author_kind, author, body, now → CommentColumns
	CommentList           string // task_id, after, limit → CommentColumns
	TaskExists            string // id → 1
	PieceInsert           string // name, yaml, now → PieceColumns
	PieceUpdate           string // name, yaml, now, if_version → PieceColumns
	PieceGet              string // name → PieceColumns
	PieceList             string // → PieceColumns
	PieceDelete           string // name, if_version → name
	PieceVersionInsert    string // name, version, yaml, created_at
	PieceVersionList      string // name → name, version, created_at, newest first
	PieceVersionGet       string // name, version → name, version, yaml, created_at
	PieceVersionDelete    string // name
	ScheduleInsert        string // name, cron_expr, enabled, owner, title, body, piece, profile, task_class, next_run_at, now → ScheduleColumns
	ScheduleUpdate        string // id, name, cron_expr, enabled, owner, title, body, piece, profile, task_class, next_run_at, now → ScheduleColumns
	ScheduleGet           string // id → ScheduleColumns
	ScheduleList          string // → ScheduleColumns
	ScheduleDelete        string // id → id
	ScheduleDue           string // now, limit → ScheduleColumns
	ScheduleFire          string // id, tick, next, now → ScheduleColumns
	AuditInsert           string // actor, action, target, details, now → AuditColumns
	AuditList             string // target, before_id, limit → AuditColumns
	SessionUpsert         string // id, job_id?, executor_type, provider, model, workspace, title, now → SessionColumns
	SessionGet            string // id → SessionColumns
	SessionList           string // job_id, limit → SessionColumns
	LeaderElect           string // name, owner, now, expires_at → owner
	LeaderResign          string // name, owner
	// RunStateSave upserts a job's run state if the lease holds the job.
	RunStateSave string // id, attempt, owner, now, movement, data → job_id
	RunStateGet  string // job_id → job_id, attempt, movement, data, updated_at
	UsageJobs    string // from, to, include_replay → JobUsage columns (usage.go), by job id

	// Records are the queries of the registry's record tables (MCP
	// servers, SSH connections, skills), by table (see RecordTables).
	Records map[string]RecordQueries
	// Live are the live-session ownership queries (WithLiveSessions).
	Live LiveQueries
	// Proc are the settings and process queries (WithProcesses).
	Proc ProcessQueries
	// Cursor are the job event cursor queries (WithJobEventCursors).
	Cursor CursorQueries
	// SSH connection grants.
	GrantInsert string // connection_id, grantee_kind, grantee, now → GrantColumns (no row if it existed)
	GrantGet    string // connection_id, grantee_kind, grantee → GrantColumns
	GrantDelete string // connection_id, grantee_kind, grantee → connection_id
	GrantList   string // connection_id ('' for all) → GrantColumns, by connection, kind, grantee

	// One-statement variants (PostgreSQL): the transition, its status
	// event and its notifications in a single statement, so a call costs
	// one round trip instead of BEGIN, UPDATE, INSERT, pg_notify, COMMIT.
	// Each ends with the notification of the job's topic on
	// Dialect.Channel. Empty: the call runs the transaction path.
	// JobInsertAtomic is JobInsert with the queued status event and the
	// notifications of the job's topic and of store.TopicJobs.
	JobInsertAtomic string // as JobInsert, then status_data, channel
	JobClaimAtomic  string // as JobClaim, then owner_json (list: each owner as a JSON string), channel
	// JobClaimStartAtomic is JobClaimAtomic for ClaimParams.Start: the
	// jobs become running, with one status event (running).
	JobClaimStartAtomic string // as JobClaimAtomic
	JobStartAtomic      string // id, attempt, owner, now, status_data, channel
	JobCompleteAtomic   string // id, attempt, owner, now, result, status_data, channel; only jobs without a parent (no row otherwise)
	EventAppendAtomic   string // id, attempt, owner, now, types (list), datas (list), channel → event_seq, attempt
	// JobStartManyAtomic starts the listed jobs that are dispatching under
	// their lease, returning them; the others are left alone.
	JobStartManyAtomic string // ids (bigint list), attempts (bigint list), owners (list), status_datas (list), now, channel
	// JobCompleteManyAtomic completes the listed jobs that hold their
	// lease and have no parent, returning them; the others are left alone.
	JobCompleteManyAtomic string // ids (bigint list), attempts (integer list), owners (list), results (list), status_datas (list), now, channel
	// JobCompleteManyLeases is JobCompleteManyAtomic returning only the
	// lease of each job it completed (id, attempt, lease_owner), for
	// callers that need only each item's error (CompleteManyErrs).
	JobCompleteManyLeases string // as JobCompleteManyAtomic → id, attempt, lease_owner
}

// Dialect is what a backend supplies.
type Dialect struct {
	Name       migrate.Dialect
	Queries    Queries
	Migrations fs.FS
	// Time encodes a time parameter (never called with the zero time).
	Time func(time.Time) any
	// List encodes a list-of-strings parameter.
	List func([]string) any
	// Classify maps driver errors: unique violations to store.ErrConflict,
	// foreign-key violations to store.ErrNotFound; others unchanged.
	Classify func(error) error
	// NotifyTx, if set, sends notifications inside the transaction (they
	// are delivered on commit: PostgreSQL NOTIFY). If nil, notifications
	// are published to the Hub after commit (in process: SQLite).
	NotifyTx func(ctx context.Context, tx *sql.Tx, ns []store.Notification) error
	// Channel is the NOTIFY channel the one-statement queries notify on.
	Channel string
}

// Config assembles a DB.
type Config struct {
	// Writer runs every transaction. Reader serves plain reads (the same
	// pool as Writer is fine).
	Writer, Reader *sql.DB
	Dialect        Dialect
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Hub receives in-process notifications (when Dialect.NotifyTx is nil).
	Hub *store.Hub
	// PrepareStatements caches prepared statements on the pools (for
	// drivers that do not cache them themselves).
	PrepareStatements bool
}

// DB implements every store.Store method except Notify, Subscribe and
// Close, which depend on the backend's wake-up mechanism.
type DB struct {
	w   *sql.DB
	wp  pool // plain statements on the writer (one-statement transitions)
	r   pool
	wc  *stmts
	d   Dialect
	q   *Queries
	now func() time.Time
	hub *store.Hub
	ms  []migrate.Migration
}

// New returns a DB over cfg after loading the dialect's migrations (it does
// not apply them; call Migrate).
func New(cfg Config) (*DB, error) {
	ms, err := migrate.Load(cfg.Dialect.Migrations)
	if err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	r := pool{DB: cfg.Reader}
	if r.DB == nil {
		r.DB = cfg.Writer
	}
	db := &DB{w: cfg.Writer, wp: pool{DB: cfg.Writer}, r: r, d: cfg.Dialect, q: &cfg.Dialect.Queries, now: now, hub: cfg.Hub, ms: ms}
	if cfg.PrepareStatements {
		db.wc = newStmts(cfg.Writer)
		db.wp.cache = db.wc
		db.r.cache = newStmts(r.DB)
	}
	return db, nil
}

// CloseStatements releases cached prepared statements; backends call it
// before closing their pools.
func (db *DB) CloseStatements() {
	db.wc.close()
	db.r.cache.close()
}

// Migrate applies pending migrations (see store.Store).
func (db *DB) Migrate(ctx context.Context) ([]int, error) {
	applied, err := migrate.Up(ctx, db.w, db.d.Name, db.ms, db.now)
	if err != nil {
		return applied, fmt.Errorf("migrate the %s database: %w", db.d.Name, err)
	}
	// Statements can be prepared once the tables exist.
	for _, c := range []*stmts{db.wc, db.r.cache} {
		if err := c.prepare(ctx, db.q.all()); err != nil {
			return applied, fmt.Errorf("%s store: %w", db.d.Name, err)
		}
	}
	return applied, nil
}

// Now returns the store's current time at storage precision.
func (db *DB) Now() time.Time { return micro(db.now()) }

func micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// ts encodes a time parameter.
func (db *DB) ts(t time.Time) any { return db.d.Time(micro(t)) }

// nts encodes a nullable time parameter.
func (db *DB) nts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return db.ts(t)
}

// nid encodes a nullable id parameter.
func nid(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// txn is a transaction that collects the notifications to send on commit.
type txn struct {
	*sql.Tx
	cache *stmts
	notes []store.Notification
}

func (t *txn) notify(topic, payload string) {
	for _, n := range t.notes {
		if n.Topic == topic && n.Payload == payload {
			return
		}
	}
	t.notes = append(t.notes, store.Notification{Topic: topic, Payload: payload})
}

// inTx runs fn in a write transaction and delivers its notifications.
func (db *DB) inTx(ctx context.Context, fn func(*txn) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t := &txn{Tx: tx, cache: db.wc}
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return err
	}
	if db.d.NotifyTx != nil && len(t.notes) > 0 {
		if err := db.d.NotifyTx(ctx, tx, t.notes); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("notify: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if db.d.NotifyTx == nil && db.hub != nil {
		for _, n := range t.notes {
			db.hub.Publish(n)
		}
	}
	return nil
}

// classify maps a driver error through the dialect.
func (db *DB) classify(err error) error {
	if err == nil || db.d.Classify == nil {
		return err
	}
	return db.d.Classify(err)
}

// rowQuerier is a transaction or a pool.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// getErr wraps the error of reading one record as "format: err", with
// store.ErrNotFound when there was no row; nil stays nil.
func getErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if noRow(err) {
		err = store.ErrNotFound
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// scanRows scans every row of a query's result with scan and closes the
// rows; err is the query's own error, returned as is.
func scanRows[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// tsScan scans a stored time: integer microseconds (SQLite), time.Time
// (PostgreSQL) or NULL.
type tsScan struct{ t *time.Time }

func (s tsScan) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.t = time.Time{}
	case int64:
		*s.t = time.UnixMicro(v).UTC()
	case time.Time:
		*s.t = v.UTC()
	default:
		return fmt.Errorf("scan time: unexpected %T", src)
	}
	return nil
}

// errors.Is helper for "no row".
func noRow(err error) bool { return errors.Is(err, sql.ErrNoRows) }
