package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

func scanJob(s scanner) (store.Job, error) {
	var (
		j                        store.Job
		taskID, parentID         sql.NullInt64
		state                    string
		payload                  []byte
		leaseOwner, checkpoint   sql.NullString
		attempt, maxAttempts     int64
		priority                 int64
		scheduled, attempted     time.Time
		expires, heartbeat       time.Time
		created, updated, finish time.Time
	)
	err := s.Scan(&j.ID, &taskID, &parentID, &j.Piece, &state, &j.Profile, &j.TaskClass, &priority, &payload,
		&attempt, &maxAttempts, tsScan{&scheduled}, tsScan{&attempted}, &leaseOwner, tsScan{&expires}, tsScan{&heartbeat},
		&j.Movement, &checkpoint, &j.WaitReason, &j.Result, &j.Error, &j.LastSeq, tsScan{&created}, tsScan{&updated}, tsScan{&finish})
	if err != nil {
		return j, err
	}
	j.TaskID, j.ParentJobID = taskID.Int64, parentID.Int64
	j.State = store.State(state)
	j.Priority, j.Attempt, j.MaxAttempts = int(priority), int(attempt), int(maxAttempts)
	j.Payload = json.RawMessage(payload)
	j.LeaseOwner = leaseOwner.String
	if checkpoint.Valid {
		j.Checkpoint = json.RawMessage(checkpoint.String)
	}
	j.ScheduledAt, j.AttemptedAt, j.LeaseExpiresAt, j.HeartbeatAt = scheduled, attempted, expires, heartbeat
	j.CreatedAt, j.UpdatedAt, j.FinishedAt = created, updated, finish
	return j, nil
}

func scanJobs(rows *sql.Rows, err error) ([]store.Job, error) {
	return scanRows(rows, err, scanJob)
}

// scanLease scans a job's lease (id, attempt, lease_owner) into a Job that
// has nothing else.
func scanLease(s scanner) (store.Job, error) {
	var (
		j       store.Job
		attempt int64
	)
	err := s.Scan(&j.ID, &attempt, &j.LeaseOwner)
	j.Attempt = int(attempt)
	return j, err
}

// status appends the status event of a transition the job just made (its
// LastSeq was reserved by the transition's UPDATE) and queues the
// notifications.
func (db *DB) status(ctx context.Context, t *txn, j store.Job, ev store.StatusEvent) error {
	ev.State = j.State
	ev.Attempt = j.Attempt
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode status event: %w", err)
	}
	if _, err := t.ExecContext(ctx, db.q.EventInsert, j.ID, j.LastSeq, int64(j.Attempt), store.JobEventStatus, string(data), db.ts(j.UpdatedAt)); err != nil {
		return fmt.Errorf("append status event of job %d: %w", j.ID, err)
	}
	t.notify(store.JobTopic(j.ID), "")
	if j.State == store.StateQueued {
		t.notify(store.TopicJobs, "")
	}
	return nil
}

// enqueue inserts a validated job.
func (db *DB) enqueue(ctx context.Context, t *txn, nj store.NewJob, now time.Time) (store.Job, error) {
	runAt := now
	if !nj.RunAt.IsZero() {
		runAt = micro(nj.RunAt)
	}
	j, err := scanJob(t.QueryRowContext(ctx, db.q.JobInsert, nid(nj.TaskID), nid(nj.ParentJobID), nj.Piece, nj.Profile,
		nj.TaskClass, int64(nj.Priority), string(nj.Payload), int64(nj.MaxAttempts), db.ts(runAt), db.ts(now)))
	if err != nil {
		return j, db.enqueueError(nj, err)
	}
	return j, db.status(ctx, t, j, store.StatusEvent{})
}

// Enqueue stores a queued job (see store.Jobs).
func (db *DB) Enqueue(ctx context.Context, nj store.NewJob) (store.Job, error) {
	nj, err := nj.Validate()
	if err != nil {
		return store.Job{}, fmt.Errorf("enqueue: %w", err)
	}
	if db.q.JobInsertAtomic != "" && nj.ParentJobID == 0 {
		return db.enqueueAtomic(ctx, nj, db.Now())
	}
	var j store.Job
	err = db.inTx(ctx, func(t *txn) error {
		j, err = db.enqueue(ctx, t, nj, db.Now())
		return err
	})
	return j, err
}

