// Package engine is Maestro's piece runner: it runs a piece (a YAML
// workflow of movements, see internal/piece) over a workspace, one native
// agent loop per movement, and decides what happens between movements.
//
// A run starts at the piece's initial_movement. Each movement's model sees
// the movement's persona and instruction as its system prompt and only the
// movement's allowed_tools, plus two control tools the engine always adds:
// transition (hop to a movement named in the movement's rules, with a
// summary and lessons) and complete (end the run: success, aborted or
// needs_user_input). Around that loop the engine enforces max_movements,
// reminds a model that answers without a control tool, counts revisits and
// A⇄B cycles with progressive pressure, watches the context window
// (70/85/95 %), runs subtasks in parallel, pauses for the user (ASK) and
// persists the run's state so that a paused or interrupted run continues in
// another process. Run-level facts are reported as typed events (Record);
// the agent loop's protocol events and messages go to an agent.Sink.
//
// The classifier (Classify) picks a piece for a task; the Library holds
// the piece catalog and backs the piece tools (ListPieces, GetPiece,
// CreatePiece, UpdatePiece). docs/engine.md describes the behaviour in
// full.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Defaults of Config.
const (
	// DefaultReminders is how many times a model that answers without
	// calling transition or complete is reminded before the engine falls
	// back to the movement's default_next.
	DefaultReminders = 2
	// DefaultMaxLessons caps the lessons a run keeps (the oldest go first).
	DefaultMaxLessons = 20
	// DefaultMaxParallelSubtasks bounds how many subtasks run at once.
	DefaultMaxParallelSubtasks = 3
	// DefaultMaxSubtasks caps the subtasks one run may spawn.
	DefaultMaxSubtasks = 8
	// DefaultMaxIterations caps model calls per movement.
	DefaultMaxIterations = 50
)

// Context pressure thresholds: the share of the model's context window the
// last model call occupied.
const (
	ContextWarn   = 0.70
	ContextPrompt = 0.85
	ContextForce  = 0.95
)

