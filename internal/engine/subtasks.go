package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// SubtaskRecord is a subtask of a run: a child run of a piece on its own
// task, started by the SpawnSubTask tool. Its result is written to File
// (relative to the workspace in the job layout, else to the parent's run
// directory) and given to the parent's next briefing; the child's own run
// directory is RunDir, relative to the parent's run directory.
type SubtaskRecord struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	Piece string `json:"piece"`
	Task  string `json:"task"`
	// Movement is the parent movement that spawned it.
	Movement string `json:"movement"`
	// Status is running until the child run stops: then succeeded,
	// aborted, failed, waiting_human (it asked a question; the question is
	// the result) or cancelled (the parent ended first).
	Status RunStatus `json:"status"`
	Result string    `json:"result,omitempty"`
	// File is the result file and RunDir the child's run directory, both
	// relative to the parent's run directory.
	File   string `json:"file"`
	RunDir string `json:"run_dir"`
	// Session is the id of the child's session log and Log its path
	// (events.jsonl, relative to the parent's run directory), set when
	// the child starts: an ordinary session log (internal/session) with
	// the child's protocol events, messages and run events.
	Session string `json:"session,omitempty"`
	Log     string `json:"log,omitempty"`
	// Job is the child job that runs the subtask when the run's subtasks
	// are child jobs (Config.SubtaskJobs; 0 otherwise).
	Job int64 `json:"job,omitempty"`
	// Delivered is true once a briefing carried the result.
	Delivered bool `json:"delivered,omitempty"`
}

// SpawnSubTaskInput is the input of the SpawnSubTask tool.
type SpawnSubTaskInput struct {
	Task  string `json:"task" jsonschema:"the subtask's complete, self-contained instructions: it sees only this text and the workspace"`
	Name  string `json:"name,omitempty" jsonschema:"a short name for the subtask (lowercase letters, digits and hyphens)"`
	Piece string `json:"piece,omitempty" jsonschema:"the piece the subtask runs (default general)"`
}

// subtaskPool runs a run's subtasks, at most MaxParallelSubtasks at once.
type subtaskPool struct {
	r   *run
	sem chan struct{}
	wg  sync.WaitGroup

	mu     sync.Mutex
	ctx    context.Context
	stopFn context.CancelFunc
}

func newSubtaskPool(r *run) *subtaskPool {
	return &subtaskPool{r: r, sem: make(chan struct{}, r.cfg.MaxParallelSubtasks)}
}

// spawnTool returns the SpawnSubTask tool for m, or why it is not offered.
// With Config.SubtaskJobs each subtask is a child job (subjobs.go).
func (r *run) spawnTool(m *piece.Movement) (tool.Tool, string) {
	switch {
	case r.e.depth > 0:
		return nil, "a subtask cannot spawn subtasks"
	case r.cfg.Library == nil:
		return nil, "no piece library is configured"
	case r.cfg.SubtaskProvider == nil && isReplay(r.cfg.Provider):
		return nil, "a replay run needs a script per subtask"
	}
	desc := fmt.Sprintf("Start a subtask: a separate run of a piece (default general) on a self-contained task, in this workspace. "+
		"Up to %d subtasks run in parallel, at most %d per run. Each result is written under subtasks/ and given to you after transition(next: WAIT_SUBTASKS) "+
		"(or to the next movement). Give subtasks disjoint files to work on.", r.cfg.MaxParallelSubtasks, r.cfg.MaxSubtasks)
	return tool.New("SpawnSubTask", desc, false, func(ctx context.Context, in SpawnSubTaskInput, _ tool.Call) (tool.Result, error) {
		return r.spawn(ctx, m.Name, in), nil
	}), ""
}