// enqueueAtomic is enqueue in one statement (JobInsertAtomic): the insert,
// its status event and its notifications, one round trip.
func (db *DB) enqueueAtomic(ctx context.Context, nj store.NewJob, now time.Time) (store.Job, error) {
	runAt := now
	if !nj.RunAt.IsZero() {
		runAt = micro(nj.RunAt)
	}
	data, err := json.Marshal(store.StatusEvent{State: store.StateQueued})
	if err != nil {
		return store.Job{}, fmt.Errorf("enqueue: encode status event: %w", err)
	}
	j, err := scanJob(db.wp.QueryRowContext(ctx, db.q.JobInsertAtomic, nid(nj.TaskID), nid(nj.ParentJobID), nj.Piece, nj.Profile,
		nj.TaskClass, int64(nj.Priority), string(nj.Payload), int64(nj.MaxAttempts), db.ts(runAt), db.ts(now), string(data), db.d.Channel))
	return j, db.enqueueError(nj, err)
}

// enqueueError says what an insert of nj failed on (nil: it did not).
func (db *DB) enqueueError(nj store.NewJob, err error) error {
	if err == nil {
		return nil
	}
	err = db.classify(err)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("enqueue: task %d or parent job %d does not exist: %w", nj.TaskID, nj.ParentJobID, err)
	}
	return fmt.Errorf("enqueue: %w", err)
}

