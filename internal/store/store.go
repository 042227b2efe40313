// Package store is Maestro's durable state: tasks and their comments, jobs
// with their lease-based lifecycle and append-only event logs, runtime-edited
// pieces, cron schedules, the audit log, session records and leader leases.
//
// The package defines the types and the [Store] interface the queue, the
// scheduler and the REST API consume. Two backends implement it with the same
// semantics, proven by one conformance suite (package storetest):
//
//   - store/sqlite: the default, one file under ~/.maestro/, one process
//     (a data-directory lock makes a second process fail fast);
//   - store/postgres: many `maestro serve` / `maestro worker` processes on
//     many machines sharing one database.
//
// # Jobs
//
// A job moves through the states of [State]:
//
//	queued → dispatching → running → succeeded | failed | aborted
//	                              ↘ waiting_human | waiting_subtasks → queued
//	any non-terminal state → cancelled
//
// [Jobs.Claim] hands queued jobs to a worker under a lease: the job becomes
// dispatching, its attempt number is incremented and recorded with the
// worker's name as a [Lease]. Every later call the worker makes for that job
// ([Jobs.Start], [Jobs.Heartbeat], [Jobs.Complete], [Jobs.Fail], [Jobs.Wait],
// [Jobs.Release], [JobEvents.AppendJobEvents]) presents the lease and is
// fenced by it: it only takes effect while the job is still dispatching or
// running under that exact attempt and owner, otherwise it fails with
// [ErrLeaseLost] and changes nothing. A worker that stops heartbeating loses
// the job to [Jobs.ReapExpired] once the lease expires; the next claim gets a
// higher attempt number, so the old worker, if it was only slow, can no longer
// write anything.
//
// Every state change appends a "status" event ([StatusEvent]) to the job's
// event log in the same transaction, so the log alone tells the job's story.
//
// # Time
//
// Every backend takes its notion of "now" from an injectable clock (the
// backends' Options.Now), never from the database, so tests control time
// without sleeping. Processes sharing one PostgreSQL database must have
// synchronised clocks (NTP); lease durations of tens of seconds dwarf normal
// skew. Times are stored with microsecond precision, in UTC.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors returned by every backend. Test with errors.Is; the returned errors
// wrap these with what was being done.
var (
	// ErrNotFound: the row (job, task, piece, schedule, session…) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a uniqueness or optimistic-concurrency check failed (a piece
	// or schedule name already taken, a stale version).
	ErrConflict = errors.New("conflict")
	// ErrLeaseLost: a fenced call presented a lease that no longer holds the
	// job (reaped, cancelled, finished, or claimed again by a newer attempt).
	// The worker must stop working on the job; nothing was changed.
	ErrLeaseLost = errors.New("lease lost")
	// ErrInvalidTransition: the job is not in a state that allows the
	// requested change (cancel a finished job, resume a job that is not
	// waiting, retry a job that has not failed).
	ErrInvalidTransition = errors.New("invalid state transition")
	// ErrInvalid: the input was rejected before anything was written; the
	// error is a *FieldError naming the field.
	ErrInvalid = errors.New("invalid input")
)

// Store is everything Maestro keeps durably. Consumers should declare the
// smaller interface they need (often one of the embedded ones, or a subset of
// it) rather than depend on all of Store.
type Store interface {
	Jobs
	JobEvents
	RunStates
	Tasks
	Pieces
	Schedules
	Audit
	Sessions
	LiveSessions
	Processes
	JobEventCursors
	Leaders
	Notifier
	Registry
	Usage
	// Migrate applies the embedded schema migrations that are not applied
	// yet and returns their versions (none when the schema is current).
	// Backends migrate when they open; calling it again is harmless.
	Migrate(ctx context.Context) ([]int, error)
	// Close releases connections, listeners and locks.
	Close() error
}