// Config configures an Engine. Provider and Workspace are required.
type Config struct {
	// Provider is the model every movement talks to.
	Provider llm.Provider
	// Workspace is the directory the tools work in.
	Workspace *workspace.Root
	// RunDir holds the run's files: logs/ (state, lock) and subtasks/
	// (the subtasks' runs, and their results unless JobWorkspace). The
	// engine reaches them without following a symbolic link below RunDir.
	// Empty means the workspace itself, laid out as a job workspace
	// (input/, output/, logs/, subtasks/ and skills/): there the agent
	// can write the run's files, so prefer a RunDir out of its reach.
	RunDir string
	// JobWorkspace lays the workspace out as a queued job's: input/,
	// output/, subtasks/ and skills/ are created in it, the prompt names
	// them, and subtask results are written to its subtasks/ (the subtasks'
	// runs stay in RunDir). Implied when RunDir is empty.
	JobWorkspace bool
	// Sandbox runs Bash; nil leaves Bash out of every movement.
	Sandbox *sandbox.Sandbox
	// FileLimits bounds Read, Edit and Write (zero: the tools' defaults).
	FileLimits tool.FileLimits
	// Web configures WebFetch, DownloadFile and WebSearch (its OnBlock is
	// replaced: a refused destination is recorded as a firewall_block run
	// event); nil leaves them out.
	Web *tool.WebOptions
	// SSH holds the registered SSH connections of SshExec, SshUpload and
	// SshDownload (each movement's allowed_ssh_connections limits them);
	// nil leaves the SSH tools out.
	SSH map[string]tool.SSHConnection
	// Library holds the pieces (subtask pieces, piece tools); nil leaves
	// the piece tools and SpawnSubTask out.
	Library *Library
	// Sink receives the agent loops' protocol events and messages; nil
	// discards them.
	Sink agent.Sink
	// Events receives the run events, each once; nil discards them. To
	// show them on a protocol-only surface as status lines, wrap it with
	// WithStatusLines.
	Events EventSink
	// Agents runs the movements that name an agent CLI (`agent:`); nil
	// makes such a movement fail the run with ErrAgentCLI.
	Agents AgentRunner
	// Agent, when set, runs every movement on this agent CLI (Agents'
	// adapter id), as if each named `agent: <Agent>`: a task submitted
	// with an agent-CLI executor (docs/queue.md, "Executors").
	Agent string
	// ResumeAgentSession, when set, is a session of the agent CLI Agent
	// that the run's first movement resumes instead of starting the CLI
	// afresh: a task that continues a stored CLI session ("resume as a
	// task", docs/queue.md, "Executors"). The adapter must be able to
	// resume; otherwise the run fails with ErrAgentCLI.
	ResumeAgentSession string
	// MCP gives movements their mcp__ tools and starts the servers a
	// piece's required_mcp lists; nil: no MCP server is configured.
	MCP MCPServers
	// Skills are the skills ReadSkill materialises into the workspace's
	// skills/ (docs/skills.md); nil leaves ReadSkill out.
	Skills *skills.Library

	// ContextWindow overrides the model's context window (0 = the model
	// catalogue's; unknown means no context pressure).
	ContextWindow int64
	// MaxIterations caps model calls per movement (default 50).
	MaxIterations int
	// MaxTokens caps each response (0 = provider default).
	MaxTokens int
	Thinking  llm.ThinkingLevel
	// Approve and NeedsApproval are passed to the agent loop; the control
	// tools never need approval.
	Approve       agent.Approver
	NeedsApproval func(t tool.Tool, call llm.ToolCall) bool

	// Reminders (default 2), MaxLessons (default 20), MaxParallelSubtasks
	// (default 3) and MaxSubtasks (default 8) tune the run; see the
	// Default constants.
	Reminders           int
	MaxLessons          int
	MaxParallelSubtasks int
	MaxSubtasks         int
	// Models gives the provider of a model that a piece or movement
	// names (`model: provider/model`, piece.Piece.ModelFor); its error
	// says why the model cannot be used (a provider that is not
	// configured). Nil means no run can use such a piece: its movements
	// fail naming the model. A run on a replay provider plays its script
	// whatever model a piece names.
	Models func(ctx context.Context, spec string) (llm.Provider, error)
	// ClassifierProvider, when set, is the model that picks a new run's
	// piece (config classifier_model: a cheap, fast model); nil means
	// Provider.
	ClassifierProvider llm.Provider
	// SubtaskProvider, when set, gives each subtask its model; nil means
	// Provider. On replay a subtask needs its own script, so without it
	// SpawnSubTask is not offered when Provider is a replay provider.
	SubtaskProvider func(s SubtaskRecord) (llm.Provider, error)
	// SubtaskJobs, when set, runs the run's subtasks as child jobs of a
	// queue instead of in this process (subjobs.go); SubtaskProvider then
	// only decides, on replay, whether SpawnSubTask is offered.
	SubtaskJobs SubtaskJobs
	// Subtask, when positive, makes the run subtask number Subtask of a
	// run in another job (a child job, SubtaskJobs): it cannot spawn
	// subtasks, and it leaves the shared workspace's layout alone.
	Subtask int
	// FollowLog, when set, is called with each subtask's session log once
	// it is created (the platform event bus follows it, docs/events.md);
	// the function it returns, when not nil, is called with the log's
	// last cursor when the subtask ends.
	FollowLog func(dir string, meta session.Meta) (closed func(cursor int64, reason string))
	// Now is the clock (default time.Now).
	Now func() time.Time

	// Notices is shared by the run's agents (movements, reminders,
	// subtasks), so a notice such as unknown pricing is given once per
	// run; nil: a fresh one.
	Notices *agent.Notices

	// StateSaved, when set, is called with the run's state document
	// (the content of StateFile) each time the state is saved, under the
	// run's lock: a queued job keeps it in the store, so that any worker
	// resumes the run (docs/queue.md, "Run state in the store"). An error
	// stops the run as a failed save of the state file does. Subtask runs
	// do not inherit it.
	StateSaved func(movement string, data []byte) error
	// KeepProgress saves the current movement's conversation in the state
	// (State.Progress) after each round of tool results, so that Resume
	// of an interrupted run continues the movement's conversation instead
	// of briefing the movement afresh (see progress.go). Subtask runs do
	// not inherit it.
	KeepProgress bool
}