// Claim hands queued jobs to a worker under a lease (see store.Jobs).
func (db *DB) Claim(ctx context.Context, p store.ClaimParams) ([]store.Job, error) {
	p, err := p.Validate()
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	owners := p.Owners()
	now := db.Now()
	args := []any{db.d.List(owners), db.ts(now.Add(p.LeaseFor)), db.ts(now), db.d.List(p.Profiles), db.d.List(p.TaskClasses)}
	var jobs []store.Job
	if query := db.claimAtomic(p.Start); query != "" {
		enc := make([]string, len(owners))
		for i, o := range owners {
			b, err := json.Marshal(o)
			if err != nil {
				return nil, fmt.Errorf("claim: encode worker %q: %w", o, err)
			}
			enc[i] = string(b)
		}
		jobs, err = scanJobs(db.wp.QueryContext(ctx, query, append(args, db.d.List(enc), db.d.Channel)...))
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		sortClaimed(jobs)
		return jobs, nil
	}
	query := db.q.JobClaim
	if p.Start {
		query = db.q.JobClaimStart
	}
	err = db.inTx(ctx, func(t *txn) error {
		jobs, err = scanJobs(t.QueryContext(ctx, query, args...))
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		sortClaimed(jobs)
		for _, j := range jobs {
			if err := db.status(ctx, t, j, store.StatusEvent{Worker: j.LeaseOwner}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// claimAtomic is the one-statement claim query (empty: the transaction
// path), the one that also starts the jobs when start is set.
func (db *DB) claimAtomic(start bool) string {
	if start {
		return db.q.JobClaimStartAtomic
	}
	return db.q.JobClaimAtomic
}

// sortClaimed puts claimed jobs in claim order.
func sortClaimed(jobs []store.Job) {
	slices.SortFunc(jobs, func(a, b store.Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.ID, b.ID))
	})
}

// atomicStatus runs a one-statement fenced transition (query appends the
// status event and notifies itself) with the status event the transition
// records. found is false when no row matched.
func (db *DB) atomicStatus(ctx context.Context, what string, l store.Lease, query string, ev store.StatusEvent, args ...any) (j store.Job, found bool, err error) {
	ev.Attempt, ev.Worker = l.Attempt, l.Owner
	data, err := json.Marshal(ev)
	if err != nil {
		return j, false, fmt.Errorf("%s %s: encode status event: %w", what, l, err)
	}
	j, err = scanJob(db.wp.QueryRowContext(ctx, query, append(args, string(data), db.d.Channel)...))
	if noRow(err) {
		return j, false, nil
	}
	if err != nil {
		return j, false, fmt.Errorf("%s %s: %w", what, l, db.classify(err))
	}
	return j, true, nil
}

// fenced runs a lease-fenced transition: query must return the job (JobColumns)
// or no row when the lease does not hold.
func (db *DB) fenced(ctx context.Context, t *txn, what string, l store.Lease, query string, args ...any) (store.Job, error) {
	j, err := scanJob(t.QueryRowContext(ctx, query, args...))
	if err == nil {
		return j, nil
	}
	if !noRow(err) {
		return j, fmt.Errorf("%s %s: %w", what, l, db.classify(err))
	}
	return j, db.leaseError(ctx, t, what, l)
}

// leaseError explains why a fenced call matched no row.
func (db *DB) leaseError(ctx context.Context, t rowQuerier, what string, l store.Lease) error {
	cur, err := scanJob(t.QueryRowContext(ctx, db.q.JobGet, l.JobID))
	if noRow(err) {
		return fmt.Errorf("%s: job %d: %w", what, l.JobID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, l, err)
	}
	if cur.Attempt == l.Attempt && cur.LeaseOwner == l.Owner && cur.State.Active() {
		return fmt.Errorf("%s %s: the job is %s: %w", what, l, cur.State, store.ErrInvalidTransition)
	}
	return fmt.Errorf("%s %s: the job is now %s at attempt %d (owner %q): %w", what, l, cur.State, cur.Attempt, cur.LeaseOwner, store.ErrLeaseLost)
}

func leaseArgs(l store.Lease) []any { return []any{l.JobID, int64(l.Attempt), l.Owner} }

// Start moves a claimed job to running (see store.Jobs).
func (db *DB) Start(ctx context.Context, l store.Lease) (store.Job, error) {
	if err := l.Validate(); err != nil {
		return store.Job{}, fmt.Errorf("start: %w", err)
	}
	if db.q.JobStartAtomic != "" {
		j, ok, err := db.atomicStatus(ctx, "start", l, db.q.JobStartAtomic, store.StatusEvent{State: store.StateRunning},
			append(leaseArgs(l), db.ts(db.Now()))...)
		if err == nil && !ok {
			err = db.leaseError(ctx, db.wp, "start", l)
		}
		return j, err
	}
	return db.fencedStatus(ctx, "start", l, db.q.JobStart, store.StatusEvent{Worker: l.Owner})
}

// fencedStatus runs query, the fenced statement of the lifecycle call op
// (arguments: the lease and now), and appends the job's status event ev,
// in one transaction.
func (db *DB) fencedStatus(ctx context.Context, op string, l store.Lease, query string, ev store.StatusEvent) (store.Job, error) {
	var j store.Job
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		j, err = db.fenced(ctx, t, op, l, query, append(leaseArgs(l), db.ts(db.Now()))...)
		if err != nil {
			return err
		}
		return db.status(ctx, t, j, ev)
	})
	return j, err
}

// Heartbeat extends a lease (see store.Jobs).
func (db *DB) Heartbeat(ctx context.Context, l store.Lease, extend time.Duration) (time.Time, error) {
	if err := l.Validate(); err != nil {
		return time.Time{}, fmt.Errorf("heartbeat: %w", err)
	}
	if err := store.LeaseDuration("extend", extend); err != nil {
		return time.Time{}, fmt.Errorf("heartbeat: %w", err)
	}
	var until time.Time
	err := db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		err := t.QueryRowContext(ctx, db.q.JobHeartbeat, append(leaseArgs(l), db.ts(now), db.ts(now.Add(extend)))...).Scan(tsScan{&until})
		if noRow(err) {
			return db.leaseError(ctx, t, "heartbeat", l)
		}
		if err != nil {
			return fmt.Errorf("heartbeat %s: %w", l, err)
		}
		return nil
	})
	return until, err
}

// Checkpoint records engine progress (see store.Jobs).
func (db *DB) Checkpoint(ctx context.Context, l store.Lease, movement string, data []byte) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := store.ValidateCheckpoint(movement, data); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	var cp any
	if len(data) > 0 {
		cp = string(data)
	}
	return db.fencedWrite(ctx, "checkpoint", l, db.q.JobCheckpoint, movement, cp)
}

