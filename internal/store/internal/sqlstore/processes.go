package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// settingColumns and processColumns are the columns the queries of
// migration 010 return.
const (
	settingColumns = "key, value, updated_by, updated_at"
	processColumns = "name, kind, instance, address, host, pid, artifacts, started_at, heartbeat_at, stopped_at"
)

// ProcessQueries is the SQL of the settings and process records (migration
// 010), the same on both dialects but for PostgreSQL's parameter casts.
type ProcessQueries struct {
	SettingInit string // key, value, by, now
	SettingPut  string // key, value, by, now → settingColumns
	SettingGet  string // key → settingColumns
	Start       string // name, kind, instance, address, artifacts, now, staleBefore, host, pid → processColumns
	Get         string // name → processColumns
	Heartbeat   string // name, instance, now
	Stop        string // name, instance, now
	List        string // staleBefore → processColumns
}

func (q ProcessQueries) all() []string {
	return []string{q.SettingInit, q.SettingPut, q.SettingGet, q.Start, q.Get, q.Heartbeat, q.Stop, q.List}
}

// WithProcesses returns q with the settings and process queries; typed
// adds the parameter casts pgx needs.
func WithProcesses(q Queries, typed bool) Queries {
	p := func(n int, typ string) string {
		if typed {
			return fmt.Sprintf("$%d::%s", n, typ)
		}
		return fmt.Sprintf("$%d", n)
	}
	setting := `INSERT INTO settings (key, value, updated_by, updated_at) VALUES (` +
		p(1, "text") + `, ` + p(2, "text") + `, ` + p(3, "text") + `, ` + p(4, "timestamptz") + `) ON CONFLICT (key) DO `
	q.Proc = ProcessQueries{
		SettingInit: setting + `NOTHING`,
		SettingPut: setting + `UPDATE SET value = excluded.value, updated_by = excluded.updated_by, updated_at = excluded.updated_at
			RETURNING ` + settingColumns,
		SettingGet: `SELECT ` + settingColumns + ` FROM settings WHERE key = ` + p(1, "text"),
		Start: `INSERT INTO processes (name, kind, instance, address, host, pid, artifacts, started_at, heartbeat_at) VALUES (` +
			p(1, "text") + `, ` + p(2, "text") + `, ` + p(3, "text") + `, ` + p(4, "text") + `, ` + p(8, "text") + `, ` + p(9, "bigint") + `, ` +
			p(5, "text") + `, ` + p(6, "timestamptz") + `, ` + p(6, "timestamptz") + `)
			ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, instance = excluded.instance, address = excluded.address,
				host = excluded.host, pid = excluded.pid, artifacts = excluded.artifacts, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, stopped_at = NULL
			WHERE processes.stopped_at IS NOT NULL OR processes.heartbeat_at < ` + p(7, "timestamptz") + `
			RETURNING ` + processColumns,
		Get: `SELECT ` + processColumns + ` FROM processes WHERE name = ` + p(1, "text"),
		Heartbeat: `UPDATE processes SET heartbeat_at = ` + p(3, "timestamptz") +
			` WHERE name = ` + p(1, "text") + ` AND instance = ` + p(2, "text") + ` AND stopped_at IS NULL`,
		Stop: `UPDATE processes SET stopped_at = ` + p(3, "timestamptz") +
			` WHERE name = ` + p(1, "text") + ` AND instance = ` + p(2, "text") + ` AND stopped_at IS NULL`,
		List: `SELECT ` + processColumns + ` FROM processes WHERE stopped_at IS NULL AND heartbeat_at >= ` + p(1, "timestamptz") +
			` ORDER BY name`,
	}
	return q
}

func scanSetting(s scanner) (store.Setting, error) {
	var out store.Setting
	err := s.Scan(&out.Key, &out.Value, &out.UpdatedBy, tsScan{&out.UpdatedAt})
	return out, err
}

func scanProcess(s scanner) (store.Process, error) {
	var out store.Process
	var pid int64
	err := s.Scan(&out.Name, &out.Kind, &out.Instance, &out.Address, &out.Host, &pid, &out.Artifacts,
		tsScan{&out.StartedAt}, tsScan{&out.HeartbeatAt}, tsScan{&out.StoppedAt})
	out.PID = int(pid)
	return out, err
}