// Engine runs pieces. It is safe to use for several runs, one at a time
// per run directory.
type Engine struct {
	cfg   Config
	depth int
	// run locates the run directory (cfg.RunDir) for no-follow access.
	run runPath
}

// New checks cfg and returns an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Provider == nil {
		return nil, errors.New("engine: no model provider")
	}
	if cfg.Workspace == nil {
		return nil, errors.New("engine: no workspace")
	}
	if cfg.RunDir == "" {
		cfg.RunDir = cfg.Workspace.Dir()
	}
	abs, err := filepath.Abs(cfg.RunDir)
	if err != nil {
		return nil, fmt.Errorf("engine: run directory: %w", err)
	}
	cfg.RunDir = abs
	if cfg.RunDir == cfg.Workspace.Dir() {
		cfg.JobWorkspace = true
	}
	if cfg.Sink == nil {
		cfg.Sink = discard{}
	}
	if cfg.Notices == nil {
		cfg.Notices = &agent.Notices{}
	}
	if cfg.Events == nil {
		cfg.Events = EventSinkFunc(func(Record) {})
	}
	if cfg.MaxIterations <= 0 {
		cfg.MaxIterations = DefaultMaxIterations
	}
	if cfg.Reminders <= 0 {
		cfg.Reminders = DefaultReminders
	}
	if cfg.MaxLessons <= 0 {
		cfg.MaxLessons = DefaultMaxLessons
	}
	if cfg.MaxParallelSubtasks <= 0 {
		cfg.MaxParallelSubtasks = DefaultMaxParallelSubtasks
	}
	if cfg.MaxSubtasks <= 0 {
		cfg.MaxSubtasks = DefaultMaxSubtasks
	}
	if cfg.SubtaskProvider == nil {
		cfg.SubtaskProvider = replaySubtasks(cfg.Provider)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Engine{cfg: cfg, run: runPath{base: cfg.RunDir}}
	if cfg.Subtask > 0 {
		e.depth = 1
	}
	return e, nil
}

// RunDir returns the engine's run directory.
func (e *Engine) RunDir() string { return e.cfg.RunDir }

// jobLayout reports whether the run's workspace is laid out as a job
// workspace (Config.JobWorkspace); a subtask's run shares its parent's
// workspace and leaves it alone.
func (e *Engine) jobLayout() bool { return e.depth == 0 && e.cfg.JobWorkspace }

// jobDirs are the directories of a job workspace.
func jobDirs() []string { return []string{"input", "output", "subtasks", "skills"} }

// Outcome is where a run stands when Start or Resume returns.
type Outcome struct {
	RunID string
	Piece string
	// Status is succeeded, aborted or waiting_human when the run stopped
	// normally (or waiting_subtasks, its child jobs unfinished, with
	// Config.SubtaskJobs); running (interrupted) or failed when an error is returned.
	Status RunStatus
	// Result is what the user sees: complete's result, the question of a
	// waiting run, or why the run was aborted or failed.
	Result string
	// Reason is set when Maestro, not the model, ended the run.
	Reason string
	// Movement is the last movement that ran; Movements how many ran.
	Movement  string
	Movements int
	// Accounting over the whole run (every movement, across resumes).
	Usage        llm.Usage
	CostUSD      float64
	CostKnown    bool
	ModelCalls   int
	ToolCalls    int
	ToolFailures int
	// ChildJobs counts the subtasks that were enqueued as child jobs
	// (Config.SubtaskJobs), finished or not: a caller whose run ended
	// cancels those still running.
	ChildJobs int
}