// SetPiece records the piece a job runs (see store.Jobs).
func (db *DB) SetPiece(ctx context.Context, l store.Lease, piece string) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("set piece: %w", err)
	}
	if err := store.ValidateJobPiece(piece); err != nil {
		return fmt.Errorf("set piece: %w", err)
	}
	return db.fencedWrite(ctx, "set piece", l, db.q.JobSetPiece, piece)
}

// Complete ends a job as succeeded (see store.Jobs).
func (db *DB) Complete(ctx context.Context, l store.Lease, result string) (store.Job, error) {
	if err := l.Validate(); err != nil {
		return store.Job{}, fmt.Errorf("complete: %w", err)
	}
	if err := store.ValidateResult(result); err != nil {
		return store.Job{}, fmt.Errorf("complete: %w", err)
	}
	if db.q.JobCompleteAtomic != "" {
		// A job with a parent may resume the parent: that needs the
		// transaction path (no row here), as does the diagnosis of a
		// lease that does not hold.
		j, ok, err := db.atomicStatus(ctx, "complete", l, db.q.JobCompleteAtomic, store.StatusEvent{State: store.StateSucceeded},
			append(leaseArgs(l), db.ts(db.Now()), result)...)
		if err != nil || ok {
			return j, err
		}
	}
	return db.completeTx(ctx, l, result)
}

// completeTx completes a valid lease's job in a transaction: the path of a
// job with a parent (which it may resume) and of a lease that does not
// hold (diagnosed).
func (db *DB) completeTx(ctx context.Context, l store.Lease, result string) (store.Job, error) {
	var j store.Job
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		j, err = db.completeIn(ctx, t, l, result, db.Now())
		return err
	})
	return j, err
}

// completeIn completes a job inside t: the fenced update, its status
// event, and what a terminal state sets off.
func (db *DB) completeIn(ctx context.Context, t *txn, l store.Lease, result string, now time.Time) (store.Job, error) {
	j, err := db.fenced(ctx, t, "complete", l, db.q.JobComplete, append(leaseArgs(l), db.ts(now), result)...)
	if err != nil {
		return j, err
	}
	if err := db.status(ctx, t, j, store.StatusEvent{Worker: l.Owner}); err != nil {
		return j, err
	}
	return j, db.afterTerminal(ctx, t, j)
}

// StartMany starts several claimed jobs (see store.Jobs): on PostgreSQL
// every item it can in one statement, on SQLite in one transaction; the
// items left (a lease that does not hold) go through Start, which says why.
func (db *DB) StartMany(ctx context.Context, leases []store.Lease) []store.JobOutcome {
	out := make([]store.JobOutcome, len(leases))
	todo := make([]int, 0, len(leases))
	for i, l := range leases {
		if err := l.Validate(); err != nil {
			out[i].Err = fmt.Errorf("start: %w", err)
		} else {
			todo = append(todo, i)
		}
	}
	switch {
	case len(todo) < 2: // the single call below
	case db.q.JobStartManyAtomic != "":
		n := len(todo)
		idList, attempts := make([]int64, n), make([]int64, n)
		owners, datas := make([]string, n), make([]string, n)
		for k, i := range todo {
			l := leases[i]
			data, _ := json.Marshal(store.StatusEvent{State: store.StateRunning, Attempt: l.Attempt, Worker: l.Owner})
			idList[k], attempts[k], owners[k], datas[k] = l.JobID, int64(l.Attempt), l.Owner, string(data)
		}
		jobs, err := scanJobs(db.wp.QueryContext(ctx, db.q.JobStartManyAtomic, idList, attempts, db.d.List(owners),
			db.d.List(datas), db.ts(db.Now()), db.d.Channel))
		if err == nil { // else the single calls report the error per item
			todo = takeDone(todo, out, jobs, func(i int) store.Lease { return leases[i] })
		}
	default:
		todo = db.manyTx(ctx, todo, out, func(t *txn, i int, now time.Time) (store.Job, error) {
			l := leases[i]
			j, err := db.fenced(ctx, t, "start", l, db.q.JobStart, append(leaseArgs(l), db.ts(now))...)
			if err != nil {
				return j, err
			}
			return j, db.status(ctx, t, j, store.StatusEvent{Worker: l.Owner})
		})
	}
	for _, i := range todo {
		out[i].Job, out[i].Err = db.Start(ctx, leases[i])
	}
	return out
}