// spawn validates a SpawnSubTask call and starts the subtask.
func (r *run) spawn(ctx context.Context, movement string, in SpawnSubTaskInput) tool.Result {
	task := strings.TrimSpace(in.Task)
	if task == "" {
		return tool.Errorf("SpawnSubTask: task is required")
	}
	name := in.Piece
	if name == "" {
		name = "general"
	}
	p, ok := r.cfg.Library.Get(name)
	if !ok {
		return tool.Errorf("SpawnSubTask: unknown piece %q; available: %s", name, strings.Join(r.cfg.Library.Names(), ", "))
	}
	r.mu.Lock()
	st := r.st
	if len(st.Subtasks) >= r.cfg.MaxSubtasks {
		r.mu.Unlock()
		return tool.Errorf("SpawnSubTask: this run has spawned %d subtasks, the most it may", r.cfg.MaxSubtasks)
	}
	id := len(st.Subtasks) + 1
	slug := slugify(in.Name)
	if slug == "" {
		slug = "subtask"
	}
	rec := SubtaskRecord{
		ID: id, Name: slug, Piece: p.Name, Task: task, Movement: movement, Status: StatusRunning,
		File: fmt.Sprintf("subtasks/%02d-%s.md", id, slug), RunDir: fmt.Sprintf("subtasks/%02d-%s", id, slug),
	}
	st.Subtasks = append(st.Subtasks, rec)
	r.mu.Unlock()
	if r.cfg.SubtaskJobs != nil {
		rec, err := r.spawnJob(ctx, rec)
		if err != nil {
			return tool.Errorf("SpawnSubTask: %v", err)
		}
		r.emit(SubtaskSpawned{ID: id, Name: slug, Piece: p.Name, Task: task, Movement: movement, Job: rec.Job})
		r.save()
		return tool.Result{Content: fmt.Sprintf("Subtask %d (%s) was queued as job %d with piece %s. Its result will be written to %s and given to you after transition(next: WAIT_SUBTASKS), or to the next movement.",
			id, slug, rec.Job, p.Name, rec.File)}
	}
	r.emit(SubtaskSpawned{ID: id, Name: slug, Piece: p.Name, Task: task, Movement: movement})
	r.save()
	r.subs.start(ctx, rec, p)
	return tool.Result{Content: fmt.Sprintf("Subtask %d (%s) started with piece %s. Its result will be written to %s and given to you after transition(next: WAIT_SUBTASKS), or to the next movement.",
		id, slug, p.Name, rec.File)}
}

// start runs rec in the background.
func (sp *subtaskPool) start(ctx context.Context, rec SubtaskRecord, p *piece.Piece) {
	sp.mu.Lock()
	if sp.ctx == nil {
		sp.ctx, sp.stopFn = context.WithCancel(ctx)
	}
	pctx := sp.ctx
	sp.mu.Unlock()
	sp.wg.Go(func() {
		select {
		case sp.sem <- struct{}{}:
		case <-pctx.Done():
			sp.finish(rec, StatusCancelled, "The subtask was cancelled before it started.")
			return
		}
		defer func() { <-sp.sem }()
		status, result := sp.runChild(pctx, rec, p)
		sp.finish(rec, status, result)
	})
}

// runChild runs the subtask's piece as a child run.
func (sp *subtaskPool) runChild(ctx context.Context, rec SubtaskRecord, p *piece.Piece) (status RunStatus, result string) {
	r := sp.r
	cfg := *r.cfg
	cfg.RunDir = filepath.Join(r.cfg.RunDir, filepath.FromSlash(rec.RunDir))
	cfg.StateSaved, cfg.KeepProgress = nil, false // the parent's state is the one kept
	run := r.e.run.child(rec.RunDir)
	if r.cfg.SubtaskProvider != nil {
		prov, err := r.cfg.SubtaskProvider(rec)
		if err != nil {
			return StatusFailed, "No model for the subtask: " + err.Error()
		}
		cfg.Provider = prov
	}
	sess, closeLog, err := openSubtaskLog(run, &cfg, rec.Task)
	if err != nil {
		return StatusFailed, err.Error()
	}
	defer closeLog()
	if cfg.FollowLog != nil {
		if closed := cfg.FollowLog(sess.Dir(), sess.Meta()); closed != nil {
			defer func() { closed(sess.Cursor(), closeReason(status)) }()
		}
	}
	r.linkLog(rec.ID, sess.ID(), path.Join(rec.RunDir, "logs", sess.ID(), "events.jsonl"))
	cfg.Sink, cfg.Events = sess, SessionEvents(sess)
	child := &Engine{cfg: cfg, depth: r.e.depth + 1, run: run}
	out, err := child.Start(ctx, p, rec.Task, StartOptions{RunID: fmt.Sprintf("%s.%d", r.st.RunID, rec.ID), subtask: rec.ID})
	switch {
	case err != nil && (errors.Is(err, agent.ErrCancelled) || ctx.Err() != nil):
		return StatusCancelled, "The subtask was cancelled before it finished."
	case err != nil:
		return StatusFailed, "The subtask failed: " + err.Error()
	}
	return out.Status, out.Result
}

// finish records a subtask's end and writes its result file.
func (sp *subtaskPool) finish(rec SubtaskRecord, status RunStatus, result string) {
	r := sp.r
	var b strings.Builder
	fmt.Fprintf(&b, "# Subtask %d: %s\n\n- Piece: %s\n- Status: %s\n- Spawned by: %s\n\n## Task\n\n%s\n\n## Result\n\n%s\n",
		rec.ID, rec.Name, rec.Piece, status, rec.Movement, rec.Task, result)
	if err := r.writeResult(rec.File, []byte(b.String())); err != nil {
		result += "\n\n(The result file could not be written: " + err.Error() + ")"
	}
	r.mu.Lock()
	for i := range r.st.Subtasks {
		if r.st.Subtasks[i].ID == rec.ID {
			r.st.Subtasks[i].Status, r.st.Subtasks[i].Result = status, result
			rec = r.st.Subtasks[i]
		}
	}
	r.mu.Unlock()
	r.emit(SubtaskFinished{ID: rec.ID, Name: rec.Name, Status: status, Result: result, File: rec.File, Session: rec.Session, Log: rec.Log, Job: rec.Job})
	r.save()
}