// Errors returned by Start and Resume (wrapped; test with errors.Is).
var (
	// ErrRunExists: Start found a run in the run directory.
	ErrRunExists = errors.New("a run already exists in this run directory")
	// ErrFinished: Resume of a run that has ended.
	ErrFinished = errors.New("the run has ended")
	// ErrNeedsAnswer: Resume of a run waiting for the user, without an
	// answer.
	ErrNeedsAnswer = errors.New("the run is waiting for an answer")
	// ErrAgentCLI: a movement names an agent CLI that cannot run (no
	// Config.Agents, unknown adapter, binary not installed).
	ErrAgentCLI = errors.New("agent CLI unavailable")
)

// StartOptions are optional inputs of Start.
type StartOptions struct {
	// RunID names the run; empty generates one.
	RunID string
	// FirstFrame is the replay position of the run's first model turn:
	// the number of model turns earlier runs made in the same replay
	// session (a follow-up run continues the session's script). It only
	// matters on a replay provider.
	FirstFrame int
	// subtask is the subtask number of a child run.
	subtask int
}

// Start runs piece p on task from its initial movement until the run
// succeeds, aborts, waits for the user or fails. The piece is checked with
// the validator first (a piece built in code may be invalid). The returned
// Outcome is never nil; the error is non-nil when the run stopped on a
// failure (model error, cancellation: errors.Is(err, agent.ErrCancelled)).
func (e *Engine) Start(ctx context.Context, p *piece.Piece, task string, opts StartOptions) (*Outcome, error) {
	src, err := piece.Marshal(p)
	if err != nil {
		return &Outcome{Status: StatusFailed}, fmt.Errorf("start run: %w", err)
	}
	checked, err := piece.Parse(p.Name+".yaml", src)
	if err != nil {
		return &Outcome{Status: StatusFailed, Piece: p.Name}, fmt.Errorf("start run: invalid piece: %w", err)
	}
	if err := e.requireMCP(ctx, checked); err != nil {
		return &Outcome{Status: StatusFailed, Piece: p.Name}, fmt.Errorf("start run: %w", err)
	}
	if err := e.prepareDirs(); err != nil {
		return &Outcome{Status: StatusFailed, Piece: p.Name}, err
	}
	unlock, err := e.run.lock()
	if err != nil {
		return &Outcome{Status: StatusFailed, Piece: p.Name}, err
	}
	defer unlock()
	if ok, err := e.run.has(); err != nil {
		return &Outcome{Status: StatusFailed, Piece: p.Name}, fmt.Errorf("start run: %w", err)
	} else if ok {
		return &Outcome{Status: StatusFailed, Piece: p.Name}, fmt.Errorf("%w: %s", ErrRunExists, e.cfg.RunDir)
	}
	id := opts.RunID
	if id == "" {
		id = newRunID()
	}
	now := e.cfg.Now().UTC()
	st := &State{
		Version: StateVersion, RunID: id, Piece: checked.Name, PieceYAML: string(src), Task: task, Depth: e.depth,
		Status: StatusRunning, Entry: EntryStart, History: []string{}, Lessons: []string{},
		ModelTurns: max(opts.FirstFrame, 0), Created: now, Updated: now,
	}
	r := e.newRun(checked, st)
	r.subtaskNo = opts.subtask
	if r.subtaskNo == 0 {
		r.subtaskNo = e.cfg.Subtask
	}
	r.emit(RunStarted{Piece: checked.Name, Task: task, InitialMovement: checked.InitialMovement, MaxMovements: checked.MaxMovements, Subtask: r.subtaskNo})
	if out := r.enter(checked.InitialMovement, EntryStart); out {
		return r.outcome(), r.saveErr
	}
	return r.drive(ctx)
}