// InitSetting records a setting unless one is recorded (see
// store.Processes).
func (db *DB) InitSetting(ctx context.Context, key, value, by string) (store.Setting, error) {
	if err := store.ValidateSetting(key, value, by); err != nil {
		return store.Setting{}, fmt.Errorf("record setting %q: %w", key, err)
	}
	if _, err := db.wp.ExecContext(ctx, db.q.Proc.SettingInit, key, value, by, db.ts(db.Now())); err != nil {
		return store.Setting{}, fmt.Errorf("record setting %q: %w", key, db.classify(err))
	}
	// Read from the writer: the row just written, or the one another
	// process wrote first.
	s, err := scanSetting(db.wp.QueryRowContext(ctx, db.q.Proc.SettingGet, key))
	return s, getErr(err, "read setting %q", key)
}

// PutSetting records a setting, replacing any earlier value (see
// store.Processes).
func (db *DB) PutSetting(ctx context.Context, key, value, by string) (store.Setting, error) {
	if err := store.ValidateSetting(key, value, by); err != nil {
		return store.Setting{}, fmt.Errorf("record setting %q: %w", key, err)
	}
	s, err := scanSetting(db.wp.QueryRowContext(ctx, db.q.Proc.SettingPut, key, value, by, db.ts(db.Now())))
	if err != nil {
		return store.Setting{}, fmt.Errorf("record setting %q: %w", key, db.classify(err))
	}
	return s, nil
}

// GetSetting returns one setting (see store.Processes).
func (db *DB) GetSetting(ctx context.Context, key string) (store.Setting, error) {
	s, err := scanSetting(db.r.QueryRowContext(ctx, db.q.Proc.SettingGet, key))
	return s, getErr(err, "read setting %q", key)
}

// StartProcess records a process under its name unless a live process
// holds it (see store.Processes).
func (db *DB) StartProcess(ctx context.Context, p store.Process, staleBefore time.Time) (store.Process, error) {
	if err := store.ValidateProcess(p); err != nil {
		return store.Process{}, fmt.Errorf("record process %q: %w", p.Name, err)
	}
	got, err := scanProcess(db.wp.QueryRowContext(ctx, db.q.Proc.Start, p.Name, p.Kind, p.Instance, p.Address, p.Artifacts,
		db.ts(db.Now()), db.ts(staleBefore), p.Host, int64(p.PID)))
	if err == nil {
		return got, nil
	}
	if !noRow(err) {
		return store.Process{}, fmt.Errorf("record process %q: %w", p.Name, db.classify(err))
	}
	// The upsert's condition refused: a live process holds the name.
	holder, err := scanProcess(db.wp.QueryRowContext(ctx, db.q.Proc.Get, p.Name))
	if err != nil {
		return store.Process{}, getErr(err, "read process %q", p.Name)
	}
	return holder, fmt.Errorf("record process %q: the name is held by a running %s: %w", p.Name, holder.Kind, store.ErrConflict)
}

// HeartbeatProcess refreshes a process's heartbeat (see store.Processes).
func (db *DB) HeartbeatProcess(ctx context.Context, name, instance string) error {
	return db.execOne(ctx, db.q.Proc.Heartbeat, "heartbeat process %q", name, instance)
}

// StopProcess marks a process stopped (see store.Processes).
func (db *DB) StopProcess(ctx context.Context, name, instance string) error {
	return db.execOne(ctx, db.q.Proc.Stop, "record process %q stopped", name, instance)
}

func (db *DB) execOne(ctx context.Context, query, what, name, instance string) error {
	res, err := db.wp.ExecContext(ctx, query, name, instance, db.ts(db.Now()))
	if err != nil {
		return fmt.Errorf(what+": %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf(what+": %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf(what+": its record no longer holds the name: %w", name, store.ErrNotFound)
	}
	return nil
}

// ListProcesses lists the live processes (see store.Processes).
func (db *DB) ListProcesses(ctx context.Context, staleBefore time.Time) ([]store.Process, error) {
	rows, err := db.r.QueryContext(ctx, db.q.Proc.List, db.ts(staleBefore))
	out, err := scanRows(rows, err, scanProcess)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}