// linkLog records in the parent's state where subtask id logs its run.
func (r *run) linkLog(id int, sessionID, log string) {
	r.mu.Lock()
	for i := range r.st.Subtasks {
		if r.st.Subtasks[i].ID == id {
			r.st.Subtasks[i].Session, r.st.Subtasks[i].Log = sessionID, log
		}
	}
	r.mu.Unlock()
	r.save()
}

// running counts subtasks still running.
func (sp *subtaskPool) running() int {
	r := sp.r
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.st.Subtasks {
		if s.Status == StatusRunning {
			n++
		}
	}
	return n
}

// canWait explains why WAIT_SUBTASKS would wait for nothing ("" when a
// subtask is running or has a result to deliver).
func (sp *subtaskPool) canWait() string {
	r := sp.r
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.st.Subtasks {
		if s.Status == StatusRunning || !s.Delivered {
			return ""
		}
	}
	return "no subtask is running or has a result to deliver; spawn subtasks with SpawnSubTask first, or choose another target"
}

// wait blocks until every subtask has finished or ctx ends.
func (sp *subtaskPool) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		sp.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for subtasks: %w", agent.ErrCancelled, context.Cause(ctx))
	}
}

// cancel stops every running subtask and waits for them to wind down.
func (sp *subtaskPool) cancel() {
	sp.mu.Lock()
	stop := sp.stopFn
	sp.mu.Unlock()
	if stop != nil {
		stop()
	}
	sp.wg.Wait()
}

// interrupt marks subtasks left running by a previous process as failed:
// their runs cannot be continued from here.
func (sp *subtaskPool) interrupt() {
	for _, s := range sp.runningRecords() {
		sp.finish(s, StatusFailed, "The subtask was interrupted: the process running it stopped before it finished.")
	}
}

// runningRecords returns a copy of the records of the subtasks still
// running.
func (sp *subtaskPool) runningRecords() []SubtaskRecord {
	r := sp.r
	r.mu.Lock()
	defer r.mu.Unlock()
	var running []SubtaskRecord
	for _, s := range r.st.Subtasks {
		if s.Status == StatusRunning {
			running = append(running, s)
		}
	}
	return running
}

// slugify turns a name into lowercase letters, digits and hyphens.
func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b.WriteRune(c)
			dash = false
		case b.Len() > 0 && !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

// openSubtaskLog creates a subtask's log: an ordinary session log
// (internal/session) in <child run dir>/logs/<session id>/, created below
// the run directory without following a symbolic link. closeLog closes it.
func openSubtaskLog(run runPath, cfg *Config, task string) (sess *session.Session, closeLog func(), err error) {
	d, err := run.open("logs", true)
	if err != nil {
		return nil, nil, fmt.Errorf("subtask log: %w", err)
	}
	executor := protocol.ExecutorLive
	if isReplay(cfg.Provider) {
		executor = protocol.ExecutorReplay
	}
	sess, err = session.NewStoreIn(d, filepath.Join(run.String(), "logs")).Create(session.Meta{
		Workspace: cfg.Workspace.Dir(), Provider: cfg.Provider.Name(), Model: cfg.Provider.Model(), ExecutorType: executor,
	})
	if err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("subtask log: %w", err)
	}
	_ = sess.SetTitle(task)
	return sess, func() {
		sess.Close()
		d.Close()
	}, nil
}

// writeResult writes a subtask's result file (rec.File, a slash path
// such as subtasks/01-name.md): into the workspace in the job layout,
// where the agent reads it, else into the run directory; in either
// directory without following a symbolic link.
func (r *run) writeResult(name string, data []byte) error {
	if !r.e.jobLayout() {
		return r.e.run.writeFile(name, data, 0o644)
	}
	ws, err := workspace.OpenTrusted(r.cfg.Workspace.Dir())
	if err != nil {
		return err
	}
	defer ws.Close()
	d, err := ws.MkdirPath(path.Dir(name), 0o755)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.WriteFileAtomic(path.Base(name), data, 0o644)
}

// closeReason is the close_reason of a subtask's session on the event
// bus (eventbus.EndReason) for the status its run ended in: a run that
// failed is an error, a cancelled one was stopped; one the agent ended
// (succeeded, or aborted: the task cannot be done) completed.
func closeReason(s RunStatus) string {
	switch s {
	case StatusCancelled:
		return "user_stopped"
	case StatusFailed:
		return "error"
	}
	return "completed"
}
