package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/oneline"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/protocol"
)

// run is one run of a piece in progress.
type run struct {
	e   *Engine
	cfg *Config
	p   *piece.Piece

	// mu guards st (subtask goroutines update their records and emit
	// events while the run loop works).
	mu      sync.Mutex
	st      *State
	saveErr error

	subs *subtaskPool
	// subtaskNo is this run's subtask number when it is a subtask's run.
	subtaskNo int
	// restartReason says why the current movement restarts (Resume of an
	// interrupted or failed run).
	restartReason string
	// models caches the providers of the models the piece names, by
	// spec (run loop only).
	models map[string]llm.Provider
	// skillsNoted says the skills left out once (addSkillTool).
	skillsNoted sync.Once
}

func (e *Engine) newRun(p *piece.Piece, st *State) *run {
	r := &run{e: e, cfg: &e.cfg, p: p, st: st}
	r.subs = newSubtaskPool(r)
	return r
}

// emit records a run event, once: surfaces that speak only the protocol
// see it through WithStatusLines.
func (r *run) emit(ev Event) {
	r.mu.Lock()
	r.st.Seq++
	rec := Record{RunID: r.st.RunID, Seq: r.st.Seq, Time: r.cfg.Now().UTC(), Event: ev}
	r.mu.Unlock()
	r.cfg.Events.RunEvent(rec)
}

// status shows a status line that is not a run event.
func (r *run) status(msg string) {
	r.cfg.Sink.Event(protocol.Status{Message: msg})
}

// save persists the state; the first failure is kept and stops the run.
func (r *run) save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, err := r.st.saveData(r.e.run, r.cfg.Now())
	if err == nil && r.cfg.StateSaved != nil {
		err = r.cfg.StateSaved(r.st.Movement, data)
	}
	if err != nil && r.saveErr == nil {
		r.saveErr = fmt.Errorf("persist run state: %w", err)
	}
	return r.saveErr
}

// drive runs movements until the run stops.
func (r *run) drive(ctx context.Context) (*Outcome, error) {
	for {
		if r.saveErr != nil {
			return r.failed(ctx, r.saveErr)
		}
		d, err := r.tracedMovement(ctx)
		if err != nil {
			return r.failed(ctx, err)
		}
		stop, err := r.apply(ctx, d)
		if err != nil {
			return r.failed(ctx, err)
		}
		if stop {
			return r.outcome(), r.saveErr
		}
	}
}

// apply carries out a movement's decision; stop is true when the run
// stops (ended or paused).
func (r *run) apply(ctx context.Context, d *decision) (stop bool, err error) {
	st := r.st
	from := st.Movement
	if d.complete {
		switch d.status {
		case statusSuccess:
			return r.finish(StatusSucceeded, d.result, d.reason), nil
		case statusAborted:
			return r.finish(StatusAborted, d.result, d.reason), nil
		default:
			return true, r.pause(ctx, d)
		}
	}
	r.addLessons(from, d.lessons)
	r.emit(Transition{From: from, To: d.next, Summary: d.summary, Forced: d.forced, Reason: d.reason})
	if d.next == piece.WaitSubtasks {
		r.mu.Lock()
		st.Handoff = &Handoff{From: from, To: from, Summary: d.summary, Forced: d.forced, Reason: d.reason}
		st.Status = StatusWaitingSubtasks
		r.mu.Unlock()
		if r.cfg.SubtaskJobs != nil {
			// Child jobs: the run stops waiting (its job parks in
			// waiting_subtasks) unless every child has ended already.
			left, err := r.subs.collect(ctx)
			if err != nil {
				return true, err
			}
			if left > 0 {
				r.emit(Waiting{Movement: from, For: "subtasks", Subtasks: left})
				return true, r.save()
			}
		} else {
			r.emit(Waiting{Movement: from, For: "subtasks", Subtasks: r.subs.running()})
			if err := r.save(); err != nil {
				return true, err
			}
			if err := r.subs.wait(ctx); err != nil {
				return true, err
			}
		}
		r.mu.Lock()
		st.Status = StatusRunning
		r.mu.Unlock()
		return r.enter(from, EntrySubtasks), nil
	}
	h := &Handoff{From: from, To: d.next, Summary: d.summary, Backward: slices.Contains(st.History, d.next), Forced: d.forced, Reason: d.reason}
	r.mu.Lock()
	st.Handoff = h
	if h.Backward {
		st.Feedback = h
	}
	r.mu.Unlock()
	return r.enter(d.next, EntryTransition), nil
}

