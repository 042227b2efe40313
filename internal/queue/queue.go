// Package queue runs Maestro's durable jobs: a Pool of claim goroutines
// that take jobs from the store under a lease, keep the lease alive with
// heartbeats, run them with a Runner and record the outcome; RunMaintenance,
// the leader-elected loop that reaps expired leases and fires cron
// schedules; and the engine-backed Runner that runs a task's piece in its
// task workspace. docs/queue.md describes the behaviour in full.
package queue

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/taskdir"
)

// Runner executes one claimed job; the pool handles claim, lease
// heartbeat, fencing, retries. Run must return when ctx is cancelled (the
// job was cancelled, its lease was lost, or the worker is shutting down).
type Runner interface {
	Run(ctx context.Context, j *Job) Result
}

// RunnerFunc adapts a function to the Runner interface.
type RunnerFunc func(ctx context.Context, j *Job) Result

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, j *Job) Result { return f(ctx, j) }

// Job is a claimed job as a Runner sees it.
type Job struct {
	// Job is the claimed job (Attempt, Lease() …), as of when it started.
	store.Job
	// Task is its task (zero when the job has no task).
	Task store.Task
	// Emit appends events to the job's log (fenced by the lease);
	// store.ErrLeaseLost means stop.
	Emit func(ctx context.Context, events ...store.NewJobEvent) error
	// Checkpoint records progress (movement + opaque data); fenced.
	Checkpoint func(ctx context.Context, movement string, data []byte) error
	// SetPiece records the piece chosen for a job given none; fenced.
	SetPiece func(ctx context.Context, piece string) error
	// SaveRunState keeps the job's run state in the store (runstate.go);
	// fenced.
	SaveRunState func(ctx context.Context, movement string, data []byte) error

	// store is the pool's store (reading the task's comments).
	store store.Store
}

// Result is what a Runner reports when it returns.
type Result struct {
	// State is the outcome: succeeded, failed, aborted, waiting_human or
	// waiting_subtasks. An empty State with Error set counts as failed.
	State store.State
	// Result is the result text of a succeeded job.
	Result string
	// Error says why a failed or aborted job stopped.
	Error string
	// Question, for waiting_human, is posted as an agent comment.
	Question string
	// NoRetry ends a failed job even if attempts remain.
	NoRetry bool
	// NotCounted says a failed attempt failed for a cause that is not the
	// job's (its artifact store unreachable): the job is given back,
	// queued again after the backoff whatever attempts it has left, and
	// the attempt is not counted (store.FailParams.NotCounted).
	NotCounted bool
	// Usage and CostUSD feed the metrics.
	Usage   llm.Usage
	CostUSD float64
	// ChildJobs says the job's run enqueued child jobs (subtasks,
	// subjobs.go): once the job has ended, those still unfinished are
	// cancelled.
	ChildJobs bool
	// Report, when set, is posted on the task as an agent comment once
	// the job has ended (not after an attempt that will be retried, nor
	// while it waits): the progress comment saying the result, the
	// deliverables and the cost.
	Report string
}

// Config configures a Pool. Store and Runner are required.
type Config struct {
	Store  store.Store
	Runner Runner
	// Name is the worker name prefix; each claim goroutine is Name/N.
	// Default host:pid.
	Name string
	// Workers is how many goroutines claim and run jobs in this process
	// (default 1).
	Workers int
	// Profiles and TaskClasses are what the workers serve (see
	// store.ClaimParams).
	Profiles, TaskClasses []string
	// LeaseFor is the lease length (default 30s); the lease is extended
	// every LeaseFor/3.
	LeaseFor time.Duration
	// Poll is the fallback polling interval when no wake-up arrives
	// (default 1s).
	Poll time.Duration
	// ShutdownGrace is how long running jobs may take to finish once Run's
	// context ends before they are cancelled and released (default 10s).
	ShutdownGrace time.Duration
	// Backoff gives the retry delay after a failed attempt (default
	// store.Backoff).
	Backoff func(attempt int) time.Duration
	// Metrics receives the pool's measurements (default: a private set).
	Metrics *Metrics
	// Logger receives progress and problems (default: discarded).
	Logger *slog.Logger
	// Now is the clock the claim latency is measured with (default
	// time.Now); give the store's clock when it is not the real one.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultLeaseFor      = 30 * time.Second
	DefaultPoll          = time.Second
	DefaultShutdownGrace = 10 * time.Second
)

// TaskDir is the directory of task taskID under the data directory:
// <dataDir>/tasks/<taskID>, laid out by internal/taskdir: work/ is the
// agent's workspace (input/, output/, subtasks/, skills/), state/ the
// engine's run directory (run state, lock, subtask runs).
func TaskDir(dataDir string, taskID int64) string {
	return filepath.Join(dataDir, "tasks", strconv.FormatInt(taskID, 10))
}

// WorkDir is the agent's workspace of task taskID: TaskDir's work/.
func WorkDir(dataDir string, taskID int64) string {
	return taskdir.WorkDir(TaskDir(dataDir, taskID))
}

// StateDir is the engine's run directory of task taskID, out of the
// agent's reach: TaskDir's state/.
func StateDir(dataDir string, taskID int64) string {
	return taskdir.StateDir(TaskDir(dataDir, taskID))
}
