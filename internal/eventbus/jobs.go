package eventbus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// JobSource is the part of the store the job follower reads.
type JobSource interface {
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
	ReadJobEvents(ctx context.Context, jobID int64, after int64, limit int) ([]store.JobEvent, error)
	GetTask(ctx context.Context, id int64) (store.Task, error)
}

// jobsState is the job follower's publish cursor: for each job, the seq
// of its last published event.
type jobsState struct {
	Jobs map[string]int64 `json:"jobs"`
}

// jobCursor is one job's place in its log while it is published.
type jobCursor struct {
	job   store.Job
	corr  Correlation
	calls map[string]string
}

// FollowJobs publishes the job logs of src (docs/events.md, "Platform
// events": the job lifecycle subjects and the tool events of the jobs'
// agent loops) from the cursor persisted in stateFile, looking for new
// events every poll (default 500 ms), until ctx ends or the bus closes.
func (b *Bus) FollowJobs(ctx context.Context, src JobSource, stateFile string, poll time.Duration) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-b.ctx.Done():
			stop()
		case <-ctx.Done():
		}
	}()
	st := jobsState{Jobs: map[string]int64{}}
	if _, err := readJSON(stateFile, &st); err != nil {
		return err
	}
	if st.Jobs == nil {
		st.Jobs = map[string]int64{}
	}
	t := time.NewTicker(cmp.Or(poll, 500*time.Millisecond))
	defer t.Stop()
	for {
		if err := b.jobsPass(ctx, src, &st, stateFile); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			b.log.Warn("event bus: publish job events", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// jobsPass publishes every job event appended since st.
func (b *Bus) jobsPass(ctx context.Context, src JobSource, st *jobsState, stateFile string) error {
	for after := int64(0); ; {
		jobs, err := src.ListJobs(ctx, store.JobFilter{AfterID: after, Limit: store.MaxListLimit})
		if err != nil {
			return fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range jobs {
			after = j.ID
			key := strconv.FormatInt(j.ID, 10)
			if j.LastSeq <= st.Jobs[key] {
				continue
			}
			if err := b.publishJob(ctx, src, j, st, key); err != nil {
				return errors.Join(err, writeJSON(stateFile, st))
			}
			if err := writeJSON(stateFile, st); err != nil {
				return err
			}
		}
		if len(jobs) < store.MaxListLimit {
			return nil
		}
	}
}

// publishJob publishes job j's events after st.Jobs[key].
func (b *Bus) publishJob(ctx context.Context, src JobSource, j store.Job, st *jobsState, key string) error {
	jc := jobCursor{job: j, calls: map[string]string{}, corr: b.jobCorrelation(ctx, src, j)}
	for {
		events, err := src.ReadJobEvents(ctx, j.ID, st.Jobs[key], 500)
		if err != nil {
			return fmt.Errorf("read job %d events: %w", j.ID, err)
		}
		for _, e := range events {
			if e.Type == store.JobEventProtocol && st.Jobs[key] > 0 && len(jc.calls) == 0 {
				// Calls begun before the cursor: their tool names come
				// from the events already published.
				b.recallCalls(ctx, src, j.ID, st.Jobs[key], jc.calls)
			}
			for _, ev := range jc.events(e) {
				if err := b.publish(ctx, ev, jc.corr); err != nil {
					return err
				}
			}
			st.Jobs[key] = e.Seq
		}
		if len(events) < 500 {
			return nil
		}
	}
}

// recallCalls fills calls with the tool calls begun in the job's events
// up to seq upTo.
func (b *Bus) recallCalls(ctx context.Context, src JobSource, jobID, upTo int64, calls map[string]string) {
	for after := int64(0); after < upTo; {
		events, err := src.ReadJobEvents(ctx, jobID, after, 500)
		if err != nil || len(events) == 0 {
			return
		}
		for _, e := range events {
			if e.Seq > upTo {
				return
			}
			after = e.Seq
			if e.Type == store.JobEventProtocol {
				toolEvents(decodeFrame(e.Data), "", e.CreatedAt, calls)
			}
		}
	}
}

// jobCorrelation is a job's correlation (JobCorrelation), the task's
// submitter read only when the metadata names no user.
func (b *Bus) jobCorrelation(ctx context.Context, src JobSource, j store.Job) Correlation {
	c := JobCorrelation(j.Payload, j.TaskID, "")
	if c.UserID == "" && j.TaskID != 0 {
		if t, err := src.GetTask(ctx, j.TaskID); err == nil {
			c.UserID = t.Owner
		}
	}
	return c
}

// events maps one job event: a status event to the job's lifecycle
// subject (dispatching has none), a protocol event to the tool events.
// Their ids are job-<id>.<seq>.<i>.
func (jc *jobCursor) events(e store.JobEvent) []Event {
	idBase := "job-" + strconv.FormatInt(e.JobID, 10) + "." + strconv.FormatInt(e.Seq, 10)
	switch e.Type {
	case store.JobEventProtocol:
		return toolEvents(decodeFrame(e.Data), idBase, e.CreatedAt, jc.calls)
	case store.JobEventStatus:
		var s store.StatusEvent
		if json.Unmarshal(e.Data, &s) != nil {
			return nil
		}
		typ := jobType(s.State)
		if typ == "" {
			return nil
		}
		data := map[string]any{"job_id": e.JobID, "state": string(s.State), "attempt": s.Attempt}
		if jc.job.TaskID != 0 {
			data["task_id"] = jc.job.TaskID
		}
		if jc.job.Piece != "" {
			data["piece"] = jc.job.Piece
		}
		for k, v := range map[string]string{"worker": s.Worker, "error": s.Error, "reason": s.Reason} {
			if v != "" {
				data[k] = v
			}
		}
		return []Event{{ID: idBase + ".0", Type: typ, Time: e.CreatedAt, Data: data}}
	}
	return nil
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