// Resume continues the run in the engine's run directory. A run waiting
// for the user needs answer: the movement that asked continues with it. A
// run that was interrupted or failed restarts its current movement (answer,
// if given, is passed to it as a note from the user); one that was waiting
// for subtasks continues after them (subtasks that were running are
// reported as interrupted). A run that has ended returns ErrFinished.
func (e *Engine) Resume(ctx context.Context, answer string) (*Outcome, error) {
	unlock, err := e.run.lock()
	if err != nil {
		return &Outcome{Status: StatusFailed}, err
	}
	defer unlock()
	st, err := e.run.load()
	if err != nil {
		return &Outcome{Status: StatusFailed}, fmt.Errorf("resume: %w", err)
	}
	p, err := piece.Parse(st.Piece+".yaml", []byte(st.PieceYAML))
	if err != nil {
		return &Outcome{Status: StatusFailed, Piece: st.Piece}, fmt.Errorf("resume: the run's piece no longer validates: %w", err)
	}
	e.depth = st.Depth
	r := e.newRun(p, st)
	if st.Status.Final() {
		return r.outcome(), fmt.Errorf("%w: %s (%s)", ErrFinished, st.RunID, st.Status)
	}
	// A run resumed on another machine (a queued job reclaimed by a
	// worker with its own data directory) finds its run state but not the
	// workspace layout Start made: output/ and the others are made again.
	if err := e.prepareDirs(); err != nil {
		return r.outcome(), fmt.Errorf("resume: %w", err)
	}
	switch st.Status {
	case StatusWaitingHuman:
		if r.cfg.SubtaskJobs != nil {
			if _, err := r.subs.collect(ctx); err != nil {
				return r.outcome(), fmt.Errorf("resume: %w", err)
			}
		}
		if answer == "" {
			return r.outcome(), fmt.Errorf("%w: %s", ErrNeedsAnswer, st.Question)
		}
		st.Answers = append(st.Answers, Answer{Movement: st.Movement, Question: st.Question, Answer: answer})
		st.Question = ""
		// The user's answer is progress: loop counting starts afresh.
		st.History = append(st.History, "")
		st.Entry = EntryAnswer
		if len(st.Conversation) == 0 {
			// Maestro asked (a default_next of ASK): the movement starts
			// again with the answer in its briefing.
			st.Entry = EntryRestart
			r.restartReason = st.Reason
		}
	case StatusWaitingSubtasks:
		left, err := r.subs.resumed(ctx)
		if err != nil {
			return r.outcome(), fmt.Errorf("resume: %w", err)
		}
		if left > 0 {
			// Child jobs are still running: the run keeps waiting.
			return r.outcome(), r.save()
		}
		st.Entry = EntrySubtasks
	default: // running (interrupted) or failed
		if _, err := r.subs.resumed(ctx); err != nil {
			return r.outcome(), fmt.Errorf("resume: %w", err)
		}
		r.restartReason = string(st.Status)
		if st.Reason != "" {
			r.restartReason = st.Reason
		}
		st.Entry = EntryRestart
		st.Conversation = nil
		r.continueProgress()
		if answer != "" {
			st.Answers = append(st.Answers, Answer{Movement: st.Movement, Answer: answer})
		}
	}
	st.Status = StatusRunning
	st.Reason = ""
	r.emit(Resumed{Movement: st.Movement, Entry: st.Entry, Answer: answer})
	if err := r.save(); err != nil {
		return r.outcome(), err
	}
	return r.drive(ctx)
}

// prepareDirs creates the run directory (and the job workspace layout),
// following no symbolic link below the run directory or the workspace.
func (e *Engine) prepareDirs() error {
	for _, d := range []string{"logs", "subtasks"} {
		h, err := e.run.open(d, true)
		if err != nil {
			return fmt.Errorf("prepare run directory: %w", err)
		}
		h.Close()
	}
	if !e.jobLayout() {
		return nil
	}
	ws, err := workspace.OpenTrusted(e.cfg.Workspace.Dir())
	if err != nil {
		return fmt.Errorf("prepare the workspace: %w", err)
	}
	defer ws.Close()
	for _, d := range jobDirs() {
		h, err := ws.MkdirPath(d, 0o755)
		if err != nil {
			return fmt.Errorf("prepare the workspace: %w", err)
		}
		h.Close()
	}
	return nil
}

func newRunID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "run_" + hex.EncodeToString(b[:])
}

// discard is a Sink that drops everything.
type discard struct{}

func (discard) Event(protocol.Message) {}
func (discard) Message(llm.Message)    {}
