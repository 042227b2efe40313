// Package api holds the request and response bodies of Maestro's REST API
// (`maestro serve`, routes under /api/v1/ and the health probes): the one
// definition of their JSON that the server (internal/server) answers with,
// the Go client (internal/api/client) decodes and docs/openapi.yaml
// describes. A test in internal/server checks the document against these
// types field by field, so the web UI can generate its types from the
// document. docs/api.md is the guide for users.
//
// Rows of the store (tasks, jobs, comments, events, schedules, audit
// entries) travel as the store's own types, whose JSON tags are part of the
// API. The package holds types and constants only.
package api

import (
	"encoding/json"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/store"
)

// Paths of the API, for clients and the server's Location headers.
const (
	// Prefix is the path prefix of every REST route.
	Prefix = "/api/v1"
	// TasksPath lists and creates tasks; a task is TasksPath + "/{id}".
	TasksPath = Prefix + "/tasks"
	// JobsPath lists jobs; a job is JobsPath + "/{id}".
	JobsPath = Prefix + "/jobs"
	// PiecesPath lists and creates pieces; a piece is PiecesPath + "/{name}".
	PiecesPath = Prefix + "/pieces"
	// SchedulesPath lists and creates schedules.
	SchedulesPath = Prefix + "/schedules"
	// AuditPath lists the audit log.
	AuditPath = Prefix + "/audit"
)

// Multipart task creation (POST /api/v1/tasks as multipart/form-data).
const (
	// TaskPart names the first part: the CreateTaskRequest as JSON.
	TaskPart = "task"
	// FilePart names every following part: one input file, its filename
	// the path under input/.
	FilePart = "file"
	// MaxTaskFiles is the most files one multipart create may carry.
	MaxTaskFiles = 100
)

// NoopPiece is the piece name the queue's engine runner completes at once
// (health checks, benchmarks); tasks may name it though no piece file
// defines it.
const NoopPiece = "noop"

// SSE event names of GET /api/v1/jobs/{id}/events besides the job events
// themselves (whose SSE event name is their type).
const (
	// StreamEndEvent closes a stream of a finished job; its data is a
	// StreamEnd.
	StreamEndEvent = "end"
	// StreamErrorEvent reports a failure inside a stream; its data is an
	// Error. The client reconnects with Last-Event-ID.
	StreamErrorEvent = "error"
)

// Error is the error body of every REST route: a message, the request
// field at fault when there is one, and a piece's validator faults (422 of
// the piece routes). internal/httpedge writes it (its REST surface); the
// piece routes add Errors.
type Error struct {
	Error  string       `json:"error"`
	Field  string       `json:"field,omitempty"`
	Errors []PieceFault `json:"errors,omitempty"`
}

