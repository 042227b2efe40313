package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/gitinfo"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/netguard"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/taskdir"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// EngineRunnerConfig configures NewEngineRunner. DataDir is required.
type EngineRunnerConfig struct {
	// DataDir holds the task workspaces (see TaskDir).
	DataDir string
	// Provider gives the job's model. A job payload {"replay": <scenario
	// JSON>} selects a scripted scenario regardless (tests, demos); nil
	// means the bundled piece demo (replay.DemoPiece), written for the
	// general piece (a no_piece job: the plain demo, replay.Demo).
	Provider func(j *Job) (llm.Provider, error)
	// Pieces returns the piece library (built-ins + store pieces); nil
	// means the built-ins.
	Pieces func(ctx context.Context) (*engine.Library, error)
	// Sandbox runs Bash; nil leaves Bash out.
	Sandbox *sandbox.Sandbox
	// FileLimits bounds Read, Edit and Write (engine.Config.FileLimits).
	FileLimits tool.FileLimits
	// Web configures the web tools (engine.Config.Web); nil leaves them
	// out.
	Web *tool.WebOptions
	// SSH holds the SSH tools' connections (engine.Config.SSH).
	SSH map[string]tool.SSHConnection
	// SSHFor, when set, replaces SSH: the connections a job of a task
	// submitted by owner may use (config.yaml's and those registered
	// through the API that owner owns or was granted; host.SSHConnectionsFor).
	SSHFor func(ctx context.Context, owner string) (map[string]tool.SSHConnection, error)
	// Skills are the skills ReadSkill materialises (engine.Config.Skills);
	// nil leaves ReadSkill out.
	Skills *skills.Library
	// WebInLoop offers the web tools (Web) to no_piece jobs too (config
	// web.sessions); pieces choose them with allowed_tools.
	WebInLoop bool
	// MCP gives jobs MCP servers (engine.Config.MCP); nil: only servers
	// none, and a payload naming one fails.
	MCP *JobMCP
	// Agents runs the movements that name an agent CLI (`agent:`); nil
	// fails such a movement (engine.Config.Agents).
	Agents engine.AgentRunner
	// Models gives the models pieces and movements name, and Classifier
	// the model that picks a task's piece (engine.Config.Models and
	// ClassifierProvider; nil: none, the job's model).
	Models     func(ctx context.Context, spec string) (llm.Provider, error)
	Classifier llm.Provider
	// Artifacts, when set, is where jobs' files live; the job directory
	// is a scratch copy (artifacts.go, docs/scale-out.md "Artifacts").
	Artifacts blobstore.Store
}

// NoopPiece is the piece name that succeeds at once with one event
// (benchmarks, health checks).
const NoopPiece = "noop"

// NoPiece reports whether a job's payload asks for the plain agent loop
// (Payload.NoPiece).
func NoPiece(payload json.RawMessage) bool {
	var pl struct {
		NoPiece bool `json:"no_piece"`
	}
	return json.Unmarshal(payload, &pl) == nil && pl.NoPiece
}