// Jobs is the queue-level view of jobs: enqueue, claim under a lease, the
// fenced lifecycle calls of the worker holding the lease, and the unfenced
// operator calls (cancel, resume, retry).
type Jobs interface {
	// Enqueue stores a new queued job and wakes claimers (topic TopicJobs).
	Enqueue(ctx context.Context, j NewJob) (Job, error)
	// Claim hands up to p.Limit due queued jobs to p.Worker, highest priority
	// first, then oldest scheduled_at, then lowest id; with p.Workers, one
	// job to each name, the i-th job in that order to p.Workers[i]. Each
	// job becomes dispatching with attempt+1 and a lease until
	// now+p.LeaseFor. Concurrent claimers (goroutines or processes) never
	// receive the same job. With p.Start the jobs come back running, with
	// one status event (running) instead of a claim's and a start's.
	Claim(ctx context.Context, p ClaimParams) ([]Job, error)
	// Start moves a claimed job from dispatching to running. Fenced.
	Start(ctx context.Context, l Lease) (Job, error)
	// StartMany starts several claimed jobs, each as Start would, in as
	// few round trips as the backend allows (a pool starting the jobs of
	// one claim). The i-th outcome is that of leases[i]; one item failing
	// does not stop the others.
	StartMany(ctx context.Context, leases []Lease) []JobOutcome
	// Heartbeat extends the lease to now+extend and returns the new expiry.
	// Fenced: ErrLeaseLost tells the worker to stop (the job was reaped,
	// cancelled or finished).
	Heartbeat(ctx context.Context, l Lease, extend time.Duration) (time.Time, error)
	// Checkpoint records the engine's progress (current movement and opaque
	// state) so a later attempt can resume from it. Fenced.
	Checkpoint(ctx context.Context, l Lease, movement string, data []byte) error
	// SetPiece records the piece the job runs when it was not given (the
	// classifier's choice), so task lists show it. Fenced.
	SetPiece(ctx context.Context, l Lease, piece string) error
	// Complete ends the job as succeeded with its result text. Fenced.
	Complete(ctx context.Context, l Lease, result string) (Job, error)
	// CompleteMany completes several jobs, each as Complete would (each
	// fenced by its own lease, each with its status event), in as few
	// round trips as the backend allows (a pool completing the jobs its
	// workers finished at about the same time). The i-th outcome is that
	// of cs[i]; one item failing does not stop the others.
	CompleteMany(ctx context.Context, cs []Completion) []JobOutcome
	// Fail records a failed attempt. The job is queued again at
	// now+p.RetryAfter while attempts remain (attempt < max_attempts) unless
	// p.NoRetry or p.Abort; otherwise it ends failed (aborted with p.Abort).
	// Fenced.
	Fail(ctx context.Context, l Lease, p FailParams) (Job, error)
	// Wait parks the job in waiting_human or waiting_subtasks and releases
	// the lease. With p.Question set (waiting_human), the question is posted
	// as an agent comment on the job's task in the same transaction. A job
	// that waits for subtasks that are all finished already is queued again
	// at once. Fenced.
	Wait(ctx context.Context, l Lease, p WaitParams) (Job, error)
	// Release gives a claimed job back (graceful shutdown): it is queued
	// again at once and the attempt it used is not counted against
	// max_attempts (max_attempts grows by one). Fenced.
	Release(ctx context.Context, l Lease) (Job, error)
	// ReapExpired requeues up to limit jobs whose lease expired (or fails
	// them when no attempts remain) and returns them in their new state.
	ReapExpired(ctx context.Context, limit int) ([]Job, error)
	// Cancel ends a job that has not finished as cancelled. A worker holding
	// it learns of it through ErrLeaseLost on its next fenced call and
	// through a notification on JobTopic(id).
	Cancel(ctx context.Context, id int64, reason string) (Job, error)
	// Resume queues a waiting_human or waiting_subtasks job again. Waiting
	// is not an attempt: max_attempts grows by one, so the next claim's
	// new attempt number leaves as many attempts as before the wait.
	Resume(ctx context.Context, id int64) (Job, error)
	// Retry queues a failed, aborted or cancelled job again and adds extra
	// (at least one) to the attempts it had left.
	Retry(ctx context.Context, id int64, extra int) (Job, error)
	// GetJob returns one job.
	GetJob(ctx context.Context, id int64) (Job, error)
	// ListJobs returns jobs matching f in ascending id order.
	ListJobs(ctx context.Context, f JobFilter) ([]Job, error)
	// CountJobs returns the number of jobs in each state (states with no
	// jobs are absent).
	CountJobs(ctx context.Context) (map[State]int64, error)
}

// JobEvents is the per-job append-only event log. Sequence numbers start at
// 1 and have no gaps; appends are serialised per job.
type JobEvents interface {
	// AppendJobEvents appends events for the worker holding l and returns
	// them with their sequence numbers. Fenced: a worker that lost the job
	// gets ErrLeaseLost and appends nothing. All or nothing: one invalid
	// event rejects the batch.
	AppendJobEvents(ctx context.Context, l Lease, events []NewJobEvent) ([]JobEvent, error)
	// AppendSystemJobEvents appends events on behalf of the system (the API
	// posting a comment, an operator note) in any state. Not fenced.
	AppendSystemJobEvents(ctx context.Context, jobID int64, events []NewJobEvent) ([]JobEvent, error)
	// ReadJobEvents returns up to limit events of the job with seq > after,
	// in order. An unknown job yields ErrNotFound.
	ReadJobEvents(ctx context.Context, jobID int64, after int64, limit int) ([]JobEvent, error)
}

// Tasks holds user-facing tasks and their comment threads.
type Tasks interface {
	// CreateTask stores a task and enqueues its first job in one
	// transaction.
	CreateTask(ctx context.Context, t NewTask) (Task, Job, error)
	// GetTask returns a task with the id and state of its latest job.
	GetTask(ctx context.Context, id int64) (Task, error)
	// ListTasks returns tasks newest first.
	ListTasks(ctx context.Context, f TaskFilter) ([]Task, error)
	// AddComment appends a comment to a task. With c.ResumeWaiting, every
	// waiting_human job of the task is queued again in the same transaction
	// and returned.
	AddComment(ctx context.Context, c NewComment) (Comment, []Job, error)
	// ListComments returns the task's comments with id > after, oldest
	// first, at most limit.
	ListComments(ctx context.Context, taskID int64, after int64, limit int) ([]Comment, error)
}

