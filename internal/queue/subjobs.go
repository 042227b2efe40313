package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/taskdir"
	"github.com/maestro-run/maestro/internal/telemetry"
)

// Subtasks as child jobs (docs/scale-out.md, "Subtasks as child jobs"):
// the run of a queued job spawns each subtask as a child job
// (parent_job_id set, no task of its own, its task text, piece and number
// in the payload) that any worker may claim. At WAIT_SUBTASKS the parent
// parks in waiting_subtasks and frees its worker; the store queues it again
// when its last child ends, and the engine, resumed by whichever worker
// claims it, gathers the children's results into subtasks/. A child works
// in its parent's workspace (work/ of the parent's job directory; with an
// artifact store, the parent's files there) and keeps its own run state in
// its own job directory. Cancelling the parent cancels its children (the
// store does, in the same transaction); a parent that ends otherwise has
// those still unfinished cancelled by the pool (Result.ChildJobs).

// SubtaskPayload is the payload field that makes a child job the subtask
// of its parent's run (Payload.Subtask). Only the queue writes it.
type SubtaskPayload struct {
	// ID is the subtask's number in the parent's run; on replay the child
	// plays the ID-th of the parent scenario's subtask scripts.
	ID int `json:"id"`
	// Name is the subtask's name (its result file's).
	Name string `json:"name,omitempty"`
	// Workspace is the parent's job directory relative to the data
	// directory (JobDir, "tasks/<id>" or "jobs/<id>"): the child works in
	// its work/, and with an artifact store under that key prefix.
	Workspace string `json:"workspace"`
}

// childJobs is engine.SubtaskJobs for the run of job parent, whose
// payload is pl.
type childJobs struct {
	st     store.Store
	parent store.Job
	pl     Payload
}

// subtaskJobs returns the engine's SubtaskJobs for j's run: nil for a job
// that is itself a subtask (it cannot spawn) or has no store.
func subtaskJobs(j *Job, pl Payload) engine.SubtaskJobs {
	if j.store == nil || j.ParentJobID != 0 {
		return nil
	}
	return &childJobs{st: j.store, parent: j.Job, pl: pl}
}

// Spawn implements engine.SubtaskJobs: it enqueues the child job of rec,
// with its parent's requirements, priority, executor, replay scenario and
// correlation (metadata), continuing the trace of ctx (the parent's run).
func (c *childJobs) Spawn(ctx context.Context, rec engine.SubtaskRecord) (int64, error) {
	pl := Payload{
		Task: rec.Task, Replay: c.pl.Replay, Executor: c.pl.Executor, Agent: c.pl.Agent, MCPServers: c.pl.MCPServers,
		Metadata: c.pl.Metadata,
		Subtask:  &SubtaskPayload{ID: rec.ID, Name: rec.Name, Workspace: jobPrefix(c.parent)},
	}
	data, err := json.Marshal(pl)
	if err != nil {
		return 0, fmt.Errorf("encode the child job's payload: %w", err)
	}
	if data, err = telemetry.WithPayload(ctx, data); err != nil {
		return 0, err
	}
	sctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	j, err := c.st.Enqueue(sctx, store.NewJob{
		ParentJobID: c.parent.ID, Piece: rec.Piece, Profile: c.parent.Profile, TaskClass: c.parent.TaskClass,
		Priority: c.parent.Priority, Payload: data, MaxAttempts: c.parent.MaxAttempts,
	})
	if err != nil {
		return 0, fmt.Errorf("enqueue the child job of job %d: %w", c.parent.ID, err)
	}
	return j.ID, nil
}

// Result implements engine.SubtaskJobs from the child job's record.
func (c *childJobs) Result(ctx context.Context, id int64) (engine.SubtaskResult, error) {
	sctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	j, err := c.st.GetJob(sctx, id)
	if err != nil {
		return engine.SubtaskResult{}, fmt.Errorf("read child job %d: %w", id, err)
	}
	if j.ParentJobID != c.parent.ID {
		return engine.SubtaskResult{}, fmt.Errorf("job %d is not a child job of job %d", id, c.parent.ID)
	}
	return childResult(j), nil
}

// childResult is how the parent's run records child job j.
func childResult(j store.Job) engine.SubtaskResult {
	switch j.State {
	case store.StateSucceeded:
		return engine.SubtaskResult{Done: true, Status: engine.StatusSucceeded, Result: j.Result}
	case store.StateAborted:
		return engine.SubtaskResult{Done: true, Status: engine.StatusAborted, Result: j.Error}
	case store.StateFailed:
		return engine.SubtaskResult{Done: true, Status: engine.StatusFailed, Result: "The subtask failed: " + j.Error}
	case store.StateCancelled:
		return engine.SubtaskResult{Done: true, Status: engine.StatusCancelled, Result: "The subtask's child job was cancelled: " + j.Error}
	}
	return engine.SubtaskResult{}
}