// takeDone records the jobs a one-statement batch returned as the outcomes
// of the items whose lease they match (id, attempt and owner) and returns
// the items left. A lease listed twice is taken once (the single call
// reports the second).
func takeDone(todo []int, out []store.JobOutcome, jobs []store.Job, lease func(int) store.Lease) []int {
	done := make(map[store.Lease]store.Job, len(jobs))
	for _, j := range jobs {
		done[j.Lease()] = j
	}
	left := todo[:0]
	for _, i := range todo {
		if j, ok := done[lease(i)]; ok {
			out[i].Job = j
			delete(done, j.Lease())
		} else {
			left = append(left, i)
		}
	}
	return left
}

// manyTx runs one fenced transition per item in one transaction and
// returns the items left: none, or all of them when the transaction failed
// (the single calls then report the error per item). An item whose lease
// does not hold fails alone: nothing was written for it.
func (db *DB) manyTx(ctx context.Context, todo []int, out []store.JobOutcome, item func(t *txn, i int, now time.Time) (store.Job, error)) []int {
	res := make([]store.JobOutcome, len(todo))
	err := db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		for k, i := range todo {
			j, err := item(t, i, now)
			if err != nil {
				if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidTransition) {
					res[k].Err = err
					continue
				}
				return err
			}
			res[k].Job = j
		}
		return nil
	})
	if err != nil {
		return todo
	}
	for k, i := range todo {
		out[i] = res[k]
	}
	return nil
}

// CompleteMany completes several jobs (see store.Jobs). PostgreSQL
// completes every item it can in one statement, SQLite all of them in one
// transaction; the items left (a job with a parent, a lease that does not
// hold, or all when the batch failed) take the transaction path one by
// one, and a lone valid item takes Complete.
func (db *DB) CompleteMany(ctx context.Context, cs []store.Completion) []store.JobOutcome {
	return db.completeMany(ctx, cs, false)
}

// CompleteManyErrs is CompleteMany for a caller that needs only each item's
// outcome, not the jobs (a pool's completer): the i-th error is that of
// cs[i], nil when it was completed. On PostgreSQL the one statement returns
// the lease of each job it completed instead of the whole row.
func (db *DB) CompleteManyErrs(ctx context.Context, cs []store.Completion) []error {
	outs := db.completeMany(ctx, cs, true)
	errs := make([]error, len(outs))
	for i, o := range outs {
		errs[i] = o.Err
	}
	return errs
}

// completeMany is CompleteMany; with leasesOnly, the jobs of the items the
// one statement completed carry only their lease.
func (db *DB) completeMany(ctx context.Context, cs []store.Completion, leasesOnly bool) []store.JobOutcome {
	out := make([]store.JobOutcome, len(cs))
	todo := make([]int, 0, len(cs)) // valid items not completed yet
	for i, c := range cs {
		if err := c.Lease.Validate(); err != nil {
			out[i].Err = fmt.Errorf("complete: %w", err)
		} else if err := store.ValidateResult(c.Result); err != nil {
			out[i].Err = fmt.Errorf("complete: %w", err)
		} else {
			todo = append(todo, i)
		}
	}
	batched := len(todo) >= 2
	switch {
	case !batched: // the single call below
	case db.q.JobCompleteManyAtomic != "":
		todo = db.completeManyAtomic(ctx, cs, todo, out, leasesOnly)
	default:
		todo = db.manyTx(ctx, todo, out, func(t *txn, i int, now time.Time) (store.Job, error) {
			return db.completeIn(ctx, t, cs[i].Lease, cs[i].Result, now)
		})
	}
	for _, i := range todo {
		if !batched {
			out[i].Job, out[i].Err = db.Complete(ctx, cs[i].Lease, cs[i].Result)
		} else {
			// What the batch left needs the transaction path (a parent
			// to resume, a lease to diagnose), or the batch failed.
			out[i].Job, out[i].Err = db.completeTx(ctx, cs[i].Lease, cs[i].Result)
		}
	}
	return out
}

