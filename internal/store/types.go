package store

import (
	"encoding/json"
	"strconv"
	"time"
)

// State is the lifecycle state of a job.
type State string

// Job states. See the package documentation for the transitions.
const (
	// StateQueued: waiting to be claimed (possibly not before ScheduledAt).
	StateQueued State = "queued"
	// StateDispatching: claimed by a worker under a lease, not started yet.
	StateDispatching State = "dispatching"
	// StateRunning: the worker holding the lease is running it.
	StateRunning State = "running"
	// StateSucceeded: finished with a result (terminal).
	StateSucceeded State = "succeeded"
	// StateFailed: failed with no attempts left, or not retryable (terminal).
	StateFailed State = "failed"
	// StateAborted: the piece gave up (complete with "aborted", loop
	// detection); never retried automatically (terminal).
	StateAborted State = "aborted"
	// StateWaitingHuman: waiting for an answer to a question (a comment).
	StateWaitingHuman State = "waiting_human"
	// StateWaitingSubtasks: waiting until every child job is terminal.
	StateWaitingSubtasks State = "waiting_subtasks"
	// StateCancelled: cancelled by a user (terminal).
	StateCancelled State = "cancelled"
)

// States lists every job state in lifecycle order.
func States() []State {
	return []State{StateQueued, StateDispatching, StateRunning, StateSucceeded, StateFailed,
		StateAborted, StateWaitingHuman, StateWaitingSubtasks, StateCancelled}
}

// Valid reports whether s is one of the job states.
func (s State) Valid() bool {
	for _, v := range States() {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether a job in state s is finished.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateAborted, StateCancelled:
		return true
	}
	return false
}

// Active reports whether a worker holds a job in state s under a lease.
func (s State) Active() bool { return s == StateDispatching || s == StateRunning }

