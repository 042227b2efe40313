package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
)

// TestJobEventsGoWithTheirJob: job_events has no foreign key to jobs
// (migration 009: its check was a fifth of the server's time per queued
// job); what the key guaranteed still holds. A job's events are deleted
// with it, whether the job is deleted itself or with its task or parent
// job, and nobody else's are; an append racing the delete leaves no event
// of a job that no longer exists, in either order.
func TestJobEventsGoWithTheirJob(t *testing.T) {
	t.Parallel()
	s := openDSN(t, pg.Cluster(t).NewSchema(t), nil)
	db := postgres.SQLDB(s)
	ctx := t.Context()

	lone, err := s.Enqueue(ctx, store.NewJob{})
	if err != nil {
		t.Fatal(err)
	}
	task, taskJob, err := s.CreateTask(ctx, store.NewTask{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	parent, err := s.Enqueue(ctx, store.NewJob{})
	if err != nil {
		t.Fatal(err)
	}
	child, err := s.Enqueue(ctx, store.NewJob{ParentJobID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Enqueue(ctx, store.NewJob{})
	if err != nil {
		t.Fatal(err)
	}
	all := []int64{lone.ID, taskJob.ID, parent.ID, child.ID, kept.ID}
	for _, id := range all {
		if _, err := s.AppendSystemJobEvents(ctx, id, []store.NewJobEvent{{Type: "note", Data: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	events := func(id int64) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM job_events WHERE job_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, id := range all {
		if n := events(id); n != 2 {
			t.Fatalf("job %d has %d events, want 2 (queued, note)", id, n)
		}
		if err := s.AdvanceJobEventCursor(ctx, id, 2); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`DELETE FROM jobs WHERE id = $1`, lone.ID)
	exec(`DELETE FROM tasks WHERE id = $1`, task.ID)  // cascades to its job
	exec(`DELETE FROM jobs WHERE id = $1`, parent.ID) // cascades to its child
	for _, id := range all[:4] {
		if n := events(id); n != 0 {
			t.Errorf("deleted job %d still has %d events", id, n)
		}
	}
	if n := events(kept.ID); n != 2 {
		t.Errorf("job %d kept %d of its 2 events", kept.ID, n)
	}
	// Their event bus cursors go with them (a foreign key).
	if cs, err := s.ListJobEventCursors(ctx, 0, 0); err != nil || len(cs) != 1 || cs[0].JobID != kept.ID {
		t.Errorf("job event cursors after the deletes = %+v, %v; want job %d's only", cs, err, kept.ID)
	}

	// A delete that holds the job's row first: the append waits for it,
	// then finds no job.
	gone, err := s.Enqueue(ctx, store.NewJob{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id = $1`, gone.ID); err != nil {
		t.Fatal(err)
	}
	holder := backendPID(t, tx)
	appended := make(chan error, 1)
	go func() {
		_, err := s.AppendSystemJobEvents(ctx, gone.ID, []store.NewJobEvent{{Type: "note", Data: []byte(`{}`)}})
		appended <- err
	}()
	waitBlockedBy(t, db, holder)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; !errors.Is(err, store.ErrNotFound) {
		t.Errorf("append to a job deleted meanwhile: %v, want ErrNotFound", err)
	}
	if n := events(gone.ID); n != 0 {
		t.Errorf("job %d deleted while an append waited has %d events", gone.ID, n)
	}

	// An append that holds the job's row first (its transaction not yet
	// committed): the delete waits for it, then deletes what it appended.
	late, err := s.Enqueue(ctx, store.NewJob{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var seq int64
	if err := tx.QueryRowContext(ctx, `UPDATE jobs SET event_seq = event_seq + 1 WHERE id = $1 RETURNING event_seq`, late.ID).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO job_events (job_id, seq, attempt, type, data, created_at)
		VALUES ($1, $2, 0, 'note', '{}', now())`, late.ID, seq); err != nil {
		t.Fatal(err)
	}
	holder = backendPID(t, tx)
	deleted := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, `DELETE FROM jobs WHERE id = $1`, late.ID)
		deleted <- err
	}()
	waitBlockedBy(t, db, holder)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("delete: %v", err)
	}
	if n := events(late.ID); n != 0 {
		t.Errorf("job %d deleted after an append committed has %d events", late.ID, n)
	}

	var orphans int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM job_events e WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d events of jobs that do not exist", orphans)
	}
}

// backendPID is the server process of tx's connection.
func backendPID(t *testing.T, tx *sql.Tx) int64 {
	t.Helper()
	var pid int64
	if err := tx.QueryRowContext(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitBlockedBy returns once some backend waits for a lock the backend
// holder holds (or fails the test after 30 s): the test's ordering event,
// observed in pg_stat_activity rather than slept for.
func waitBlockedBy(t *testing.T, db *sql.DB, holder int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE $1::integer = ANY(pg_blocking_pids(pid))`, holder).Scan(&n)
		if err != nil {
			t.Fatalf("wait for a backend blocked by %d: %v", holder, err)
		}
		if n > 0 {
			return
		}
	}
}