// PieceFault is one validator fault of a piece.
type PieceFault struct {
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// CreateTaskRequest is the body of POST /api/v1/tasks (or its "task" part).
type CreateTaskRequest struct {
	Title       string `json:"title"`
	Body        string `json:"body,omitempty"`
	Piece       string `json:"piece,omitempty"`
	Profile     string `json:"profile,omitempty"`
	TaskClass   string `json:"task_class,omitempty"`
	Priority    int    `json:"priority,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	// Payload is the job's input, a JSON object.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Executor chooses what runs the task's job: ExecutorNative,
	// ExecutorAgentCLI (with Agent, one of ServerInfo.Agents) or
	// ExecutorReplay; empty: the worker's default (ServerInfo's
	// ExecutorDefault). Carried in the job payload (docs/queue.md,
	// "Executors").
	Executor string `json:"executor,omitempty"`
	Agent    string `json:"agent,omitempty"`
	// AgentSession (executor agent-cli only) is a session of the agent
	// CLI Agent that the task continues: its first movement resumes that
	// CLI session instead of starting afresh ("resume as a task"). The
	// adapter must be able to resume. Carried in the job payload.
	AgentSession string `json:"agent_session,omitempty"`
}

// Executors of CreateTaskRequest.Executor (and of the job payload's
// "executor").
const (
	// ExecutorNative runs the task on Maestro's own loop over the
	// worker's live model.
	ExecutorNative = "native"
	// ExecutorAgentCLI runs every movement of the task's piece on the
	// agent CLI CreateTaskRequest.Agent names.
	ExecutorAgentCLI = "agent-cli"
	// ExecutorReplay plays the bundled replay demo, even on a worker with
	// a model.
	ExecutorReplay = "replay"
)

// Executors lists the values of CreateTaskRequest.Executor.
func Executors() []string { return []string{ExecutorNative, ExecutorAgentCLI, ExecutorReplay} }

// CreateTaskResponse answers POST /api/v1/tasks.
type CreateTaskResponse struct {
	Task store.Task `json:"task"`
	Job  store.Job  `json:"job"`
	// Files are the files sent with a multipart create, waiting for the
	// first job to move them into input/.
	Files []FileRef `json:"files,omitempty"`
}

// FileRef names a file received by the server: a file sent with a task
// (under input/) or an upload (PUT /api/v1/tasks/{id}/uploads/{path}).
type FileRef struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// TaskList answers GET /api/v1/tasks, newest first; NextBefore pages on.
type TaskList struct {
	Tasks      []store.Task `json:"tasks"`
	NextBefore int64        `json:"next_before,omitempty"`
}

// TaskDetail answers GET /api/v1/tasks/{id}.
type TaskDetail struct {
	Task     store.Task      `json:"task"`
	Jobs     []store.Job     `json:"jobs"`
	Comments []store.Comment `json:"comments"`
}

// CommentRequest is the body of POST /api/v1/tasks/{id}/comments.
type CommentRequest struct {
	Body string `json:"body"`
}

// CommentResponse answers POST /api/v1/tasks/{id}/comments: the comment
// and the waiting jobs it resumed.
type CommentResponse struct {
	Comment     store.Comment `json:"comment"`
	ResumedJobs []store.Job   `json:"resumed_jobs"`
}

// CommentEvent is the data of the job event a comment appends to the
// task's latest job, so that followers of the job see it.
type CommentEvent struct {
	CommentID  int64  `json:"comment_id"`
	AuthorKind string `json:"author_kind"`
	Author     string `json:"author,omitempty"`
	Body       string `json:"body"`
}

// Deliverable is one file of a task's output/.
type Deliverable struct {
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// DeliverableList answers GET /api/v1/tasks/{id}/deliverables, sorted by
// path.
type DeliverableList struct {
	Files []Deliverable `json:"files"`
	// Truncated is set when the listing stopped at the server's limits:
	// Files is then only part of output/.
	Truncated bool `json:"truncated,omitempty"`
}

// JobList answers GET /api/v1/jobs, oldest first; NextAfter pages on.
type JobList struct {
	Jobs      []store.Job `json:"jobs"`
	NextAfter int64       `json:"next_after,omitempty"`
}

// JobResponse answers GET /api/v1/jobs/{id} and the job actions.
type JobResponse struct {
	Job store.Job `json:"job"`
}

// CancelRequest is the (optional) body of POST /api/v1/jobs/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// RetryRequest is the (optional) body of POST /api/v1/jobs/{id}/retry.
type RetryRequest struct {
	// Extra is how many attempts to add (0 means 1).
	Extra int `json:"extra,omitempty"`
}

// JobEventPage answers GET /api/v1/jobs/{id}/events as JSON.
type JobEventPage struct {
	Events []store.JobEvent `json:"events"`
	// State and LastSeq are the job's as of the read.
	State     store.State `json:"state"`
	LastSeq   int64       `json:"last_seq"`
	NextAfter int64       `json:"next_after,omitempty"`
}

// StreamEnd is the data of the event stream's StreamEndEvent.
type StreamEnd struct {
	State   store.State `json:"state"`
	LastSeq int64       `json:"last_seq"`
}

// Piece sources.
const (
	SourceBuiltin = "builtin"
	SourceStore   = "store"
	SourceFile    = "file"
)

// PieceSummary is one entry of GET /api/v1/pieces.
type PieceSummary struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Source is SourceBuiltin, SourceFile or SourceStore.
	Source string `json:"source"`
	// File is the override file a SourceFile piece comes from.
	File      string   `json:"file,omitempty"`
	Builtin   bool     `json:"builtin"`
	Deletable bool     `json:"deletable"`
	Version   int64    `json:"version,omitempty"`
	Movements []string `json:"movements,omitempty"`
	// Error is set when a stored piece no longer passes the validator.
	Error string `json:"error,omitempty"`
	// MissingTools (GET /api/v1/pieces) names the tools the piece's
	// movements allow that this server lacks (an MCP server neither
	// configured nor registered), and "required_mcp <slug>" for each
	// required MCP server it lacks, as `maestro pieces list` shows.
	MissingTools []string `json:"missing_tools,omitempty"`
}

// PieceList answers GET /api/v1/pieces, sorted by name.
type PieceList struct {
	Pieces []PieceSummary `json:"pieces"`
}

// PieceDetail answers GET, PUT and POST on one piece.
type PieceDetail struct {
	PieceSummary
	YAML  string       `json:"yaml"`
	Piece *piece.Piece `json:"piece,omitempty"`
}

// PieceRequest is the JSON form of a piece body (the body may also be the
// YAML itself).
type PieceRequest struct {
	YAML string `json:"yaml"`
	// IfVersion (PUT only) replaces the piece only at this version.
	IfVersion int64 `json:"if_version,omitempty"`
}

// PieceValidation answers POST /api/v1/pieces/validate.
type PieceValidation struct {
	Valid bool         `json:"valid"`
	Piece *piece.Piece `json:"piece"`
}

// PieceDeleted answers DELETE /api/v1/pieces/{name}.
type PieceDeleted struct {
	Deleted string `json:"deleted"`
	// BuiltinRestored is set when the deleted piece overrode a built-in,
	// which is in use again.
	BuiltinRestored bool `json:"builtin_restored"`
}

// PieceVersionList answers GET /api/v1/pieces/{name}/versions: every
// version of a stored piece, newest first (the first is the piece as it
// is), without their YAML; GET …/versions/{version} answers one
// store.PieceVersion with its YAML.
type PieceVersionList struct {
	Versions []store.PieceVersion `json:"versions"`
}

// ScheduleRequest is the body of POST and PUT on schedules.
type ScheduleRequest struct {
	Name     string `json:"name"`
	CronExpr string `json:"cron_expr"`
	// Enabled defaults to true.
	Enabled   *bool  `json:"enabled,omitempty"`
	Title     string `json:"title"`
	Body      string `json:"body,omitempty"`
	Piece     string `json:"piece,omitempty"`
	Profile   string `json:"profile,omitempty"`
	TaskClass string `json:"task_class,omitempty"`
}

// ScheduleResponse answers the routes of one schedule.
type ScheduleResponse struct {
	Schedule store.Schedule `json:"schedule"`
}

// ScheduleList answers GET /api/v1/schedules.
type ScheduleList struct {
	Schedules []store.Schedule `json:"schedules"`
}

// AuditList answers GET /api/v1/audit, newest first; NextBefore pages on.
type AuditList struct {
	Entries    []store.AuditEntry `json:"entries"`
	NextBefore int64              `json:"next_before,omitempty"`
}

// Health statuses.
const (
	HealthOK          = "ok"
	HealthReady       = "ready"
	HealthUnavailable = "unavailable"
)

// Health answers /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
	// Error says why the server is not ready.
	Error string `json:"error,omitempty"`
}

// ServerPath describes the server: GET /api/v1/server.
const ServerPath = Prefix + "/server"

// Stores of ServerInfo.Store.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// ServerInfo answers GET /api/v1/server: what the serving process and
// the store know about the deployment. A field the server cannot know is
// left out, never guessed.
type ServerInfo struct {
	Version string `json:"version"`
	// Store is StoreSQLite or StorePostgres.
	Store string `json:"store,omitempty"`
	// StartedAt is when this process started serving.
	StartedAt time.Time `json:"started_at,omitzero"`
	// ExecutorDefault is what runs this process's jobs unless a task says
	// otherwise: "replay" (no model configured) or "native" (Maestro's
	// own loop over a live model); left out when it runs no workers.
	ExecutorDefault string `json:"executor_default,omitempty"`
	// Agents are the agent CLIs this process's workers can run a task on
	// (CreateTaskRequest.Agent): the adapters whose binary is installed;
	// left out when it runs no workers.
	Agents []string `json:"agents,omitempty"`
	// Workers are this process's worker pool and every worker holding a
	// job's lease, by name.
	Workers []ServerWorker `json:"workers"`
	// Queue counts the jobs by state (every state, zeros included).
	Queue map[store.State]int64 `json:"queue"`
}

// ServerWorker is one worker of ServerInfo.
type ServerWorker struct {
	// ID is the worker's name (serve --name, else host:pid).
	ID string `json:"id"`
	// Host is the machine, known for this process's own workers and for
	// the idle worker processes the store records.
	Host string `json:"host,omitempty"`
	// RunningJobs are the jobs the worker holds a lease on (dispatching or
	// running).
	RunningJobs []int64 `json:"running_jobs"`
	// LastSeen is the worker's latest claim or heartbeat on those jobs.
	LastSeen time.Time `json:"last_seen,omitzero"`
}

// AgentsPath lists the agent CLIs (GET, AgentList); AgentsPath/{id}/sessions
// lists the sessions one stored for a project (AgentSessionList) and
// AgentsPath/{id}/sessions/{session} reads one (agentcli.Transcript).
const AgentsPath = "/api/v1/agents"

// AgentList is the answer of GET /api/v1/agents: every agent CLI
// definition (built-in and the server's user files) with its detected
// binary, and the user files left out with their faults (file:line:col).
type AgentList struct {
	Agents  []agentcli.Info `json:"agents"`
	Invalid []string        `json:"invalid"`
}

// AgentSessionList is the answer of GET /api/v1/agents/{id}/sessions: the
// sessions the agent CLI stored for Project, newest first, and where it
// looked.
type AgentSessionList struct {
	Agent     string                 `json:"agent"`
	Project   string                 `json:"project"`
	Locations []string               `json:"locations"`
	Sessions  []agentcli.SessionInfo `json:"sessions"`
}