// enter makes name the current movement, applying max_movements and loop
// control; it returns true when the run ended instead.
func (r *run) enter(name string, entry Entry) bool {
	st := r.st
	m, _ := r.p.Movement(name)
	if st.Movements >= r.p.MaxMovements {
		reason := fmt.Sprintf("max_movements reached: %d movements ran and the piece allows %d", st.Movements, r.p.MaxMovements)
		return r.finish(StatusAborted, fmt.Sprintf("The run was stopped before movement %s: %s.", name, reason), reason)
	}
	note, revisits := st.LoopNote, st.Revisits
	if entry == EntryStart || entry == EntryTransition {
		count, with := loopCount(st.History, name)
		note, revisits = "", 0
		if count > 0 {
			limit, src := m.RevisitLimit(), PressureRevisit
			if with != "" {
				other, _ := r.p.Movement(with)
				limit, src = min(limit, other.RevisitLimit()), PressureCycle
			}
			ev := Pressure{Movement: name, Source: src, Level: LevelWarn, Count: count, Limit: limit, With: with}
			if count > limit {
				ev.Level = LevelAbort
				r.emit(ev)
				reason := ev.Describe()
				return r.finish(StatusAborted, fmt.Sprintf("The run was stopped: %s. The work did not converge; see the run's log for what each movement reported.", reason), reason)
			}
			if count == limit {
				ev.Level = LevelPrompt
			}
			r.emit(ev)
			note = loopNote(ev)
			revisits = count
		}
		r.mu.Lock()
		st.History = append(st.History, name)
		r.mu.Unlock()
	}
	r.mu.Lock()
	st.Movement, st.Entry, st.LoopNote, st.Revisits = name, entry, note, revisits
	st.Movements++
	st.Conversation, st.Progress = nil, nil
	r.mu.Unlock()
	r.save()
	return false
}

// finish ends the run.
func (r *run) finish(status RunStatus, result, reason string) bool {
	r.subs.cancel()
	if r.cfg.SubtaskJobs != nil {
		r.subs.abandon()
	}
	r.mu.Lock()
	st := r.st
	st.Status, st.Result, st.Reason = status, result, reason
	st.Conversation, st.Progress = nil, nil
	st.Question = ""
	r.mu.Unlock()
	r.emit(Complete{Movement: st.Movement, Status: status, Result: result, Reason: reason})
	r.save()
	return true
}

// pause stops the run until the user answers d's question. Running
// subtasks finish first, so that their results are kept.
func (r *run) pause(ctx context.Context, d *decision) error {
	if err := r.subs.wait(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	st := r.st
	st.Status = StatusWaitingHuman
	st.Question = d.result
	st.Reason = d.reason
	st.Conversation, st.Progress = d.conversation, nil
	r.mu.Unlock()
	r.emit(Waiting{Movement: st.Movement, For: "user", Question: d.result})
	return r.save()
}

// failed records an error that stopped the run: an interruption leaves the
// run resumable as running; anything else marks it failed.
func (r *run) failed(ctx context.Context, err error) (*Outcome, error) {
	r.subs.cancel()
	r.mu.Lock()
	st := r.st
	if errors.Is(err, agent.ErrCancelled) || ctx.Err() != nil {
		st.Status, st.Reason = StatusRunning, "interrupted"
	} else {
		st.Status, st.Result, st.Reason = StatusFailed, err.Error(), err.Error()
	}
	r.mu.Unlock()
	if st.Status == StatusFailed {
		r.emit(Complete{Movement: st.Movement, Status: StatusFailed, Result: st.Result, Reason: st.Reason})
	}
	if serr := r.save(); serr != nil && !errors.Is(err, serr) {
		err = errors.Join(err, serr)
	}
	return r.outcome(), err
}

// outcome reports the run's state.
func (r *run) outcome() *Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	o := &Outcome{
		RunID: st.RunID, Piece: st.Piece, Status: st.Status, Result: st.Result, Reason: st.Reason,
		Movement: st.Movement, Movements: st.Movements,
		Usage: st.Usage, CostUSD: st.CostUSD, CostKnown: !st.CostUnknown,
		ModelCalls: st.ModelCalls, ToolCalls: st.ToolCalls, ToolFailures: st.ToolFailures,
	}
	if st.Status == StatusWaitingHuman {
		o.Result = st.Question
	}
	for _, s := range st.Subtasks {
		if s.Job != 0 {
			o.ChildJobs++
		}
	}
	return o
}

// addLessons merges lessons into the run's memory: trimmed, deduplicated
// (case and spacing ignored), the oldest dropped beyond MaxLessons.
func (r *run) addLessons(movement string, lessons []string) {
	r.mu.Lock()
	st := r.st
	seen := map[string]bool{}
	for _, l := range st.Lessons {
		seen[lessonKey(l)] = true
	}
	var added []string
	for _, l := range lessons {
		l = oneline.Cut(l, 500)
		k := lessonKey(l)
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		added = append(added, l)
		st.Lessons = append(st.Lessons, l)
	}
	if over := len(st.Lessons) - r.cfg.MaxLessons; over > 0 {
		st.Lessons = slices.Clone(st.Lessons[over:])
	}
	total := len(st.Lessons)
	r.mu.Unlock()
	if len(added) > 0 {
		r.emit(Lessons{Movement: movement, Added: added, Total: total})
	}
}
