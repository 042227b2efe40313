package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// LiveSessionColumns are the columns the live-session queries return.
const LiveSessionColumns = "id, instance, address, created_at, heartbeat_at, ended_at, end_reason"

// LiveQueries is the SQL of the live-session ownership records (migration
// 007), the same on both dialects but for PostgreSQL's parameter casts.
type LiveQueries struct {
	Insert    string // id, instance, address, now → LiveSessionColumns
	Heartbeat string // instance, now
	End       string // id, instance, now, reason → LiveSessionColumns
	EndStale  string // before, now, reason → LiveSessionColumns
	Get       string // id → LiveSessionColumns
	List      string // open (0 or 1), instance ('' for all), limit → LiveSessionColumns
}

func (l LiveQueries) all() []string {
	return []string{l.Insert, l.Heartbeat, l.End, l.EndStale, l.Get, l.List}
}

// WithLiveSessions returns q with the live-session queries; typed adds the
// parameter casts pgx needs.
func WithLiveSessions(q Queries, typed bool) Queries {
	p := func(n int, typ string) string {
		if typed {
			return fmt.Sprintf("$%d::%s", n, typ)
		}
		return fmt.Sprintf("$%d", n)
	}
	ret := ` RETURNING ` + LiveSessionColumns
	q.Live = LiveQueries{
		Insert: `INSERT INTO live_sessions (id, instance, address, created_at, heartbeat_at) VALUES (` +
			p(1, "text") + `, ` + p(2, "text") + `, ` + p(3, "text") + `, ` + p(4, "timestamptz") + `, ` + p(4, "timestamptz") + `)` + ret,
		Heartbeat: `UPDATE live_sessions SET heartbeat_at = ` + p(2, "timestamptz") +
			` WHERE instance = ` + p(1, "text") + ` AND ended_at IS NULL`,
		End: `UPDATE live_sessions SET ended_at = ` + p(3, "timestamptz") + `, end_reason = ` + p(4, "text") +
			` WHERE id = ` + p(1, "text") + ` AND instance = ` + p(2, "text") + ` AND ended_at IS NULL` + ret,
		EndStale: `UPDATE live_sessions SET ended_at = ` + p(2, "timestamptz") + `, end_reason = ` + p(3, "text") +
			` WHERE ended_at IS NULL AND heartbeat_at < ` + p(1, "timestamptz") + ret,
		Get: `SELECT ` + LiveSessionColumns + ` FROM live_sessions WHERE id = ` + p(1, "text"),
		List: `SELECT ` + LiveSessionColumns + ` FROM live_sessions WHERE (` + p(1, "integer") + ` = 0 OR ended_at IS NULL)
			AND (` + p(2, "text") + ` = '' OR instance = ` + p(2, "text") + `)
			ORDER BY created_at DESC, id DESC LIMIT ` + p(3, "bigint"),
	}
	return q
}

func scanLiveSession(s scanner) (store.LiveSession, error) {
	var out store.LiveSession
	err := s.Scan(&out.ID, &out.Instance, &out.Address, tsScan{&out.CreatedAt}, tsScan{&out.HeartbeatAt},
		tsScan{&out.EndedAt}, &out.EndReason)
	return out, err
}

// OwnLiveSession records a session's owner (see store.LiveSessions).
func (db *DB) OwnLiveSession(ctx context.Context, id, instance, address string) (store.LiveSession, error) {
	if err := store.ValidateLiveSession(id, instance, address); err != nil {
		return store.LiveSession{}, fmt.Errorf("record live session owner: %w", err)
	}
	s, err := scanLiveSession(db.wp.QueryRowContext(ctx, db.q.Live.Insert, id, instance, address, db.ts(db.Now())))
	if err != nil {
		return store.LiveSession{}, fmt.Errorf("record the owner of live session %q: %w", id, db.classify(err))
	}
	return s, nil
}

// HeartbeatLiveSessions refreshes an owner's sessions (see
// store.LiveSessions).
func (db *DB) HeartbeatLiveSessions(ctx context.Context, instance string) (int64, error) {
	res, err := db.wp.ExecContext(ctx, db.q.Live.Heartbeat, instance, db.ts(db.Now()))
	if err != nil {
		return 0, fmt.Errorf("heartbeat the live sessions of %q: %w", instance, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("heartbeat the live sessions of %q: %w", instance, err)
	}
	return n, nil
}

// EndLiveSession marks an owner's session ended (see store.LiveSessions).
func (db *DB) EndLiveSession(ctx context.Context, id, instance, reason string) (store.LiveSession, error) {
	s, err := scanLiveSession(db.wp.QueryRowContext(ctx, db.q.Live.End, id, instance, db.ts(db.Now()), store.TruncateError(reason)))
	return s, getErr(err, "end live session %q of %q", id, instance)
}

// EndStaleLiveSessions ends the sessions of dead owners (see
// store.LiveSessions).
func (db *DB) EndStaleLiveSessions(ctx context.Context, before time.Time, reason string) ([]store.LiveSession, error) {
	rows, err := db.wp.QueryContext(ctx, db.q.Live.EndStale, db.ts(before), db.ts(db.Now()), store.TruncateError(reason))
	out, err := scanRows(rows, err, scanLiveSession)
	if err != nil {
		return nil, fmt.Errorf("end the live sessions of dead owners: %w", err)
	}
	slices.SortFunc(out, func(a, b store.LiveSession) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// GetLiveSession returns one ownership record (see store.LiveSessions).
func (db *DB) GetLiveSession(ctx context.Context, id string) (store.LiveSession, error) {
	s, err := scanLiveSession(db.r.QueryRowContext(ctx, db.q.Live.Get, id))
	return s, getErr(err, "get live session %q", id)
}

// ListLiveSessions lists ownership records newest first (see
// store.LiveSessions).
func (db *DB) ListLiveSessions(ctx context.Context, f store.LiveSessionFilter) ([]store.LiveSession, error) {
	open := 0
	if f.Open {
		open = 1
	}
	rows, err := db.r.QueryContext(ctx, db.q.Live.List, open, f.Instance, int64(store.ListLimit(f.Limit)))
	out, err := scanRows(rows, err, scanLiveSession)
	if err != nil {
		return nil, fmt.Errorf("list live sessions: %w", err)
	}
	return out, nil
}