// Job is one execution of a piece for a task, with its lease and outcome.
type Job struct {
	ID int64 `json:"id"`
	// TaskID is the task the job belongs to (0: none).
	TaskID int64 `json:"task_id,omitempty"`
	// ParentJobID is the job that spawned this one as a subtask (0: none).
	ParentJobID int64  `json:"parent_job_id,omitempty"`
	Piece       string `json:"piece,omitempty"`
	// Profile and TaskClass are requirements: a job with one set is claimed
	// only by workers that list it (see ClaimParams).
	Profile   string `json:"profile,omitempty"`
	TaskClass string `json:"task_class,omitempty"`
	// Priority: higher runs first (default 0).
	Priority int `json:"priority"`
	// Payload is the job's input as JSON (default {}).
	Payload json.RawMessage `json:"payload"`
	State   State           `json:"state"`
	// Attempt counts claims; it is the fencing token of the current lease.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// ScheduledAt is when the job becomes claimable.
	ScheduledAt time.Time `json:"scheduled_at"`
	// AttemptedAt is when the job was last claimed (zero: never).
	AttemptedAt time.Time `json:"attempted_at,omitzero"`
	// LeaseOwner is the worker that holds the lease, or last held it.
	LeaseOwner string `json:"lease_owner,omitempty"`
	// LeaseExpiresAt is set while the job is dispatching or running.
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	HeartbeatAt    time.Time `json:"heartbeat_at,omitzero"`
	// Movement and Checkpoint are the engine's last recorded progress.
	Movement   string          `json:"movement,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// WaitReason says what a waiting job waits for.
	WaitReason string `json:"wait_reason,omitempty"`
	// Result is the output the user sees (succeeded jobs).
	Result string `json:"result,omitempty"`
	// Error is the last failure, cancellation or expiry reason.
	Error string `json:"error,omitempty"`
	// LastSeq is the sequence number of the job's latest event.
	LastSeq    int64     `json:"last_seq"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Lease returns the fencing token of the job's current claim.
func (j Job) Lease() Lease { return Lease{JobID: j.ID, Attempt: j.Attempt, Owner: j.LeaseOwner} }

// Lease identifies one claim of a job: the worker presents it on every call
// it makes for the job, and the store refuses calls whose lease is not the
// job's current one.
type Lease struct {
	JobID   int64
	Attempt int
	Owner   string
}

// String formats the lease for logs.
func (l Lease) String() string {
	return "job " + strconv.FormatInt(l.JobID, 10) + " attempt " + strconv.Itoa(l.Attempt) + " owner " + strconv.Quote(l.Owner)
}

// NewJob is the input of Enqueue.
type NewJob struct {
	TaskID      int64
	ParentJobID int64
	Piece       string
	Profile     string
	TaskClass   string
	Priority    int
	// Payload must be valid JSON when set (default {}).
	Payload json.RawMessage
	// MaxAttempts bounds claims of the job (default DefaultMaxAttempts).
	MaxAttempts int
	// RunAt delays the job (default: claimable now).
	RunAt time.Time
}

// ClaimParams selects what a worker claims.
type ClaimParams struct {
	// Worker names the claimer; it becomes the lease owner.
	Worker string
	// Profiles and TaskClasses are what the worker can serve. A job with an
	// empty profile (task class) matches any worker; a job with one set
	// matches only workers that list it.
	Profiles    []string
	TaskClasses []string
	// Limit is the most jobs to claim (at least 1).
	Limit int
	// Workers, instead of Worker and Limit, claims one job per name in a
	// single call: the i-th job in claim order is leased to Workers[i]
	// (a pool claiming for all its idle slots at once). Fewer jobs than
	// names may be due; the names left over get nothing.
	Workers []string
	// LeaseFor is how long the lease lasts without a heartbeat.
	LeaseFor time.Duration
	// Start moves the claimed jobs on to running in the same call: each
	// job goes from queued to running at once, records one status event
	// (running; no job is ever seen dispatching) and comes back running,
	// its lease fencing later calls as for any started job. A pool that
	// runs what it claims at once saves a round trip per claim, and the
	// store a status event per job.
	Start bool
}

// Owners returns the lease owner of each job the claim may take, in claim
// order: Workers, or Limit times Worker.
func (p ClaimParams) Owners() []string {
	if len(p.Workers) > 0 {
		return p.Workers
	}
	out := make([]string, max(p.Limit, 1))
	for i := range out {
		out[i] = p.Worker
	}
	return out
}

// Completion is one item of CompleteMany: the lease of a job and its
// result text.
type Completion struct {
	Lease  Lease
	Result string
}

// JobOutcome is what StartMany or CompleteMany did with one item: the job
// in its new state, or the error Start or Complete would have returned.
type JobOutcome struct {
	Job Job
	Err error
}

// FailParams describes a failed attempt.
type FailParams struct {
	// Error says what went wrong (shown to the user).
	Error string
	// RetryAfter delays the retry (see Backoff for a default policy).
	RetryAfter time.Duration
	// NoRetry ends the job as failed even if attempts remain.
	NoRetry bool
	// Abort ends the job as aborted (never retried).
	Abort bool
	// NotCounted says the attempt ended for a cause that is not the job's
	// (an outage of the artifact store it needs): the job is queued again
	// at now+RetryAfter whatever attempts it has left, and the attempt is
	// not counted against max_attempts (max_attempts grows by one, as
	// with Release). Not with NoRetry or Abort.
	NotCounted bool
}

// WaitParams describes why a job parks.
type WaitParams struct {
	// State is StateWaitingHuman or StateWaitingSubtasks.
	State State
	// Reason is a short description kept on the job.
	Reason string
	// Question, for waiting_human, is posted as an agent comment on the
	// job's task.
	Question string
}

// JobFilter selects jobs for ListJobs; zero fields do not filter.
type JobFilter struct {
	TaskID      int64
	ParentJobID int64
	States      []State
	// AfterID pages: only jobs with id > AfterID.
	AfterID int64
	// Limit caps the result (default and maximum MaxListLimit).
	Limit int
}

// JobEvent is one entry of a job's event log.
type JobEvent struct {
	JobID int64 `json:"job_id"`
	// Seq is the position in the job's log: 1, 2, 3… with no gaps.
	Seq int64 `json:"seq"`
	// Attempt is the attempt during which the event was appended.
	Attempt   int             `json:"attempt"`
	Type      JobEventKind    `json:"type"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
}

// NewJobEvent is the input of AppendJobEvents.
type NewJobEvent struct {
	// Type says what the event records: one of the JobEvent kinds below,
	// or a worker's own label.
	Type JobEventKind
	// Data is the event body as JSON (default {}).
	Data json.RawMessage
}

// JobEventKind names what a job event records. The kinds Maestro appends
// are the constants below, each with one shape of Data (docs/events.md,
// "The job log"); a worker or client appending through the API may use
// its own labels, which readers show as they are.
type JobEventKind string

// The job event kinds Maestro appends.
const (
	// JobEventStatus: the store, on every job state change; Data is a
	// StatusEvent.
	JobEventStatus JobEventKind = "status"
	// JobEventComment: a comment was posted on the job's task; Data is
	// {"comment_id", "author_kind", "author", "body"}.
	JobEventComment JobEventKind = "comment"
	// JobEventRunEvent: a workflow-level event of the job's piece run
	// (a movement started, a transition, …); Data is the engine's record
	// {"kind", "run_id", "seq", "time", "data"} (internal/engine Record).
	JobEventRunEvent JobEventKind = "run_event"
	// JobEventProtocol: a headless-protocol message of the job's agent
	// loop, as its JSON frame with its "type" (docs/protocol/).
	JobEventProtocol JobEventKind = "protocol"
	// JobEventNoop: the one event of a job of piece "noop"; Data is
	// {"result": "ok"}.
	JobEventNoop JobEventKind = "noop"
)

// StatusEvent is the body of a "status" event.
type StatusEvent struct {
	State   State  `json:"state"`
	Attempt int    `json:"attempt"`
	Worker  string `json:"worker,omitempty"`
	// Error is the failure or cancellation reason.
	Error string `json:"error,omitempty"`
	// Reason says why a job waits or was queued again ("retry", "released",
	// "lease expired", "resumed", "subtasks finished", "comment").
	Reason string `json:"reason,omitempty"`
	// RetryAt is when a job queued again for a retry becomes claimable.
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// Task is a unit of user work; it owns one job per run.
type Task struct {
	ID    int64  `json:"id"`
	Owner string `json:"owner,omitempty"`
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	// Piece forces a piece (empty: the classifier picks).
	Piece string `json:"piece,omitempty"`
	// ScheduleID is the schedule that created the task (0: none).
	ScheduleID int64     `json:"schedule_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// JobID and JobState describe the task's latest job; JobPiece is the
	// piece it runs (Piece, or the one the classifier chose once chosen).
	JobID    int64  `json:"job_id,omitempty"`
	JobState State  `json:"job_state,omitempty"`
	JobPiece string `json:"job_piece,omitempty"`
	// JobExecutor, JobModel, JobAgent and JobCostUSD are what the latest
	// job's log has said so far (kept on the job row as the events are
	// appended, migration 004): the executor_type of its latest ready
	// ("live" or "replay"), that ready's provider/model, the agent CLI of
	// its latest movement that ran on one, and the sum of its model calls'
	// costs in USD over every attempt.
	JobExecutor string  `json:"job_executor,omitempty"`
	JobModel    string  `json:"job_model,omitempty"`
	JobAgent    string  `json:"job_agent,omitempty"`
	JobCostUSD  float64 `json:"job_cost_usd,omitempty"`
	// JobAttemptedAt is when the latest job was last claimed and
	// JobFinishedAt when it ended (zero: not yet): its duration.
	JobAttemptedAt time.Time `json:"job_attempted_at,omitzero"`
	JobFinishedAt  time.Time `json:"job_finished_at,omitzero"`
}

// NewTask is the input of CreateTask; the job fields shape its first job.
type NewTask struct {
	Owner       string
	Title       string
	Body        string
	Piece       string
	Profile     string
	TaskClass   string
	Priority    int
	MaxAttempts int
	Payload     json.RawMessage
	ScheduleID  int64
}

// TaskFilter selects tasks for ListTasks; zero fields do not filter.
type TaskFilter struct {
	Owner string
	// States keeps tasks whose latest job (Task.JobState) is in one of them.
	States []State
	// Search keeps tasks whose title or body contains it, ignoring case
	// (SQLite folds ASCII letters only), or whose id it is.
	Search string
	// BeforeID pages backwards: only tasks with id < BeforeID.
	BeforeID int64
	// Limit caps the result (default and maximum MaxListLimit).
	Limit int
}

// Comment author kinds.
const (
	AuthorUser   = "user"
	AuthorAgent  = "agent"
	AuthorSystem = "system"
)

// Comment is one message of a task's thread.
type Comment struct {
	ID     int64 `json:"id"`
	TaskID int64 `json:"task_id"`
	// AuthorKind is AuthorUser, AuthorAgent or AuthorSystem.
	AuthorKind string    `json:"author_kind"`
	Author     string    `json:"author,omitempty"`
	Body       string    `json:"body"`
	CreatedAt  time.Time `json:"created_at"`
}

// NewComment is the input of AddComment.
type NewComment struct {
	TaskID     int64
	AuthorKind string
	Author     string
	Body       string
	// ResumeWaiting queues the task's waiting_human jobs again (a user's
	// answer to the agent's question).
	ResumeWaiting bool
}

// Piece is a piece stored at runtime.
type Piece struct {
	Name string `json:"name"`
	YAML string `json:"yaml"`
	// Version starts at 1 and grows by one on every update.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PieceVersion is one version of a stored piece: what the piece was from
// CreatedAt until the next version.
type PieceVersion struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	// YAML is empty in a listing of versions.
	YAML      string    `json:"yaml,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Schedule creates a task on every tick of a cron expression.
type Schedule struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	CronExpr string `json:"cron_expr"`
	Enabled  bool   `json:"enabled"`
	// The task each tick creates.
	Owner     string `json:"owner,omitempty"`
	Title     string `json:"title"`
	Body      string `json:"body,omitempty"`
	Piece     string `json:"piece,omitempty"`
	Profile   string `json:"profile,omitempty"`
	TaskClass string `json:"task_class,omitempty"`
	// NextRunAt is the next tick; LastFiredAt the last tick fired (zero:
	// never).
	NextRunAt   time.Time `json:"next_run_at"`
	LastFiredAt time.Time `json:"last_fired_at,omitzero"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// NewSchedule is the input of CreateSchedule and UpdateSchedule.
type NewSchedule struct {
	Name     string
	CronExpr string
	// Disabled stores the schedule switched off (it never fires until
	// updated); the zero value is enabled.
	Disabled  bool
	Owner     string
	Title     string
	Body      string
	Piece     string
	Profile   string
	TaskClass string
	// NextRunAt is the first tick, computed by the caller from CronExpr.
	NextRunAt time.Time
}

// FireParams is the input of FireSchedule.
type FireParams struct {
	ScheduleID int64
	// Tick is the schedule's NextRunAt as read from DueSchedules.
	Tick time.Time
	// Next is the tick after Tick.
	Next time.Time
}

// AuditEntry records one mutation.
type AuditEntry struct {
	ID     int64  `json:"id"`
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Target string `json:"target"`
	// Details is JSON (default {}).
	Details   json.RawMessage `json:"details"`
	CreatedAt time.Time       `json:"created_at"`
}

// NewAuditEntry is the input of AppendAudit.
type NewAuditEntry struct {
	Actor   string
	Action  string
	Target  string
	Details json.RawMessage
}

// AuditFilter selects entries for ListAudit; zero fields do not filter.
type AuditFilter struct {
	Target   string
	BeforeID int64
	Limit    int
}

// Session is the database record of an agent session.
type Session struct {
	ID string `json:"id"`
	// JobID is the job that ran the session (0: none, e.g. `maestro run`).
	JobID        int64     `json:"job_id,omitempty"`
	ExecutorType string    `json:"executor_type,omitempty"`
	Provider     string    `json:"provider,omitempty"`
	Model        string    `json:"model,omitempty"`
	Workspace    string    `json:"workspace,omitempty"`
	Title        string    `json:"title,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// SessionFilter selects session records; zero fields do not filter.
type SessionFilter struct {
	JobID int64
	Limit int
}

// Notification topics used by the store itself.
const (
	// TopicJobs is notified whenever a job becomes queued.
	TopicJobs = "jobs"
)

// JobTopic is the topic notified whenever events are appended to job id's
// log (including its status events).
func JobTopic(id int64) string { return "job:" + strconv.FormatInt(id, 10) }

// Notification is one wake-up hint.
type Notification struct {
	Topic   string
	Payload string
}

// Backoff is the default retry delay after the given failed attempt
// (1-based): 2 s, 8 s, 18 s, 32 s, … (2·n² seconds), capped at 10 minutes.
func Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 17 {
		return 10 * time.Minute
	}
	return min(time.Duration(2*attempt*attempt)*time.Second, 10*time.Minute)
}
