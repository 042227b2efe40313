package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	taskID, ok := queryInt(w, r, "task_id")
	if !ok {
		return
	}
	after, limit, ok := queryPage(w, r, "after", 100)
	if !ok {
		return
	}
	states, ok := queryStates(w, r)
	if !ok {
		return
	}
	parent, ok := queryInt(w, r, "parent_job_id")
	if !ok {
		return
	}
	f := store.JobFilter{TaskID: taskID, ParentJobID: parent, States: states, AfterID: after, Limit: limit}
	jobs, err := s.st.ListJobs(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	next := nextCursor(jobs, limit, func(j store.Job) int64 { return j.ID })
	writeJSON(w, http.StatusOK, api.JobList{Jobs: nonNil(jobs), NextAfter: next})
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	serveByID(s, w, r, s.st.GetJob, func(j store.Job) api.JobResponse { return api.JobResponse{Job: j} })
}

// jobAction is the handler of a POST that acts on a job (cancel, retry):
// its optional JSON body is a Req; do acts, answering the request itself
// when it fails, and returns the job and the audit entry's details.
func jobAction[Req any](s *Server, action string, do func(w http.ResponseWriter, r *http.Request, id int64, req *Req) (store.Job, any, bool)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := pathID(w, r, "id")
		if !ok {
			return
		}
		var req Req
		if !decodeJSON(w, r, &req, true) {
			return
		}
		j, details, ok := do(w, r, id, &req)
		if !ok {
			return
		}
		s.audit(r, action, jobTarget(id), details)
		writeJSON(w, http.StatusOK, api.JobResponse{Job: j})
	}
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, id int64, req *api.CancelRequest) (store.Job, any, bool) {
	if req.Reason == "" {
		req.Reason = "cancelled by " + actor(r)
	}
	j, err := s.st.Cancel(r.Context(), id, req.Reason)
	if err != nil {
		s.jobActionError(w, r, id, "cancel", err)
		return j, nil, false
	}
	return j, api.JobCancelAudit{Reason: req.Reason}, true
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request, id int64, req *api.RetryRequest) (store.Job, any, bool) {
	if req.Extra < 0 || req.Extra > store.MaxAttemptsLimit {
		writeFieldError(w, http.StatusUnprocessableEntity, "extra", fmt.Sprintf("expected 0-%d more attempts (0 means 1), found %d", store.MaxAttemptsLimit, req.Extra))
		return store.Job{}, nil, false
	}
	extra := max(req.Extra, 1)
	j, err := s.st.Retry(r.Context(), id, extra)
	if err != nil {
		s.jobActionError(w, r, id, "retry", err)
		return j, nil, false
	}
	return j, api.JobRetryAudit{Extra: extra}, true
}

// jobActionError answers a failed cancel or retry. One the job's state
// does not allow is a 409 saying that state as a user reads it ("job 2
// has already finished (succeeded); there is nothing to cancel"); the
// store's error named the state machine ("…: invalid state
// transition").
func (s *Server) jobActionError(w http.ResponseWriter, r *http.Request, id int64, action string, err error) {
	if !errors.Is(err, store.ErrInvalidTransition) {
		s.storeError(w, r, err)
		return
	}
	j, gerr := s.st.GetJob(r.Context(), id)
	if gerr != nil {
		s.storeError(w, r, err)
		return
	}
	var msg string
	switch {
	case action == "cancel" && j.State.Terminal():
		msg = fmt.Sprintf("job %d has already finished (%s); there is nothing to cancel", id, j.State)
	case action == "retry" && j.State == store.StateSucceeded:
		msg = fmt.Sprintf("job %d succeeded; only a failed, aborted or cancelled job can be retried", id)
	case action == "retry":
		msg = fmt.Sprintf("job %d has not finished (%s); only a failed, aborted or cancelled job can be retried", id, j.State)
	default:
		s.storeError(w, r, err)
		return
	}
	writeError(w, http.StatusConflict, msg)
}

// jobEvents serves a job's event log: a JSON page, or a Server-Sent Events
// stream when the client accepts text/event-stream.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	after, ok := queryInt(w, r, "after")
	if !ok {
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		cursor := "after"
		if v := r.Header.Get("Last-Event-ID"); v != "" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				writeFieldError(w, http.StatusBadRequest, "Last-Event-ID", fmt.Sprintf("expected the sequence number of the last event received, found %q", v))
				return
			}
			after, cursor = n, "Last-Event-ID"
		}
		s.streamEvents(w, r, id, after, cursor)
		return
	}
	limit, ok := queryLimit(w, r, store.MaxListLimit)
	if !ok {
		return
	}
	j, err := s.st.GetJob(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if cursorPastLog(w, "after", after, j) {
		return
	}
	events, err := s.st.ReadJobEvents(r.Context(), id, after, limit)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	next := nextCursor(events, limit, func(e store.JobEvent) int64 { return e.Seq })
	writeJSON(w, http.StatusOK, api.JobEventPage{Events: nonNil(events), State: j.State, LastSeq: j.LastSeq, NextAfter: next})
}
