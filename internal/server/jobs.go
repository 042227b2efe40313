package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	taskID, ok := queryInt(w, r, "task_id")
	if !ok {
		return
	}
	after, ok := queryInt(w, r, "after")
	if !ok {
		return
	}
	limit, ok := queryLimit(w, r, 100)
	if !ok {
		return
	}
	f := store.JobFilter{TaskID: taskID, AfterID: after, Limit: limit}
	if v := r.URL.Query().Get("state"); v != "" {
		for st := range strings.SplitSeq(v, ",") {
			if !store.State(st).Valid() {
				writeFieldError(w, http.StatusBadRequest, "state", fmt.Sprintf("expected job states (comma-separated) among %v, found %q", store.States(), st))
				return
			}
			f.States = append(f.States, store.State(st))
		}
	}
	jobs, err := s.st.ListJobs(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	resp := struct {
		Jobs      []store.Job `json:"jobs"`
		NextAfter int64       `json:"next_after,omitempty"`
	}{Jobs: nonNil(jobs)}
	if len(jobs) == limit {
		resp.NextAfter = jobs[len(jobs)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	j, err := s.st.GetJob(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": j})
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if !decodeJSON(w, r, &req, true) {
		return
	}
	if req.Reason == "" {
		req.Reason = "cancelled by " + actor(r)
	}
	j, err := s.st.Cancel(r.Context(), id, req.Reason)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, "job.cancel", jobTarget(id), map[string]any{"reason": req.Reason})
	writeJSON(w, http.StatusOK, map[string]any{"job": j})
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	var req struct {
		Extra int `json:"extra"`
	}
	if !decodeJSON(w, r, &req, true) {
		return
	}
	if req.Extra < 0 || req.Extra > store.MaxAttemptsLimit {
		writeFieldError(w, http.StatusUnprocessableEntity, "extra", fmt.Sprintf("expected 0-%d more attempts (0 means 1), found %d", store.MaxAttemptsLimit, req.Extra))
		return
	}
	j, err := s.st.Retry(r.Context(), id, max(req.Extra, 1))
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, "job.retry", jobTarget(id), map[string]any{"extra": max(req.Extra, 1)})
	writeJSON(w, http.StatusOK, map[string]any{"job": j})
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
		if v := r.Header.Get("Last-Event-ID"); v != "" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				writeFieldError(w, http.StatusBadRequest, "Last-Event-ID", fmt.Sprintf("expected the sequence number of the last event received, found %q", v))
				return
			}
			after = n
		}
		s.streamEvents(w, r, id, after)
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
	events, err := s.st.ReadJobEvents(r.Context(), id, after, limit)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	resp := struct {
		Events    []store.JobEvent `json:"events"`
		State     store.State      `json:"state"`
		LastSeq   int64            `json:"last_seq"`
		NextAfter int64            `json:"next_after,omitempty"`
	}{Events: nonNil(events), State: j.State, LastSeq: j.LastSeq}
	if len(events) == limit {
		resp.NextAfter = events[len(events)-1].Seq
	}
	writeJSON(w, http.StatusOK, resp)
}

// streamEvents sends the events after seq `after`, then every new one as
// it is appended, until the job is finished (then `event: end`) or the
// client goes away. Events are read by sequence number, so a reconnecting
// client that sends Last-Event-ID gets exactly the events it missed. New
// events come from the job's shared feed (one store read per wake-up for
// all the streams following the job in this process); a stream that is
// behind the feed's window reads the store itself.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, id, after int64) {
	ctx := r.Context()
	// Join the feed (subscribed to the job's wake-ups) before the first
	// read, so nothing appended in between is missed.
	f, leave, err := s.feeds.join(ctx, id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	defer leave()
	// The job's state as of its event LastSeq. From then on the stream
	// tracks the state through the status events it sends (every state
	// change appends one in the same transaction).
	j, err := s.st.GetJob(ctx, id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	state := j.State
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	// A retry hint for EventSource clients, and the headers out at once.
	fmt.Fprintf(bw, "retry: 2000\n\n")
	if flush() != nil {
		return
	}
	send := func(events []store.JobEvent) {
		for _, e := range events {
			if e.Seq <= after {
				continue
			}
			data, _ := json.Marshal(e)
			fmt.Fprintf(bw, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data)
			after = e.Seq
			if e.Type == store.JobEventStatus {
				var st store.StatusEvent
				if json.Unmarshal(e.Data, &st) == nil && st.State.Valid() {
					state = st.State
				}
			}
		}
	}
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	for {
		events, wait, ok, closed := f.since(after)
		if closed {
			flush()
			return // the store closed (shutdown); the client reconnects
		}
		if !ok {
			// Behind the feed's window: read the store, then look again.
			events, err := s.st.ReadJobEvents(ctx, id, after, store.MaxListLimit)
			if err != nil {
				s.sseError(bw, r, err)
				flush()
				return
			}
			if len(events) > 0 {
				send(events)
				continue
			}
		}
		send(events)
		// Every event up to the job's LastSeq when the stream began was
		// sent, so a finished state here is final.
		if state.Terminal() && after >= j.LastSeq {
			data, _ := json.Marshal(map[string]any{"state": state, "last_seq": after})
			fmt.Fprintf(bw, "event: end\ndata: %s\n\n", data)
			flush()
			return
		}
		if flush() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		case <-keep.C:
			if _, err := bw.WriteString(": keepalive\n\n"); err != nil || flush() != nil {
				return
			}
		}
	}
}

// sseError reports an error inside a stream as an `event: error`.
func (s *Server) sseError(bw *bufio.Writer, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	s.log.Error("event stream", "path", r.URL.Path, "err", err)
	data, _ := json.Marshal(errorBody{Error: "reading the job's events failed; reconnect with Last-Event-ID"})
	fmt.Fprintf(bw, "event: error\ndata: %s\n\n", data)
}
