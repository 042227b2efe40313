package eventbus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/tool"
)

// JobSource is the part of the store the job follower reads.
type JobSource interface {
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
	GetJob(ctx context.Context, id int64) (store.Job, error)
	ReadJobEvents(ctx context.Context, jobID int64, after int64, limit int) ([]store.JobEvent, error)
	GetTask(ctx context.Context, id int64) (store.Task, error)
	// Subscribe delivers the store's wake-ups: TopicJobs when a job
	// becomes queued, JobTopic(id) when job id's log grows.
	Subscribe(ctx context.Context, topic string) (*store.Subscription, error)
	// The publish cursors, the store's: shared by every process that
	// publishes its jobs.
	store.JobEventCursors
}

// jobsState is the job follower's publish cursor: for each job, the seq
// of its last published event, as far as this process knows (the store
// keeps the cursor every process advances).
type jobsState struct {
	Jobs map[int64]int64
	// open are the jobs being published (not finished), kept from one
	// read of their log to the next.
	open map[int64]*jobCursor
}

// jobCursor is one job's place in its log while it is published.
type jobCursor struct {
	job  store.Job
	corr Correlation
	// calls are the calls in flight at seq (call id → tool).
	calls map[string]string
	// piece is the piece the job runs as its log tells at seq: the one
	// it was given, else the one its run started (chosen by the
	// classifier), else none yet.
	piece string
	seq   int64
}

// liveStates are the states of a job whose log may still grow with
// events the bus publishes (a finished job's next one, when it is
// queued again, comes with a TopicJobs wake-up).
var liveStates = []store.State{store.StateQueued, store.StateDispatching, store.StateRunning,
	store.StateWaitingHuman, store.StateWaitingSubtasks}

