package sqlstore

import (
	"context"
	"fmt"

	"github.com/maestro-run/maestro/internal/store"
)

// SaveRunState replaces a job's run state (see store.RunStates).
func (db *DB) SaveRunState(ctx context.Context, l store.Lease, movement string, data []byte) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("save run state: %w", err)
	}
	if err := store.ValidateRunState(movement, data); err != nil {
		return fmt.Errorf("save run state: %w", err)
	}
	return db.fencedWrite(ctx, "save run state", l, db.q.RunStateSave, movement, data)
}

// RunState returns a job's latest run state (see store.RunStates).
func (db *DB) RunState(ctx context.Context, jobID int64) (store.RunState, error) {
	var rs store.RunState
	var attempt int64
	err := db.r.QueryRowContext(ctx, db.q.RunStateGet, jobID).Scan(&rs.JobID, &attempt, &rs.Movement, &rs.Data, tsScan{&rs.UpdatedAt})
	rs.Attempt = int(attempt)
	return rs, getErr(err, "read the run state of job %d", jobID)
}

// fencedWrite runs query (parameters: the lease's, now, then args; one
// row back when the lease holds the job) in a transaction; a lease that
// does not hold the job is diagnosed as leaseError does.
func (db *DB) fencedWrite(ctx context.Context, what string, l store.Lease, query string, args ...any) error {
	return db.inTx(ctx, func(t *txn) error {
		var id int64
		err := t.QueryRowContext(ctx, query, append(append(leaseArgs(l), db.ts(db.Now())), args...)...).Scan(&id)
		if noRow(err) {
			return db.leaseError(ctx, t, what, l)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, l, err)
		}
		return nil
	})
}
