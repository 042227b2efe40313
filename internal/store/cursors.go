package store

import "context"

// JobEventCursors keeps the event bus's publish cursor of each job's log
// (docs/events.md, "Platform events"): the seq of the job's last event the
// bus published and JetStream acknowledged. It is the store's, shared by
// every serve and worker process on it, so a process that starts afresh
// (a new worker machine, a container whose data directory is not kept)
// goes on from where the others are rather than from the first event.
type JobEventCursors interface {
	// JobEventCursor returns job id's cursor: 0 when none is recorded
	// (nothing published yet, or the job does not exist).
	JobEventCursor(ctx context.Context, jobID int64) (int64, error)
	// ListJobEventCursors returns the recorded cursors of the jobs whose
	// id is above afterJobID, in job id order, at most limit (default and
	// maximum MaxListLimit).
	ListJobEventCursors(ctx context.Context, afterJobID int64, limit int) ([]JobEventCursor, error)
	// AdvanceJobEventCursor records seq as job id's cursor unless the
	// recorded one is at seq or beyond: a cursor never moves back, however
	// processes race. A job that no longer exists records nothing (its
	// cursor goes with it when it is deleted).
	AdvanceJobEventCursor(ctx context.Context, jobID, seq int64) error
}

// JobEventCursor is one job's publish cursor.
type JobEventCursor struct {
	JobID int64 `json:"job_id"`
	Seq   int64 `json:"seq"`
}