// completeManyAtomic completes what one statement can and returns the
// items left; with leasesOnly (and a JobCompleteManyLeases query) the jobs
// it completed carry only their lease.
func (db *DB) completeManyAtomic(ctx context.Context, cs []store.Completion, todo []int, out []store.JobOutcome, leasesOnly bool) []int {
	n := len(todo)
	idList, attempts := make([]int64, n), make([]int64, n)
	owners, results, datas := make([]string, n), make([]string, n), make([]string, n)
	for k, i := range todo {
		l := cs[i].Lease
		data, _ := json.Marshal(store.StatusEvent{State: store.StateSucceeded, Attempt: l.Attempt, Worker: l.Owner})
		idList[k], attempts[k], owners[k], results[k], datas[k] = l.JobID, int64(l.Attempt), l.Owner, cs[i].Result, string(data)
	}
	query, scan := db.q.JobCompleteManyAtomic, scanJob
	if leasesOnly && db.q.JobCompleteManyLeases != "" {
		query, scan = db.q.JobCompleteManyLeases, scanLease
	}
	rows, err := db.wp.QueryContext(ctx, query, idList, attempts, db.d.List(owners),
		db.d.List(results), db.d.List(datas), db.ts(db.Now()), db.d.Channel)
	jobs, err := scanRows(rows, err, scan)
	if err != nil {
		return todo // the single calls report the error per item
	}
	return takeDone(todo, out, jobs, func(i int) store.Lease { return cs[i].Lease })
}

// Fail records a failed attempt (see store.Jobs).
func (db *DB) Fail(ctx context.Context, l store.Lease, p store.FailParams) (store.Job, error) {
	if err := l.Validate(); err != nil {
		return store.Job{}, fmt.Errorf("fail: %w", err)
	}
	p, err := p.Validate()
	if err != nil {
		return store.Job{}, fmt.Errorf("fail: %w", err)
	}
	final := store.StateFailed
	if p.Abort {
		final = store.StateAborted
	}
	var j store.Job
	err = db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		var err error
		j, err = db.fenced(ctx, t, "fail", l, db.q.JobFail, append(leaseArgs(l), db.ts(now), p.Error,
			p.NoRetry || p.Abort, string(final), db.ts(now.Add(p.RetryAfter)), p.NotCounted)...)
		if err != nil {
			return err
		}
		ev := store.StatusEvent{Worker: l.Owner, Error: p.Error}
		if j.State == store.StateQueued {
			ev.Reason, ev.RetryAt = "retry", j.ScheduledAt
			if p.NotCounted {
				ev.Reason = fmt.Sprintf("retry in %s, attempt not counted", p.RetryAfter.Round(time.Second))
			}
		}
		if err := db.status(ctx, t, j, ev); err != nil {
			return err
		}
		return db.afterTerminal(ctx, t, j)
	})
	return j, err
}

// Wait parks a job (see store.Jobs).
func (db *DB) Wait(ctx context.Context, l store.Lease, p store.WaitParams) (store.Job, error) {
	if err := l.Validate(); err != nil {
		return store.Job{}, fmt.Errorf("wait: %w", err)
	}
	p, err := p.Validate()
	if err != nil {
		return store.Job{}, fmt.Errorf("wait: %w", err)
	}
	var j store.Job
	err = db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		var err error
		j, err = db.fenced(ctx, t, "wait", l, db.q.JobWait, append(leaseArgs(l), db.ts(now), string(p.State), p.Reason)...)
		if err != nil {
			return err
		}
		if err := db.status(ctx, t, j, store.StatusEvent{Worker: l.Owner, Reason: p.Reason}); err != nil {
			return err
		}
		if p.Question != "" {
			if j.TaskID == 0 {
				return fmt.Errorf("wait %s: %w", l, &store.FieldError{Field: "question", Message: fmt.Sprintf("job %d has no task to post the question on", j.ID)})
			}
			if _, err := db.addComment(ctx, t, store.NewComment{TaskID: j.TaskID, AuthorKind: store.AuthorAgent, Body: p.Question}, now); err != nil {
				return err
			}
		}
		if p.State == store.StateWaitingSubtasks {
			resumed, ok, err := db.resumeParent(ctx, t, j.ID, now)
			if err != nil {
				return err
			}
			if ok {
				j = resumed
			}
		}
		return nil
	})
	return j, err
}