// FollowJobs publishes the job logs of src (docs/events.md, "Platform
// events": the job lifecycle subjects and the tool events of the jobs'
// agent loops) from the cursors src keeps (store.JobEventCursors), until
// ctx ends or the bus closes. legacyFile is where a process kept its own
// cursors before the store did: those found there are moved to src
// (unless src's are ahead) and the file removed. It first publishes
// every job's events after the cursor (the catch-up), then follows the
// store's wake-ups: a job's log is read when the store says it grew
// (JobTopic) while the job is live, and the jobs are listed again when
// one becomes queued (TopicJobs).
// Every reconcile (default one minute) it looks at every job again, in
// case a wake-up was lost.
//
// A TopicJobs wake-up names no job, and the job it is about may have
// run to its end before the listing that follows it: a new one is
// found all the same (the jobs created since the last listing are
// read, whatever their state), but a finished job queued again
// (store.Jobs.Retry) is no longer watched nor live by then. So a
// wake-up whose listing finds no job that was neither watched nor
// listed before looks at every job again, as the reconcile does (such
// passes take at most 1/fullPassShare of the time).
func (b *Bus) FollowJobs(ctx context.Context, src JobSource, legacyFile string, reconcile time.Duration) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-b.ctx.Done():
			stop()
		case <-ctx.Done():
		}
	}()
	st := jobsState{Jobs: map[int64]int64{}}
	if err := b.moveJobsFile(ctx, src, legacyFile, &st); err != nil {
		b.log.Warn("event bus: move the job cursors to the store", "file", legacyFile, "err", err)
	}
	if err := st.load(ctx, src); err != nil && ctx.Err() == nil {
		// Each job's is read before its events are published.
		b.log.Warn("event bus: read the job cursors", "err", err)
	}
	w := newJobWatch(ctx, src)
	defer w.close()
	// Subscribed before the first pass: a job queued during it wakes
	// the loop below.
	queued, err := src.Subscribe(ctx, store.TopicJobs)
	if err != nil {
		return fmt.Errorf("follow job logs: %w", err)
	}
	defer queued.Close()
	t := time.NewTicker(cmp.Or(reconcile, time.Minute))
	defer t.Stop()
	full := true
	var nextFull time.Time         // the earliest a wake-up may ask for a full pass
	var fullLater <-chan time.Time // a full pass a wake-up asked for, delayed
	for {
		if full {
			begin := time.Now()
			// The live jobs are subscribed to before the pass reads
			// them: what they append during it wakes the loop.
			w.live(true)
			if err := b.jobsPass(ctx, src, &st, w); err != nil && ctx.Err() == nil {
				b.log.Warn("event bus: publish job events", "err", err)
			}
			full = false
			nextFull = time.Now().Add(fullPassShare * time.Since(begin))
		}
		for _, id := range w.take() {
			if err := b.jobPass(ctx, src, id, &st, w); err != nil && ctx.Err() == nil {
				b.log.Warn("event bus: publish job events", "job", id, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-queued.C():
			if !ok {
				return nil // the store closed
			}
			// One listing for the wake-ups pending.
			for pending := true; pending; {
				select {
				case _, ok := <-queued.C():
					if !ok {
						return nil
					}
				default:
					pending = false
				}
			}
			if w.live(false) == 0 && fullLater == nil {
				// A job watched already, or one finished again
				// before the listing: only a full pass tells.
				if d := time.Until(nextFull); d > 0 {
					fullLater = time.After(d)
				} else {
					full = true
				}
			}
		case <-fullLater:
			fullLater = nil
			full = true
		case <-w.wake:
		case <-t.C:
			full = true
		}
	}
}

// fullPassShare bounds the full passes wake-ups ask for: the next one
// waits until fullPassShare times as long as the last one took has
// passed since it ended.
const fullPassShare = 20

// jobsPass publishes every job event appended since st.
func (b *Bus) jobsPass(ctx context.Context, src JobSource, st *jobsState, w *jobWatch) error {
	for after := int64(0); ; {
		jobs, err := src.ListJobs(ctx, store.JobFilter{AfterID: after, Limit: store.MaxListLimit})
		if err != nil {
			return fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range jobs {
			after = j.ID
			w.saw(j.ID)
			if err := b.publishNew(ctx, src, j, st); err != nil {
				return err
			}
		}
		if len(jobs) < store.MaxListLimit {
			return nil
		}
	}
}

// jobPass publishes job id's events appended since st, and stops
// watching the job once it is finished.
func (b *Bus) jobPass(ctx context.Context, src JobSource, id int64, st *jobsState, w *jobWatch) error {
	j, err := src.GetJob(ctx, id)
	if err != nil {
		return fmt.Errorf("read job %d: %w", id, err)
	}
	if j.State.Terminal() {
		// Its last events are read below; a later one (it is queued
		// again) comes with a TopicJobs wake-up.
		w.unwatch(id)
	}
	return b.publishNew(ctx, src, j, st)
}

// publishNew publishes job j's events after its cursor. The store's
// cursor is read first: another process of the store may have
// published them since this one last looked.
func (b *Bus) publishNew(ctx context.Context, src JobSource, j store.Job, st *jobsState) error {
	if j.LastSeq <= st.Jobs[j.ID] {
		return nil
	}
	seq, err := src.JobEventCursor(ctx, j.ID)
	if err != nil {
		return fmt.Errorf("read job %d's event cursor: %w", j.ID, err)
	}
	if seq > st.Jobs[j.ID] {
		st.Jobs[j.ID] = seq
		if j.LastSeq <= seq {
			return nil
		}
	}
	return b.publishJob(ctx, src, j, st)
}

// publishJob publishes job j's events after st.Jobs[j.ID]: a page of
// the log at a time, sent without waiting for each acknowledgement (a
// window, as a session follower sends), the cursor advanced in the
// store once the page's events are all acknowledged (never before: a
// process that stops between the two publishes the page again, which
// JetStream drops as duplicates within its window). The job's place
// (its calls in flight) is kept until it finishes, so that its log is
// read once.
func (b *Bus) publishJob(ctx context.Context, src JobSource, j store.Job, st *jobsState) (err error) {
	cursor := st.Jobs[j.ID]
	jc := st.open[j.ID]
	if jc == nil || jc.seq != cursor {
		jc = &jobCursor{job: j, calls: map[string]string{}, seq: cursor}
		jc.corr, jc.piece = b.jobOrigin(ctx, src, j)
		if cursor > 0 {
			// Calls begun before the cursor, and the piece a run started
			// there: they come from the events already published.
			b.recall(ctx, src, jc, cursor)
		}
		if st.open == nil {
			st.open = map[int64]*jobCursor{}
		}
		st.open[j.ID] = jc
	}
	jc.job = j
	defer func() {
		if err != nil || j.State.Terminal() {
			// Read back from the log next time, if there is one.
			delete(st.open, j.ID)
		}
	}()
	win := window{b: b}
	for {
		events, err := src.ReadJobEvents(ctx, j.ID, cursor, 500)
		if err != nil {
			return fmt.Errorf("read job %d events: %w", j.ID, err)
		}
		for _, e := range events {
			for _, ev := range jc.events(e) {
				if err := win.add(ctx, ev, jc.corr); err != nil {
					return err
				}
			}
			cursor = e.Seq
		}
		if err := win.flush(ctx); err != nil {
			return err
		}
		if cursor > st.Jobs[j.ID] {
			// Not advanced here unless in the store: the page is sent
			// again (the next wake-up or reconcile) until it is.
			// Recorded also when ctx ends now (the process stops): the
			// page is acknowledged.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), advanceTimeout)
			err := src.AdvanceJobEventCursor(actx, j.ID, cursor)
			cancel()
			if err != nil {
				return err
			}
		}
		st.Jobs[j.ID], jc.seq = cursor, cursor
		if len(events) < 500 {
			return nil
		}
	}
}

// advanceTimeout bounds the store's write of a job's cursor.
const advanceTimeout = 10 * time.Second

// recall fills jc's calls with the tool calls begun in the job's
// events up to seq upTo, and its piece with the one a run started there.
func (b *Bus) recall(ctx context.Context, src JobSource, jc *jobCursor, upTo int64) {
	for after := int64(0); after < upTo; {
		events, err := src.ReadJobEvents(ctx, jc.job.ID, after, 500)
		if err != nil || len(events) == 0 {
			return
		}
		for _, e := range events {
			if e.Seq > upTo {
				return
			}
			after = e.Seq
			switch e.Type {
			case store.JobEventProtocol:
				toolEvents(decodeFrame(e.Data), "", e.CreatedAt, jc.calls)
			case store.JobEventRunEvent:
				jc.runEvent(e.Data)
			case store.JobEventStatus:
				var s store.StatusEvent
				if json.Unmarshal(e.Data, &s) == nil && endsAttempt(s.State) {
					clear(jc.calls) // ended with the attempt (jobCursor.events)
				}
			}
		}
	}
}

// jobOrigin is what a job's events tell from its start: its correlation
// (JobCorrelation, the task's submitter read only when the metadata
// names no user) and the piece it was given. A task's job was given its
// task's piece (none: the classifier picks, and the store records the
// pick on the job once its run starts, so the job's own piece cannot
// tell); a child job was given its subtask's, and keeps it.
//
// A child job (a subtask's, docs/engine.md) has neither task nor
// metadata of its own: its events carry its parent's correlation (the
// parent's task, submitter and metadata), so a consumer that selects a
// tenant's or a task's events gets its subtasks' too.
func (b *Bus) jobOrigin(ctx context.Context, src JobSource, j store.Job) (Correlation, string) {
	if j.TaskID == 0 && j.ParentJobID != 0 {
		if p, err := src.GetJob(ctx, j.ParentJobID); err == nil && p.ParentJobID == 0 {
			c, _ := b.jobOrigin(ctx, src, p)
			return c, j.Piece
		}
	}
	c := JobCorrelation(j.Payload, j.TaskID, "")
	if j.TaskID == 0 {
		return c, j.Piece
	}
	t, err := src.GetTask(ctx, j.TaskID)
	if err != nil {
		return c, ""
	}
	if c.UserID == "" {
		c.UserID = t.Owner
	}
	return c, t.Piece
}

// kindRunStarted is engine.KindRunStarted, the kind of a run event
// (engine.Record) that starts a run: the engine's tests import this
// package, which cannot import the engine (TestJobEventsNameThePieceOnceKnown
// writes the engine's record).
const kindRunStarted = "run_started"

// runEvent notes the piece of a run_started run event (the job's own
// run, not one of its in-process subtasks'): the piece the job runs.
func (jc *jobCursor) runEvent(data []byte) {
	var r struct {
		Kind string `json:"kind"`
		Data struct {
			Piece   string `json:"piece"`
			Subtask int    `json:"subtask"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &r) == nil && r.Kind == kindRunStarted && r.Data.Subtask == 0 && r.Data.Piece != "" {
		jc.piece = r.Data.Piece
	}
}

// events maps one job event: a status event to the job's lifecycle
// subject (dispatching has none), a protocol event to the tool events.
// Their ids are job-<id>-<created>.<seq>.<i> (jobIDBase).
func (jc *jobCursor) events(e store.JobEvent) []Event {
	idBase := jobIDBase(e.JobID, jc.job.CreatedAt) + "." + strconv.FormatInt(e.Seq, 10)
	switch e.Type {
	case store.JobEventProtocol:
		return toolEvents(decodeFrame(e.Data), idBase, e.CreatedAt, jc.calls)
	case store.JobEventRunEvent:
		jc.runEvent(e.Data)
	case store.JobEventStatus:
		var s store.StatusEvent
		if json.Unmarshal(e.Data, &s) != nil {
			return nil
		}
		typ := jobType(s.State)
		if typ == "" {
			return nil
		}
		var out []Event
		if endsAttempt(s.State) {
			// The attempt is over: a call it left in flight never gets
			// its tool_end (a cancel fences the runner's appends, a
			// worker that died wrote nothing more); it was cut short,
			// CANCELLED as an interrupt's, before the job's status.
			for _, id := range slices.Sorted(maps.Keys(jc.calls)) {
				out = append(out, Event{ID: idBase + ".ended." + id, Type: TypeToolCallCompleted, Time: e.CreatedAt, Data: map[string]any{
					"tool_call_id": id, "tool_name": jc.calls[id], "status": "MAESTRO_TOOL_CALL_STATUS_CANCELLED", "error_code": tool.CodeCancelled,
				}})
			}
			clear(jc.calls)
		}
		data := map[string]any{"job_id": e.JobID, "state": string(s.State), "attempt": s.Attempt}
		if jc.job.TaskID != 0 {
			data["task_id"] = jc.job.TaskID
		}
		if jc.job.ParentJobID != 0 {
			data["parent_job_id"] = jc.job.ParentJobID // a subtask's (child) job
		}
		if jc.piece != "" {
			data["piece"] = jc.piece
		}
		for k, v := range map[string]string{"worker": s.Worker, "error": s.Error, "reason": s.Reason} {
			if v != "" {
				data[k] = v
			}
		}
		return append(out, Event{ID: idBase + ".0", Type: typ, Time: e.CreatedAt, Data: data})
	}
	return nil
}

// endsAttempt reports whether a job entering state s has ended its
// attempt's agent loop: it finished, or is queued again (a retry, a
// release, a lease that expired). A waiting job's loop continues later.
func endsAttempt(s store.State) bool {
	return s == store.StateQueued || s.Terminal()
}

// jobIDBase is the part of a job's event ids that names the job:
// job-<id>-<created>, created being when the store created the job, in
// microseconds since 1970 (what both stores keep). The job's id alone
// is not enough: every store numbers its jobs from 1, so two stores
// publishing to one NATS (two teams' serve, a data directory started
// afresh) would give their first jobs' events the same ids, and
// JetStream would drop the second store's as duplicates. Every process
// of one store reads the same creation time, so a serve and the workers
// on one PostgreSQL still give an event the same id.
func jobIDBase(id int64, created time.Time) string {
	b := "job-" + strconv.FormatInt(id, 10)
	if !created.IsZero() {
		b += "-" + strconv.FormatInt(created.UnixMicro(), 10)
	}
	return b
}

// jobType is the lifecycle subject of a job state.
func jobType(s store.State) string {
	switch s {
	case store.StateQueued:
		return TypeJobQueued
	case store.StateRunning:
		return TypeJobStarted
	case store.StateWaitingHuman, store.StateWaitingSubtasks:
		return TypeJobWaiting
	case store.StateSucceeded:
		return TypeJobSucceeded
	case store.StateFailed, store.StateAborted:
		return TypeJobFailed
	case store.StateCancelled:
		return TypeJobCancelled
	}
	return ""
}

// load reads the store's cursors of every job.
func (st *jobsState) load(ctx context.Context, src JobSource) error {
	for after := int64(0); ; {
		cs, err := src.ListJobEventCursors(ctx, after, store.MaxListLimit)
		if err != nil {
			return err
		}
		for _, c := range cs {
			st.Jobs[c.JobID] = max(st.Jobs[c.JobID], c.Seq)
			after = c.JobID
		}
		if len(cs) < store.MaxListLimit {
			return nil
		}
	}
}

// moveJobsFile moves the cursors of file (a process's own before the
// store kept them: {"jobs": {"<job id>": seq}}) to src, each unless src's
// is ahead, and removes the file, so that a process upgraded with its
// data directory does not publish again what it published. The
// cursors are st's too: when the store refuses one, the file stays, to
// be moved at the next start, and this process still goes on from it.
//
// The file names no store, and a data directory may be used with
// another one (--db switched from SQLite to PostgreSQL, or to a fresh
// database) whose jobs have the same ids but are other jobs: their
// events would never be published. So the file is moved only into a
// store it can be the file of (legacyFileFits): one no process has
// published from yet (no cursor: it is being upgraded), each of whose
// jobs the file names exists with at least that many events. Otherwise
// it is removed, with a line saying why: the store's cursors are the
// ones that count.
func (b *Bus) moveJobsFile(ctx context.Context, src JobSource, file string, st *jobsState) error {
	if file == "" {
		return nil
	}
	var old struct {
		Jobs map[int64]int64 `json:"jobs"`
	}
	found, err := readJSON(file, &old)
	if err != nil || !found {
		return err
	}
	var why string
	if len(old.Jobs) > 0 { // an empty file is nobody's: removed below
		if why, err = legacyFileFits(ctx, src, old.Jobs); err != nil {
			return err
		}
	}
	if why != "" {
		if err := os.Remove(file); err != nil {
			return err
		}
		b.log.Warn("event bus: removed a job cursor file of another store, not moved into this one; the store's cursors are used", "file", file, "jobs", len(old.Jobs), "why", why)
		return nil
	}
	for id, seq := range old.Jobs {
		st.Jobs[id] = max(st.Jobs[id], seq)
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(old.Jobs)) {
		if err := src.AdvanceJobEventCursor(ctx, id, old.Jobs[id]); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil || len(errs) == 3 {
				break
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.Remove(file); err != nil {
		return err
	}
	b.log.Info("event bus: moved the job cursors to the store", "file", file, "jobs", len(old.Jobs))
	return nil
}

// legacyFileFits says why the cursors of a legacy cursor file cannot be
// src's ("" when they can): src has cursors already (a process of this
// version published from it: the file, which every such process removes
// at its start, belongs to another store, or to a process that started
// after another one of the store had moved its own), or a job the file
// names is missing from src or has fewer events than the file says were
// published (a job of another store).
func legacyFileFits(ctx context.Context, src JobSource, jobs map[int64]int64) (string, error) {
	cs, err := src.ListJobEventCursors(ctx, 0, 1)
	if err != nil {
		return "", err
	}
	if len(cs) > 0 {
		return "the store has job cursors already", nil
	}
	for _, id := range slices.Sorted(maps.Keys(jobs)) {
		j, err := src.GetJob(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Sprintf("job %d is not in the store", id), nil
		}
		if err != nil {
			return "", err
		}
		if j.LastSeq < jobs[id] {
			return fmt.Sprintf("job %d has %d events in the store, the file says %d were published", id, j.LastSeq, jobs[id]), nil
		}
	}
	return "", nil
}
