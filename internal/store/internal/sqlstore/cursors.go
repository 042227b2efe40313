package sqlstore

import (
	"context"
	"fmt"

	"github.com/maestro-run/maestro/internal/store"
)

// CursorQueries is the SQL of the job event cursors (migration 011), the
// same on both dialects but for PostgreSQL's parameter casts.
type CursorQueries struct {
	Get     string // job_id → seq
	List    string // after job_id, limit → job_id, seq
	Advance string // job_id, seq
}

func (q CursorQueries) all() []string { return []string{q.Get, q.List, q.Advance} }

// WithJobEventCursors returns q with the job event cursor queries; typed
// adds the parameter casts pgx needs.
func WithJobEventCursors(q Queries, typed bool) Queries {
	p := func(n int) string {
		if typed {
			return fmt.Sprintf("$%d::bigint", n)
		}
		return fmt.Sprintf("$%d", n)
	}
	q.Cursor = CursorQueries{
		Get:  `SELECT seq FROM job_event_cursors WHERE job_id = ` + p(1),
		List: `SELECT job_id, seq FROM job_event_cursors WHERE job_id > ` + p(1) + ` ORDER BY job_id LIMIT ` + p(2),
		// From the job's row: a job deleted meanwhile inserts nothing
		// (rather than failing the foreign key). The condition keeps a
		// cursor from moving back when two processes race.
		Advance: `INSERT INTO job_event_cursors (job_id, seq) SELECT id, ` + p(2) + ` FROM jobs WHERE id = ` + p(1) + `
			ON CONFLICT (job_id) DO UPDATE SET seq = excluded.seq WHERE job_event_cursors.seq < excluded.seq`,
	}
	return q
}

// JobEventCursor returns a job's publish cursor (see store.JobEventCursors).
func (db *DB) JobEventCursor(ctx context.Context, jobID int64) (int64, error) {
	var seq int64
	err := db.r.QueryRowContext(ctx, db.q.Cursor.Get, jobID).Scan(&seq)
	if noRow(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the event cursor of job %d: %w", jobID, db.classify(err))
	}
	return seq, nil
}

// ListJobEventCursors returns a page of publish cursors (see
// store.JobEventCursors).
func (db *DB) ListJobEventCursors(ctx context.Context, afterJobID int64, limit int) ([]store.JobEventCursor, error) {
	rows, err := db.r.QueryContext(ctx, db.q.Cursor.List, afterJobID, int64(store.ListLimit(limit)))
	if err != nil {
		return nil, fmt.Errorf("list job event cursors: %w", db.classify(err))
	}
	defer rows.Close()
	var out []store.JobEventCursor
	for rows.Next() {
		var c store.JobEventCursor
		if err := rows.Scan(&c.JobID, &c.Seq); err != nil {
			return nil, fmt.Errorf("list job event cursors: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list job event cursors: %w", db.classify(err))
	}
	return out, nil
}

// AdvanceJobEventCursor moves a job's publish cursor forward (see
// store.JobEventCursors).
func (db *DB) AdvanceJobEventCursor(ctx context.Context, jobID, seq int64) error {
	if seq < 0 {
		return fmt.Errorf("advance the event cursor of job %d: %w", jobID, &store.FieldError{Field: "seq", Message: fmt.Sprintf("expected 0 or more, found %d", seq)})
	}
	if _, err := db.wp.ExecContext(ctx, db.q.Cursor.Advance, jobID, seq); err != nil {
		return fmt.Errorf("advance the event cursor of job %d: %w", jobID, db.classify(err))
	}
	return nil
}