// Release gives a claimed job back (see store.Jobs).
func (db *DB) Release(ctx context.Context, l store.Lease) (store.Job, error) {
	if err := l.Validate(); err != nil {
		return store.Job{}, fmt.Errorf("release: %w", err)
	}
	return db.fencedStatus(ctx, "release", l, db.q.JobRelease, store.StatusEvent{Worker: l.Owner, Reason: "released"})
}

// ReapExpired requeues or fails jobs whose lease expired (see store.Jobs).
func (db *DB) ReapExpired(ctx context.Context, limit int) ([]store.Job, error) {
	limit = min(store.ListLimit(limit), store.MaxClaim)
	var jobs []store.Job
	err := db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		var err error
		jobs, err = scanJobs(t.QueryContext(ctx, db.q.JobReap, db.ts(now), int64(limit), "lease expired"))
		if err != nil {
			return fmt.Errorf("reap expired leases: %w", err)
		}
		slices.SortFunc(jobs, func(a, b store.Job) int { return cmp.Compare(a.ID, b.ID) })
		for _, j := range jobs {
			ev := store.StatusEvent{Worker: j.LeaseOwner, Reason: "lease expired"}
			if j.State != store.StateQueued {
				ev.Error = j.Error
			}
			if err := db.status(ctx, t, j, ev); err != nil {
				return err
			}
			if err := db.afterTerminal(ctx, t, j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// unfenced runs an operator transition; no row means the job is missing or
// in a state the transition does not apply to.
func (db *DB) unfenced(ctx context.Context, t *txn, what string, id int64, need string, query string, args ...any) (store.Job, error) {
	j, err := scanJob(t.QueryRowContext(ctx, query, args...))
	if err == nil {
		return j, nil
	}
	if !noRow(err) {
		return j, fmt.Errorf("%s job %d: %w", what, id, err)
	}
	cur, err := scanJob(t.QueryRowContext(ctx, db.q.JobGet, id))
	if noRow(err) {
		return j, fmt.Errorf("%s job %d: %w", what, id, store.ErrNotFound)
	}
	if err != nil {
		return j, fmt.Errorf("%s job %d: %w", what, id, err)
	}
	return j, fmt.Errorf("%s job %d: the job is %s; %s: %w", what, id, cur.State, need, store.ErrInvalidTransition)
}

// Cancel ends an unfinished job as cancelled (see store.Jobs).
func (db *DB) Cancel(ctx context.Context, id int64, reason string) (store.Job, error) {
	reason = store.TruncateError(reason)
	var j store.Job
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		j, err = db.unfenced(ctx, t, "cancel", id, "only a job that has not finished can be cancelled",
			db.q.JobCancel, id, db.ts(db.Now()), reason)
		if err != nil {
			return err
		}
		if err := db.status(ctx, t, j, store.StatusEvent{Error: reason}); err != nil {
			return err
		}
		if err := db.cancelChildren(ctx, t, j.ID); err != nil {
			return err
		}
		return db.afterTerminal(ctx, t, j)
	})
	return j, err
}

// cancelChildren cancels the unfinished child jobs (subtasks) of a
// cancelled job, and theirs, in the caller's transaction: cancelling a
// parent cancels its subtasks (docs/queue.md, "Subtasks as child jobs").
func (db *DB) cancelChildren(ctx context.Context, t *txn, parent int64) error {
	unfinished := db.d.List([]string{string(store.StateQueued), string(store.StateDispatching), string(store.StateRunning),
		string(store.StateWaitingHuman), string(store.StateWaitingSubtasks)})
	for {
		kids, err := scanJobs(t.QueryContext(ctx, db.q.JobList, int64(0), parent, unfinished, int64(0), int64(store.MaxListLimit)))
		if err != nil {
			return fmt.Errorf("cancel the subtasks of job %d: %w", parent, err)
		}
		for _, k := range kids {
			reason := fmt.Sprintf("its parent job %d was cancelled", parent)
			c, err := scanJob(t.QueryRowContext(ctx, db.q.JobCancel, k.ID, db.ts(db.Now()), reason))
			if err != nil {
				return fmt.Errorf("cancel subtask job %d: %w", k.ID, err)
			}
			if err := db.status(ctx, t, c, store.StatusEvent{Error: reason}); err != nil {
				return err
			}
			if err := db.cancelChildren(ctx, t, c.ID); err != nil {
				return err
			}
		}
		if len(kids) < store.MaxListLimit {
			return nil
		}
	}
}

// Resume queues a waiting job again (see store.Jobs).
func (db *DB) Resume(ctx context.Context, id int64) (store.Job, error) {
	var j store.Job
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		j, err = db.unfenced(ctx, t, "resume", id, "only a waiting_human or waiting_subtasks job can be resumed",
			db.q.JobResume, id, db.ts(db.Now()))
		if err != nil {
			return err
		}
		return db.status(ctx, t, j, store.StatusEvent{Reason: "resumed"})
	})
	return j, err
}