// Pieces holds pieces created or edited at runtime. The store checks names
// and sizes only; validating the YAML is the piece package's job.
type Pieces interface {
	// CreatePiece stores a new piece at version 1; ErrConflict if the name
	// is taken.
	CreatePiece(ctx context.Context, name, yaml string) (Piece, error)
	// UpdatePiece replaces a piece's YAML and increments its version. With
	// ifVersion > 0 the update only happens at that version (ErrConflict
	// otherwise).
	UpdatePiece(ctx context.Context, name, yaml string, ifVersion int64) (Piece, error)
	// GetPiece returns one piece.
	GetPiece(ctx context.Context, name string) (Piece, error)
	// ListPieces returns every stored piece by name.
	ListPieces(ctx context.Context) ([]Piece, error)
	// DeletePiece removes a piece, and its versions; with ifVersion > 0
	// only at that version.
	DeletePiece(ctx context.Context, name string, ifVersion int64) error
	// PieceVersions lists every version of a stored piece, newest first
	// (the first is the piece as it is), without their YAML; ErrNotFound if
	// there is no such piece.
	PieceVersions(ctx context.Context, name string) ([]PieceVersion, error)
	// GetPieceVersion returns one version of a stored piece, with its YAML;
	// ErrNotFound if the piece or that version does not exist.
	GetPieceVersion(ctx context.Context, name string, version int64) (PieceVersion, error)
}

// Schedules holds cron schedules that create tasks. Parsing cron
// expressions and computing the next run is the scheduler's job; the store
// guarantees each tick fires once.
type Schedules interface {
	// CreateSchedule stores a schedule; ErrConflict if the name is taken.
	CreateSchedule(ctx context.Context, s NewSchedule) (Schedule, error)
	// UpdateSchedule replaces a schedule's definition.
	UpdateSchedule(ctx context.Context, id int64, s NewSchedule) (Schedule, error)
	// GetSchedule returns one schedule.
	GetSchedule(ctx context.Context, id int64) (Schedule, error)
	// ListSchedules returns every schedule by id.
	ListSchedules(ctx context.Context) ([]Schedule, error)
	// DeleteSchedule removes a schedule; tasks it created keep existing.
	DeleteSchedule(ctx context.Context, id int64) error
	// DueSchedules returns up to limit enabled schedules whose next run is
	// at or before now, earliest first.
	DueSchedules(ctx context.Context, limit int) ([]Schedule, error)
	// FireSchedule fires the tick p.Tick of a schedule: if the schedule is
	// enabled and its next_run_at is exactly p.Tick, it moves next_run_at to
	// p.Next, records last_fired_at and creates the schedule's task and job,
	// all in one transaction, and reports fired=true. Any other caller
	// firing the same tick (another goroutine, another process) gets
	// fired=false: each tick fires exactly once.
	FireSchedule(ctx context.Context, p FireParams) (task Task, job Job, fired bool, err error)
}

// Audit is the append-only record of mutations made through the API.
type Audit interface {
	// AppendAudit records one entry.
	AppendAudit(ctx context.Context, e NewAuditEntry) (AuditEntry, error)
	// ListAudit returns entries newest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// Sessions indexes agent sessions (their logs live in internal/session).
type Sessions interface {
	// PutSession creates or updates a session record; CreatedAt is kept
	// from the first put.
	PutSession(ctx context.Context, s Session) (Session, error)
	// GetSession returns one session record.
	GetSession(ctx context.Context, id string) (Session, error)
	// ListSessions returns session records newest first.
	ListSessions(ctx context.Context, f SessionFilter) ([]Session, error)
}

// Leaders implements leader election by an expiring row per role, so that
// maintenance (reaping, firing schedules) can run on one process at a time.
// Correctness never depends on it: reaping and firing are safe to run
// concurrently; the leader only avoids wasted work.
type Leaders interface {
	// ElectLeader makes owner the leader of name until now+ttl if there is
	// no leader, the leader's term expired, or owner already leads (which
	// extends the term). It reports whether owner leads.
	ElectLeader(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	// ResignLeader ends owner's term for name early (no-op if owner does
	// not lead).
	ResignLeader(ctx context.Context, name, owner string) error
}

// Notifier carries wake-up hints between processes (PostgreSQL
// LISTEN/NOTIFY) or goroutines (SQLite, in process). Notifications are hints:
// they may be coalesced or dropped when a subscriber is slow, so a consumer
// must re-read the state it cares about on every wake-up.
type Notifier interface {
	// Notify publishes a notification on a topic.
	Notify(ctx context.Context, topic, payload string) error
	// Subscribe returns a subscription to a topic. Notifications published
	// after Subscribe returns are delivered (subject to the lossy rule
	// above). Close the subscription when done; it is also closed when ctx
	// ends or the store closes.
	Subscribe(ctx context.Context, topic string) (*Subscription, error)
}