// checkSubtask says why the subtask fields of job j's payload pl cannot
// run ("" when they can): a child job needs them, no other job may have
// them.
func checkSubtask(j store.Job, pl Payload) string {
	switch {
	case j.ParentJobID != 0 && (pl.Subtask == nil || pl.Subtask.ID <= 0):
		return fmt.Sprintf("job payload field \"subtask\": child job %d of job %d does not say which subtask it runs", j.ID, j.ParentJobID)
	case j.ParentJobID == 0 && pl.Subtask != nil:
		return "job payload field \"subtask\": only a child job (a subtask enqueued by its parent's run) runs a subtask"
	case j.ParentJobID != 0 && !validWorkspace(pl.Subtask.Workspace):
		return fmt.Sprintf("job payload field \"subtask.workspace\": expected tasks/<id> or jobs/<id>, found %q", pl.Subtask.Workspace)
	case j.ParentJobID != 0 && pl.NoPiece:
		return "job payload field \"no_piece\": a subtask runs a piece"
	}
	return ""
}

// subtaskNo is the subtask number a child job's run has (0: not one).
func subtaskNo(pl Payload) int {
	if pl.Subtask == nil {
		return 0
	}
	return pl.Subtask.ID
}

// subtaskScenario is the script a child job plays: the pl.Subtask.ID-th
// subtask script of its parent's scenario s (s itself for any other job).
func subtaskScenario(s *replay.Scenario, pl Payload) (*replay.Scenario, error) {
	if pl.Subtask == nil {
		return s, nil
	}
	if n := pl.Subtask.ID; n < 1 || n > len(s.Subtasks) {
		return nil, fmt.Errorf("job payload field \"replay\": the scenario %s scripts %d subtasks, not subtask %d", s.ID, len(s.Subtasks), n)
	}
	return s.Subtasks[pl.Subtask.ID-1], nil
}

// validWorkspace reports whether ws names a job directory: tasks/<id> or
// jobs/<id>, the id a positive decimal number.
func validWorkspace(ws string) bool {
	kind, id, ok := strings.Cut(ws, "/")
	if !ok || (kind != "tasks" && kind != "jobs") {
		return false
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return err == nil && n > 0 && strconv.FormatInt(n, 10) == id
}

// childWork prepares the workspace of child job j, its parent's work/ on
// this machine, and returns the parent's job directory. With an artifact
// store the parent's work/ is first brought up to date from it.
func (r *engineRunner) childWork(ctx context.Context, pl Payload) (string, error) {
	ws := pl.Subtask.Workspace
	dir := filepath.Join(r.cfg.DataDir, filepath.FromSlash(ws))
	if _, _, err := taskdir.Prepare(dir); err != nil {
		return "", fmt.Errorf("prepare the parent job's directory: %w", err)
	}
	if err := r.materialiseWork(ctx, ws, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// syncJob syncs the files of job j, whose scratch directory is dir, back
// to the artifact store (syncBack). A child job's work/ is its parent's,
// synced without mirroring since its siblings write there too; so is the
// work/ of a parent with children (children), whose copy may lack what a
// child synced meanwhile.
func (r *engineRunner) syncJob(ctx context.Context, a blobstore.Store, j store.Job, dir string, children bool) (blobstore.SyncStats, error) {
	total, err := syncBack(ctx, a, j, dir, !children)
	if err != nil || j.ParentJobID == 0 {
		return total, err
	}
	var pl Payload
	if err := json.Unmarshal(j.Payload, &pl); err != nil || pl.Subtask == nil || !validWorkspace(pl.Subtask.Workspace) {
		return total, fmt.Errorf("sync child job %d: its payload names no parent workspace", j.ID)
	}
	ws := pl.Subtask.Workspace
	st, err := syncWorkUp(ctx, a, ws, filepath.Join(r.cfg.DataDir, filepath.FromSlash(ws)), false)
	total.Add(st)
	return total, err
}

// cancelChildren cancels the child jobs of parent that have not ended,
// once parent has (Result.ChildJobs). A child that ended meanwhile is
// left as it is.
func (p *Pool) cancelChildren(ctx context.Context, log *slog.Logger, parent store.Job) {
	unfinished := []store.State{store.StateQueued, store.StateDispatching, store.StateRunning, store.StateWaitingHuman, store.StateWaitingSubtasks}
	var after int64
	for {
		kids, err := p.cfg.Store.ListJobs(ctx, store.JobFilter{ParentJobID: parent.ID, States: unfinished, AfterID: after})
		if err != nil {
			log.Warn("list the unfinished child jobs", "err", err)
			return
		}
		for _, k := range kids {
			after = k.ID
			reason := fmt.Sprintf("its parent job %d ended (%s) first", parent.ID, parent.State)
			if _, err := p.cfg.Store.Cancel(ctx, k.ID, reason); err != nil && !errors.Is(err, store.ErrInvalidTransition) {
				log.Warn("cancel a child job", "child", k.ID, "err", err)
			}
		}
		if len(kids) < store.MaxListLimit {
			return
		}
	}
}
