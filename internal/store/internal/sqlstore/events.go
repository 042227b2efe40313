package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// AppendJobEvents appends events for the worker holding l (see
// store.JobEvents).
func (db *DB) AppendJobEvents(ctx context.Context, l store.Lease, events []store.NewJobEvent) ([]store.JobEvent, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("append job events: %w", err)
	}
	events, err := store.ValidateEvents(events)
	if err != nil {
		return nil, fmt.Errorf("append job events: %w", err)
	}
	if db.q.EventAppendAtomic != "" {
		return db.appendAtomic(ctx, l, events)
	}
	var out []store.JobEvent
	err = db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		var last, attempt int64
		err := t.QueryRowContext(ctx, db.q.EventReserve, append(leaseArgs(l), int64(len(events)), db.ts(now))...).Scan(&last, &attempt)
		if noRow(err) {
			return db.leaseError(ctx, t, "append job events", l)
		}
		if err != nil {
			return fmt.Errorf("append job events %s: %w", l, err)
		}
		out, err = db.insertEvents(ctx, t, l.JobID, last, attempt, events, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendAtomic appends validated events in one statement.
func (db *DB) appendAtomic(ctx context.Context, l store.Lease, events []store.NewJobEvent) ([]store.JobEvent, error) {
	now := db.Now()
	types, datas := make([]string, len(events)), make([]string, len(events))
	for i, e := range events {
		types[i], datas[i] = string(e.Type), string(e.Data)
	}
	var last, attempt int64
	err := db.wp.QueryRowContext(ctx, db.q.EventAppendAtomic, append(leaseArgs(l), db.ts(now),
		db.d.List(types), db.d.List(datas), db.d.Channel)...).Scan(&last, &attempt)
	if noRow(err) {
		return nil, db.leaseError(ctx, db.wp, "append job events", l)
	}
	if err != nil {
		return nil, fmt.Errorf("append job events %s: %w", l, db.classify(err))
	}
	first := last - int64(len(events)) + 1
	out := make([]store.JobEvent, len(events))
	for i, e := range events {
		out[i] = store.JobEvent{JobID: l.JobID, Seq: first + int64(i), Attempt: int(attempt), Type: e.Type, Data: e.Data, CreatedAt: micro(now)}
	}
	return out, nil
}

// AppendSystemJobEvents appends events without a lease (see
// store.JobEvents).
func (db *DB) AppendSystemJobEvents(ctx context.Context, jobID int64, events []store.NewJobEvent) ([]store.JobEvent, error) {
	events, err := store.ValidateEvents(events)
	if err != nil {
		return nil, fmt.Errorf("append job events: %w", err)
	}
	var out []store.JobEvent
	err = db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		var last, attempt int64
		err := t.QueryRowContext(ctx, db.q.EventReserveSystem, jobID, int64(len(events)), db.ts(now)).Scan(&last, &attempt)
		if noRow(err) {
			return fmt.Errorf("append job events: job %d: %w", jobID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("append job events to job %d: %w", jobID, err)
		}
		out, err = db.insertEvents(ctx, t, jobID, last, attempt, events, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertEvents writes events numbered last-len(events)+1 … last; the
// reserving UPDATE holds the job's row lock, so numbers never collide.
func (db *DB) insertEvents(ctx context.Context, t *txn, jobID, last, attempt int64, events []store.NewJobEvent, now time.Time) ([]store.JobEvent, error) {
	first := last - int64(len(events)) + 1
	out := make([]store.JobEvent, len(events))
	for i, e := range events {
		seq := first + int64(i)
		if _, err := t.ExecContext(ctx, db.q.EventInsert, jobID, seq, attempt, e.Type, string(e.Data), db.ts(now)); err != nil {
			return nil, fmt.Errorf("append event %d to job %d: %w", seq, jobID, err)
		}
		out[i] = store.JobEvent{JobID: jobID, Seq: seq, Attempt: int(attempt), Type: e.Type, Data: e.Data, CreatedAt: now}
	}
	t.notify(store.JobTopic(jobID), "")
	return out, nil
}

// ReadJobEvents reads a job's log after a sequence number (see
// store.JobEvents).
func (db *DB) ReadJobEvents(ctx context.Context, jobID int64, after int64, limit int) ([]store.JobEvent, error) {
	rows, err := db.r.QueryContext(ctx, db.q.EventRead, jobID, after, int64(store.ListLimit(limit)))
	if err != nil {
		return nil, fmt.Errorf("read events of job %d: %w", jobID, err)
	}
	defer rows.Close()
	var out []store.JobEvent
	for rows.Next() {
		var (
			e       store.JobEvent
			attempt int64
			data    []byte
		)
		if err := rows.Scan(&e.JobID, &e.Seq, &attempt, &e.Type, &data, tsScan{&e.CreatedAt}); err != nil {
			return nil, fmt.Errorf("read events of job %d: %w", jobID, err)
		}
		e.Attempt, e.Data = int(attempt), json.RawMessage(data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events of job %d: %w", jobID, err)
	}
	if len(out) == 0 {
		if _, err := db.GetJob(ctx, jobID); err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
	}
	return out, nil
}