// Retry queues a failed, aborted or cancelled job again (see store.Jobs).
func (db *DB) Retry(ctx context.Context, id int64, extra int) (store.Job, error) {
	extra = min(max(extra, 1), store.MaxAttemptsLimit)
	var j store.Job
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		j, err = db.unfenced(ctx, t, "retry", id, "only a failed, aborted or cancelled job can be retried",
			db.q.JobRetry, id, db.ts(db.Now()), int64(extra))
		if err != nil {
			return err
		}
		return db.status(ctx, t, j, store.StatusEvent{Reason: "retry"})
	})
	return j, err
}

// afterTerminal queues the parent of a job that just finished if the
// parent waits for subtasks and this was the last unfinished one.
func (db *DB) afterTerminal(ctx context.Context, t *txn, j store.Job) error {
	if !j.State.Terminal() || j.ParentJobID == 0 {
		return nil
	}
	_, _, err := db.resumeParent(ctx, t, j.ParentJobID, db.Now())
	return err
}

// resumeParent queues parent if it waits for subtasks and none is
// unfinished. The row lock (PostgreSQL) serialises the children finishing
// concurrently, so that the last of them sees the others' commits.
func (db *DB) resumeParent(ctx context.Context, t *txn, parent int64, now time.Time) (store.Job, bool, error) {
	if db.q.JobLock != "" {
		var id int64
		if err := t.QueryRowContext(ctx, db.q.JobLock, parent).Scan(&id); err != nil && !noRow(err) {
			return store.Job{}, false, fmt.Errorf("lock parent job %d: %w", parent, err)
		}
	}
	j, err := scanJob(t.QueryRowContext(ctx, db.q.JobResumeParent, parent, db.ts(now)))
	if noRow(err) {
		return j, false, nil
	}
	if err != nil {
		return j, false, fmt.Errorf("resume parent job %d: %w", parent, err)
	}
	return j, true, db.status(ctx, t, j, store.StatusEvent{Reason: "subtasks finished"})
}

// stateList checks states and returns them as strings for a list parameter.
func stateList(states []store.State) ([]string, error) {
	out := make([]string, len(states))
	for i, s := range states {
		if !s.Valid() {
			return nil, &store.FieldError{Field: fmt.Sprintf("states[%d]", i), Message: fmt.Sprintf("unknown state %q", s)}
		}
		out[i] = string(s)
	}
	return out, nil
}

// GetJob returns one job (see store.Jobs).
func (db *DB) GetJob(ctx context.Context, id int64) (store.Job, error) {
	j, err := scanJob(db.r.QueryRowContext(ctx, db.q.JobGet, id))
	return j, getErr(err, "get job %d", id)
}

// ListJobs lists jobs (see store.Jobs).
func (db *DB) ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	states, err := stateList(f.States)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := scanJobs(db.r.QueryContext(ctx, db.q.JobList, f.TaskID, f.ParentJobID, db.d.List(states), f.AfterID, int64(store.ListLimit(f.Limit))))
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// CountJobs counts jobs by state (see store.Jobs).
func (db *DB) CountJobs(ctx context.Context) (map[store.State]int64, error) {
	rows, err := db.r.QueryContext(ctx, db.q.JobCounts)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[store.State]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[store.State(s)] = n
	}
	return out, rows.Err()
}
