package engine

import (
	"context"
	"fmt"
)

// SubtaskJobs runs a run's subtasks as child jobs of a queue, which any
// worker may claim (docs/pieces.md, "Subtasks"; docs/scale-out.md,
// "Subtasks as child jobs"). internal/queue implements it for the run of a
// queued job; `maestro run`, which has no queue, runs subtasks in its own
// process instead.
//
// With it SpawnSubTask enqueues a child job rather than starting a
// goroutine. WAIT_SUBTASKS with children still unfinished stops the run in
// StatusWaitingSubtasks, its state saved: the job parks in
// waiting_subtasks, its worker free, until the store queues it again when
// the last child ends. Resume then gathers the children's results into
// subtasks/ as an in-process subtask's are written, and the movement
// continues. The limits stay and are read from the run's state: a subtask
// cannot spawn (Config.Subtask), and MaxSubtasks counts the subtasks the
// state records. MaxParallelSubtasks does not apply: how many children run
// at once is the workers' concern.
type SubtaskJobs interface {
	// Spawn enqueues the child job of subtask rec (its number, name,
	// piece and task) and returns the job's id.
	Spawn(ctx context.Context, rec SubtaskRecord) (int64, error)
	// Result reports how child job id stands.
	Result(ctx context.Context, id int64) (SubtaskResult, error)
}

// SubtaskResult is how a child job stands (SubtaskJobs.Result).
type SubtaskResult struct {
	// Done is false while the child job has not ended.
	Done bool
	// Status and Result, once Done, are the subtask's end as the parent
	// records it: succeeded, aborted, failed or cancelled, and the
	// result text (why it stopped, for all but succeeded).
	Status RunStatus
	Result string
}

// spawnJob enqueues rec, just recorded in the run's state, as a child job.
// When that fails the record is dropped again: nothing was spawned.
func (r *run) spawnJob(ctx context.Context, rec SubtaskRecord) (SubtaskRecord, error) {
	id, err := r.cfg.SubtaskJobs.Spawn(ctx, rec)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.st.Subtasks {
		if r.st.Subtasks[i].ID != rec.ID {
			continue
		}
		if err != nil {
			r.st.Subtasks = append(r.st.Subtasks[:i], r.st.Subtasks[i+1:]...)
			return rec, fmt.Errorf("enqueue subtask %d as a child job: %w", rec.ID, err)
		}
		r.st.Subtasks[i].Job = id
		rec = r.st.Subtasks[i]
	}
	return rec, nil
}

// collect gathers the results of the child jobs that have ended
// (SubtaskJobs): each is finished as an in-process subtask is, its result
// written under subtasks/. It returns how many are still running. A
// running record with no job (the run stopped between recording the
// subtask and enqueuing it) is reported as interrupted.
func (sp *subtaskPool) collect(ctx context.Context) (left int, err error) {
	r := sp.r
	for _, s := range sp.runningRecords() {
		if s.Job == 0 {
			sp.finish(s, StatusFailed, "The subtask was interrupted: the run stopped before its child job was enqueued.")
			continue
		}
		res, err := r.cfg.SubtaskJobs.Result(ctx, s.Job)
		if err != nil {
			return left, fmt.Errorf("read the result of subtask %d (job %d): %w", s.ID, s.Job, err)
		}
		if !res.Done {
			left++
			continue
		}
		sp.finish(s, res.Status, res.Result)
	}
	return left, nil
}

// abandon records the child jobs still running as cancelled when the run
// ends first; the queue cancels the jobs themselves once it has recorded
// the parent's end (docs/scale-out.md, "Subtasks as child jobs").
func (sp *subtaskPool) abandon() {
	for _, s := range sp.runningRecords() {
		sp.finish(s, StatusCancelled, fmt.Sprintf("The run ended before the subtask finished; its child job %d is cancelled.", s.Job))
	}
}

// resumed brings the subtasks up to date when a run is resumed: child
// jobs that ended meanwhile are gathered (SubtaskJobs); in-process
// subtasks left running by a previous process are reported interrupted.
// left counts the child jobs still running.
func (sp *subtaskPool) resumed(ctx context.Context) (left int, err error) {
	if sp.r.cfg.SubtaskJobs != nil {
		return sp.collect(ctx)
	}
	sp.interrupt()
	return 0, nil
}
