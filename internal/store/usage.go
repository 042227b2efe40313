package store

import (
	"context"
	"time"
)

// Usage reads what jobs spent, for the usage report (GET /api/v1/usage).
type Usage interface {
	// ListJobUsage returns one row per job created in [f.From, f.To), in
	// ascending job id order: what the job's log says it spent (the cost
	// kept on the job row, migration 004, and the tokens of its
	// response_end events) with the task and piece it ran for. Jobs that
	// ran on the replay executor are left out unless f.IncludeReplay.
	ListJobUsage(ctx context.Context, f UsageFilter) ([]JobUsage, error)
}

// UsageFilter chooses the jobs ListJobUsage reads.
type UsageFilter struct {
	From, To      time.Time
	IncludeReplay bool
}

// JobUsage is what one job spent.
type JobUsage struct {
	JobID  int64
	TaskID int64 // 0: a job without a task
	Title  string
	Piece  string
	// Executor, Model and Agent are the job row's copies of its log
	// (store.Task's JobExecutor, JobModel, JobAgent).
	Executor     string
	Model        string
	Agent        string
	CostUSD      float64
	InputTokens  int64
	OutputTokens int64
	CreatedAt    time.Time
}