// Payload is the part of a job's JSON payload the engine runner reads.
type Payload struct {
	// Replay is a replay scenario (JSON or YAML text, or a JSON object)
	// that replaces the model (docs/replay.md).
	Replay json.RawMessage `json:"replay,omitempty"`
	// Task is the task text of a job that has no task.
	Task string `json:"task,omitempty"`
	// NoPiece runs the task in Maestro's plain agent loop (as `maestro run
	// --no-piece`) instead of a piece: the job's log holds the loop's
	// protocol messages, from ready and session_info on (docs/queue.md).
	NoPiece bool `json:"no_piece,omitempty"`
	// InputStaging names the staging directory (staging.Dir) of files
	// uploaded with the task's creation; the runner moves them into the
	// task's input/ before the run starts. The API sets it; clients may
	// not.
	InputStaging string `json:"input_staging,omitempty"`
	// Executor chooses what runs the job (docs/queue.md, "Executors"):
	// api.ExecutorNative (the worker's live model), api.ExecutorAgentCLI
	// (every movement on the agent CLI Agent), api.ExecutorReplay (the
	// bundled replay demo, even when the worker has a model); empty: the
	// worker's default.
	Executor string `json:"executor,omitempty"`
	Agent    string `json:"agent,omitempty"`
	// Subtask marks a child job: the subtask of its parent's run it runs
	// (subjobs.go). The queue sets it; clients may not.
	Subtask *SubtaskPayload `json:"subtask,omitempty"`
	// AgentSession (executor agent-cli only) is a session of the agent
	// CLI Agent that the run's first movement resumes instead of starting
	// the CLI afresh ("resume as a task"; engine.Config.ResumeAgentSession).
	AgentSession string `json:"agent_session,omitempty"`
	// MCPServers names the MCP servers of the job's run (slugs that
	// EngineRunnerConfig.MCP's Lookup knows), instead of its default
	// servers; an empty list means none (docs/mcp.md).
	MCPServers []string `json:"mcp_servers,omitempty"`
	// Metadata is the job's correlation (organization, workspace, session,
	// run: eventbus.JobCorrelation reads it); child jobs keep their
	// parent's.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// checkExecutor says why the executor fields of pl cannot run the job
// ("" when they can).
func checkExecutor(pl Payload, hasAgents bool) string {
	switch pl.Executor {
	case "", api.ExecutorNative, api.ExecutorReplay:
		if pl.Agent != "" {
			return fmt.Sprintf("job payload field \"agent\": %q is only for executor %q", pl.Agent, api.ExecutorAgentCLI)
		}
		if pl.AgentSession != "" {
			return fmt.Sprintf("job payload field \"agent_session\": only for executor %q", api.ExecutorAgentCLI)
		}
		if pl.Executor == api.ExecutorNative && len(pl.Replay) > 0 {
			return fmt.Sprintf("job payload field \"executor\": %q and \"replay\" (a scenario) exclude each other", pl.Executor)
		}
	case api.ExecutorAgentCLI:
		switch {
		case pl.Agent == "":
			return fmt.Sprintf("job payload field \"agent\": required with executor %q (an agent CLI id, as maestro agents list shows)", api.ExecutorAgentCLI)
		case len(pl.Replay) > 0:
			return fmt.Sprintf("job payload field \"executor\": %q and \"replay\" (a scenario) exclude each other", pl.Executor)
		case pl.NoPiece:
			return fmt.Sprintf("job payload field \"no_piece\": Maestro's own loop cannot run on executor %q", api.ExecutorAgentCLI)
		case !hasAgents:
			return "job payload field \"executor\": this worker runs no agent CLIs"
		}
	default:
		return fmt.Sprintf("job payload field \"executor\": %q is not one of %s (empty: the worker's default)", pl.Executor, strings.Join(api.Executors(), ", "))
	}
	return ""
}

type engineRunner struct {
	cfg EngineRunnerConfig
	// syncRetry is the first pause of a final sync that found the
	// artifact store unreachable (0: a second; tests shorten it).
	syncRetry time.Duration
	// parked are the runs waiting for the answer to an MCP server's
	// question (park.go).
	parked parked
}

// NewEngineRunner returns the Runner that runs the task's piece (or the
// classifier's pick) in TaskDir with the engine: a new run starts the
// piece; a run found in the directory (the job was interrupted, reclaimed
// or waited for the user) is resumed, a waiting one with the newest user
// comment of the task as the answer. Piece "noop" succeeds at once.
func NewEngineRunner(cfg EngineRunnerConfig) Runner { return &engineRunner{cfg: cfg} }

// JobDir is the directory of a job, laid out as TaskDir (work/ and
// state/, see internal/taskdir): TaskDir for a job with a task,
// <dataDir>/jobs/<jobID> otherwise.
func JobDir(dataDir string, j store.Job) string {
	if j.TaskID != 0 {
		return TaskDir(dataDir, j.TaskID)
	}
	return filepath.Join(dataDir, "jobs", strconv.FormatInt(j.ID, 10))
}

func (r *engineRunner) Run(ctx context.Context, j *Job) Result {
	if jr := r.parked.take(j.ID); jr != nil {
		return r.answer(ctx, j, jr)
	}
	// The run may outlive this attempt, parked on an MCP server's
	// question (park.go): it runs on its own context, which this
	// attempt's cancels while it follows the run.
	jr := newJobRun(ctx)
	go func() {
		res := r.run(jr.ctx, j, jr)
		jr.done <- r.synced(jr.ctx, j, jr.materialised.Load(), res)
	}()
	return r.await(ctx, j, jr)
}

// run is the job's run (Run), on the run's context.
func (r *engineRunner) run(ctx context.Context, j *Job, jr *jobRun) Result {
	name := j.Piece
	if name == "" {
		name = j.Task.Piece
	}
	if name == NoopPiece {
		if err := j.Emit(ctx, store.NewJobEvent{Type: store.JobEventNoop, Data: json.RawMessage(`{"result":"ok"}`)}); err != nil {
			return Result{State: store.StateFailed, Error: "noop: " + err.Error()}
		}
		return Result{State: store.StateSucceeded, Result: "ok"}
	}
	var pl Payload
	if len(j.Payload) > 0 {
		if err := json.Unmarshal(j.Payload, &pl); err != nil {
			return Result{State: store.StateFailed, NoRetry: true, Error: fmt.Sprintf("job payload: expected a JSON object with optional \"replay\" and \"task\": %v", err)}
		}
		if string(pl.Replay) == "null" {
			pl.Replay = nil // "replay": null is no scenario, as the API takes it
		}
	}
	if msg := checkExecutor(pl, r.cfg.Agents != nil); msg != "" {
		return Result{State: store.StateFailed, NoRetry: true, Error: msg}
	}
	if msg := checkSubtask(j.Job, pl); msg != "" {
		return Result{State: store.StateFailed, NoRetry: true, Error: msg}
	}
	prov, err := r.provider(j, pl)
	if err != nil {
		return Result{State: store.StateFailed, NoRetry: true, Error: err.Error()}
	}
	dir := JobDir(r.cfg.DataDir, j.Job)
	// The agent gets work/; Maestro's state lives in state/, beside it
	// and out of its reach.
	work, stateDir, err := taskdir.Prepare(dir)
	if err != nil {
		return Result{State: store.StateFailed, Error: fmt.Sprintf("prepare the task directory: %v", err)}
	}
	if err := r.materialise(ctx, j.Job, dir, &pl); err != nil {
		return artifactsFailed(ctx, err)
	}
	jr.materialised.Store(true)
	if j.ParentJobID != 0 {
		// A subtask works in its parent's workspace (subjobs.go).
		parentDir, err := r.childWork(ctx, pl)
		if err != nil {
			return artifactsFailed(ctx, err)
		}
		work = taskdir.WorkDir(parentDir)
	}
	if pl.InputStaging != "" {
		// Files uploaded with the task land in input/ before any step
		// of the run can look for them.
		if err := moveStagedInput(r.cfg.DataDir, dir, pl.InputStaging); err != nil {
			return Result{State: store.StateFailed, NoRetry: !staging.ValidKey(pl.InputStaging), Error: err.Error()}
		}
	}
	root, err := workspace.Open(work)
	if err != nil {
		return Result{State: store.StateFailed, Error: fmt.Sprintf("open the task workspace: %v", err)}
	}
	defer root.Close()
	task := strings.TrimSpace(j.Task.Title + "\n\n" + j.Task.Body)
	if task == "" {
		task = pl.Task
	}
	if pl.NoPiece {
		if name != "" {
			return Result{State: store.StateFailed, NoRetry: true, Error: fmt.Sprintf("job payload field \"no_piece\": the job names piece %q; a run has a piece or none", name)}
		}
		return r.runLoop(ctx, j, jr, prov, root, task, pl)
	}
	var lib *engine.Library
	if r.cfg.Pieces != nil {
		lib, err = r.cfg.Pieces(ctx)
	} else {
		lib, err = engine.NewLibrary(ctx, nil, "")
	}
	if err != nil {
		return Result{State: store.StateFailed, Error: fmt.Sprintf("load pieces: %v", err)}
	}
	if err := restoreRunState(ctx, j, stateDir); err != nil {
		return Result{State: store.StateFailed, Error: err.Error()}
	}
	if task == "" {
		// Only a new run needs the task; a run found in state/ has it.
		has, err := engine.HasState(stateDir)
		if err != nil {
			return Result{State: store.StateFailed, Error: fmt.Sprintf("read the run state: %v", err)}
		}
		if !has {
			return Result{State: store.StateFailed, NoRetry: true, Error: errNoTask}
		}
	}
	sshConns := r.cfg.SSH
	if r.cfg.SSHFor != nil {
		if sshConns, err = r.cfg.SSHFor(ctx, j.Task.Owner); err != nil {
			return Result{State: store.StateFailed, Error: fmt.Sprintf("resolve the SSH connections: %v", err)}
		}
	}
	em := newEmitter(ctx, j)
	defer em.close()
	jr.follow(em, prov)
	ready(em, prov)
	mcps, err := r.startMCP(ctx, j, jr, prov, pl, root, em)
	if err != nil {
		return Result{State: store.StateFailed, NoRetry: true, Error: err.Error()}
	}
	defer mcps.Close() // before em.close: a stopping server's last words are kept
	// A run found in state/ is resumed (a waiting one with the newest
	// user comment as the answer); otherwise the piece starts.
	out, runErr := engine.Launch{
		Config: engine.Config{
			Provider: prov, Workspace: root, RunDir: stateDir, JobWorkspace: true,
			Sandbox: r.cfg.Sandbox, FileLimits: r.cfg.FileLimits, Web: r.cfg.Web, SSH: sshConns, Library: lib, Sink: em, Events: r.syncOnMovement(ctx, j.Job, dir, em), Agents: r.cfg.Agents,
			Models: r.cfg.Models, ClassifierProvider: r.cfg.Classifier, Agent: agentOf(pl), ResumeAgentSession: pl.AgentSession, MCP: engineMCP(mcps),
			Skills: r.cfg.Skills, StateSaved: runStateSaver(ctx, em), KeepProgress: true,
			SubtaskJobs: subtaskJobs(j, pl), Subtask: subtaskNo(pl),
		},
		Task: task, Piece: name, RunID: "job-" + strconv.FormatInt(j.ID, 10),
		Answer: func(ctx context.Context) (string, error) { return latestUserComment(ctx, j) },
	}.Run(ctx)
	var cerr *engine.ClassifyError
	switch {
	case errors.As(runErr, &cerr):
		res := Result{State: store.StateFailed, NoRetry: ctx.Err() == nil, Error: runErr.Error()}
		res.Report = report("", jobCost{res: res, known: true, replay: isReplayProvider(prov)}, root)
		return res
	case errors.Is(runErr, engine.ErrNeedsAnswer):
		// Resumed without an answer: keep waiting (the question was
		// posted already).
		return Result{State: store.StateWaitingHuman}
	}
	mcps.Close()
	em.close()
	res := Result{}
	if out != nil {
		res.Usage, res.CostUSD = out.Usage, out.CostUSD
		res.ChildJobs = out.ChildJobs > 0
	}
	switch {
	case runErr != nil:
		res.State, res.Error = store.StateFailed, runErr.Error()
		res.NoRetry = errors.Is(runErr, engine.ErrAgentCLI)
	case out.Status == engine.StatusSucceeded:
		res.State, res.Result = store.StateSucceeded, out.Result
	case out.Status == engine.StatusAborted:
		res.State, res.Error = store.StateAborted, out.Result
		if out.Reason != "" {
			res.Error = out.Reason + ": " + out.Result
		}
	case out.Status == engine.StatusWaitingHuman && j.ParentJobID != 0:
		// A subtask has no user to ask: its question ends it, as the
		// parent's record of it says (subjobs.go).
		res.State, res.Error = store.StateAborted, "the subtask asked a question: "+out.Result
	case out.Status == engine.StatusWaitingHuman:
		res.State, res.Question = store.StateWaitingHuman, out.Result
	case out.Status == engine.StatusWaitingSubtasks:
		res.State = store.StateWaitingSubtasks
	default:
		res.State, res.Error = store.StateFailed, fmt.Sprintf("the run stopped in state %s: %s", out.Status, out.Result)
	}
	if out != nil {
		res.Report = report(out.Piece, jobCost{res: res, known: out.CostKnown, replay: isReplayProvider(prov), modelCalls: out.ModelCalls}, root)
	}
	return res
}

// isReplayProvider reports whether prov plays a scripted scenario.
func isReplayProvider(prov llm.Provider) bool { return prov.Name() == replay.ProviderName }

// errNoTask is the failure of a job that has nothing to do.
const errNoTask = "the job has no task text (task title/body, or payload \"task\")"

// ready says first, on every attempt, what drives the job's model turns,
// so that every surface can badge a replay job as one.
func ready(em *emitter, prov llm.Provider) {
	executor := protocol.ExecutorLive
	if isReplayProvider(prov) {
		executor = protocol.ExecutorReplay
	}
	em.Event(protocol.Ready{ProtocolVersion: protocol.Version, Model: prov.Model(), Provider: prov.Name(), SessionID: nil, ExecutorType: executor})
}

// runLoop runs the task in the plain agent loop with the tools of a plain
// session (tool.NewWorkspaceSet) in the job's work/, approving every call
// as `maestro run` does. The conversation is not kept: an attempt that
// was interrupted runs the task again from the start.
func (r *engineRunner) runLoop(ctx context.Context, j *Job, jr *jobRun, prov llm.Provider, root *workspace.Root, task string, pl Payload) Result {
	if task == "" {
		return Result{State: store.StateFailed, NoRetry: true, Error: errNoTask}
	}
	em := newEmitter(ctx, j)
	defer em.close()
	jr.follow(em, prov)
	ready(em, prov)
	em.Event(protocol.SessionInfo{SessionID: nil, Cwd: root.Dir(), GitBranch: gitinfo.Branch(root.Dir(), nil)})
	tools := tool.NewWorkspaceSet(root, r.cfg.Sandbox, r.cfg.FileLimits)
	if r.cfg.WebInLoop && r.cfg.Web != nil {
		o := *r.cfg.Web
		o.OnBlock = func(b *netguard.BlockedError) {
			em.Event(protocol.Status{Message: tool.BlockedLine(b)})
		}
		for _, t := range tool.WebSet(root, o) {
			tools.Add(t)
		}
	}
	mcps, err := r.startMCP(ctx, j, jr, prov, pl, root, em)
	if err != nil {
		return Result{State: store.StateFailed, NoRetry: true, Error: err.Error()}
	}
	defer mcps.Close()
	remote, err := mcps.All(ctx) // a plain session's MCP tools: every server's
	if err != nil {
		return Result{State: store.StateFailed, Error: err.Error()}
	}
	for _, t := range remote {
		tools.Add(t)
	}
	kind := ""
	if r.cfg.Sandbox != nil {
		kind = r.cfg.Sandbox.Kind()
	}
	ag := agent.New(agent.Config{
		Provider: prov, Tools: tools,
		System: agent.SystemPrompt(agent.Environment{Workspace: root.Dir(), Sandbox: kind, Tools: tools.Names(), Date: time.Now().Format("2006-01-02")}),
	})
	res, err := ag.Run(ctx, nil, llm.UserText(task), em)
	mcps.Close()
	em.close()
	out := Result{Usage: res.Usage, CostUSD: res.CostUSD}
	if err != nil {
		out.State, out.Error = store.StateFailed, err.Error()
	} else {
		out.State, out.Result = store.StateSucceeded, res.Final
	}
	out.Report = report("", jobCost{res: out, known: res.CostKnown, replay: isReplayProvider(prov), modelCalls: res.ModelCalls()}, root)
	return out
}

// agentOf is the agent CLI every movement of the job runs on ("": each
// movement's own).
func agentOf(pl Payload) string {
	if pl.Executor == api.ExecutorAgentCLI {
		return pl.Agent
	}
	return ""
}

func (r *engineRunner) provider(j *Job, pl Payload) (llm.Provider, error) {
	switch pl.Executor {
	case api.ExecutorReplay:
		if len(pl.Replay) == 0 {
			return demo(pl), nil
		}
	case api.ExecutorNative:
		if r.cfg.Provider != nil {
			p, err := r.cfg.Provider(j)
			if err != nil {
				return nil, fmt.Errorf("choose the model: %w", err)
			}
			if !isReplayProvider(p) {
				return p, nil
			}
		}
		return nil, fmt.Errorf("job payload field \"executor\": %q needs a live model and this worker has none configured (it plays replay); configure one (MAESTRO_MODEL, a provider API key, or model: in config.yaml) or choose %q", api.ExecutorNative, api.ExecutorReplay)
	}
	if len(pl.Replay) > 0 {
		src := []byte(pl.Replay)
		var text string
		if json.Unmarshal(pl.Replay, &text) == nil {
			src = []byte(text) // a scenario file's text as a JSON string
		}
		s, err := replay.Parse(src, fmt.Sprintf("job %d payload.replay", j.ID))
		if err != nil {
			return nil, fmt.Errorf("job payload field \"replay\": %w", err)
		}
		if s, err = subtaskScenario(s, pl); err != nil {
			return nil, err
		}
		return replay.New(s), nil
	}
	if r.cfg.Provider != nil {
		p, err := r.cfg.Provider(j)
		if err != nil {
			return nil, fmt.Errorf("choose the model: %w", err)
		}
		return p, nil
	}
	return demo(pl), nil
}

// demo is the bundled demo a job plays without a scenario of its own:
// the piece demo, or for a no_piece job the plain loop's (the piece
// demo in the plain loop failed once its frames were played).
func demo(pl Payload) llm.Provider {
	if pl.NoPiece {
		return replay.New(replay.Demo())
	}
	return replay.New(replay.DemoPiece())
}

// latestUserComment returns the body of the task's newest user comment
// posted after the agent's latest comment (the question), or "".
func latestUserComment(ctx context.Context, j *Job) (string, error) {
	if j.TaskID == 0 || j.store == nil {
		return "", nil
	}
	answer := ""
	var after int64
	for {
		cs, err := j.store.ListComments(ctx, j.TaskID, after, store.MaxListLimit)
		if err != nil {
			return "", err
		}
		for _, c := range cs {
			switch c.AuthorKind {
			case store.AuthorUser:
				answer = c.Body
			case store.AuthorAgent:
				answer = "" // only what the user said after the question answers it
			}
			after = c.ID
		}
		if len(cs) < store.MaxListLimit {
			return answer, nil
		}
	}
}

// emitter turns engine run events and protocol events into job events,
// appended in batches by one goroutine so that a burst of streaming events
// costs one store write.
type emitter struct {
	j   *Job // nil while the run is parked (park.go): events wait
	ctx context.Context
	// flushing serialises flushes (the loop's and retarget's).
	flushing sync.Mutex
	mu       sync.Mutex
	buf      []store.NewJobEvent
	shut     bool // closed: later events are dropped
	kick     chan struct{}
	done     chan struct{}
	once     sync.Once
}

func newEmitter(ctx context.Context, j *Job) *emitter {
	e := &emitter{j: j, ctx: ctx, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go e.loop()
	return e
}

func (e *emitter) add(ev store.NewJobEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shut {
		return // a late writer (a server's stderr) after the run ended
	}
	e.buf = append(e.buf, ev)
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *emitter) loop() {
	defer close(e.done)
	for range e.kick {
		e.flush()
	}
	e.flush()
}

func (e *emitter) flush() {
	e.flushing.Lock()
	defer e.flushing.Unlock()
	e.mu.Lock()
	j, batch := e.j, e.buf
	if j == nil {
		batch = nil // parked: kept for the attempt that follows the run
	} else {
		e.buf = nil
	}
	e.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	// The last events of an interrupted attempt (a shutdown) are worth
	// keeping; fencing refuses them if the job is no longer ours. Errors
	// (a lost lease) cancel the job's context through Emit.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), storeCallTimeout)
	defer cancel()
	_ = j.Emit(ctx, batch...)
}

// retarget flushes what is buffered to the attempt the emitter writes to,
// then writes to j's log instead (nil: keep the events until a later
// retarget).
func (e *emitter) retarget(j *Job) {
	e.flush()
	e.mu.Lock()
	e.j = j
	e.mu.Unlock()
	e.flush()
}

// job is the attempt the emitter writes to (nil while parked).
func (e *emitter) job() *Job {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.j
}

// close flushes what is buffered and stops the goroutine.
func (e *emitter) close() {
	e.once.Do(func() {
		e.mu.Lock()
		e.shut = true
		close(e.kick)
		e.mu.Unlock()
	})
	<-e.done
}

// RunEvent implements engine.EventSink.
func (e *emitter) RunEvent(r engine.Record) {
	data, err := json.Marshal(r)
	if err != nil {
		return
	}
	e.add(store.NewJobEvent{Type: store.JobEventRunEvent, Data: data})
	j := e.job()
	if j == nil {
		return
	}
	switch ms := r.Event.(type) {
	case engine.MovementStarted:
		_ = j.Checkpoint(e.ctx, ms.Movement, nil)
	case *engine.MovementStarted:
		_ = j.Checkpoint(e.ctx, ms.Movement, nil)
	case engine.RunStarted:
		e.setPiece(j, ms)
	case *engine.RunStarted:
		e.setPiece(j, *ms)
	}
}

// setPiece records on a job given no piece the one its run started
// (chosen by the classifier), so task lists show it.
func (e *emitter) setPiece(j *Job, rs engine.RunStarted) {
	if rs.Subtask != 0 || j.Piece != "" || j.SetPiece == nil {
		return
	}
	if err := j.SetPiece(e.ctx, rs.Piece); err == nil {
		j.Piece = rs.Piece
	}
}

// Event implements agent.Sink.
func (e *emitter) Event(m protocol.Message) {
	data, err := protocol.Marshal(m)
	if err != nil {
		return
	}
	e.add(store.NewJobEvent{Type: store.JobEventProtocol, Data: data})
}

// Message implements agent.Sink; conversation messages stay in the run
// state, not in the job's event log.
func (e *emitter) Message(llm.Message) {}
