package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

// JobQuery selects jobs for ListJobs; zero fields do not filter.
type JobQuery struct {
	TaskID int64
	// After pages: only jobs with a greater id.
	After  int64
	States []store.State
	Limit  int
}

// ListJobs lists jobs, oldest first (GET /api/v1/jobs).
func (c *Client) ListJobs(ctx context.Context, q JobQuery) (api.JobList, error) {
	states := make([]string, len(q.States))
	for i, s := range q.States {
		states[i] = string(s)
	}
	return getAs[api.JobList](ctx, c, api.JobsPath, newQuery().num("task_id", q.TaskID).num("after", q.After).
		str("state", strings.Join(states, ",")).num("limit", int64(q.Limit)))
}

// Job returns a job.
func (c *Client) Job(ctx context.Context, id int64) (store.Job, error) {
	out, err := getAs[api.JobResponse](ctx, c, idPath(api.JobsPath, id), nil)
	return out.Job, err
}

// CancelJob cancels a queued, running or waiting job; reason (optional) is
// shown on it.
func (c *Client) CancelJob(ctx context.Context, id int64, reason string) (store.Job, error) {
	out, err := callAs[api.JobResponse](ctx, c, http.MethodPost, idPath(api.JobsPath, id, "/cancel"), api.CancelRequest{Reason: reason})
	return out.Job, err
}

// RetryJob queues a failed, aborted or cancelled job again with extra more
// attempts (0 means 1).
func (c *Client) RetryJob(ctx context.Context, id int64, extra int) (store.Job, error) {
	out, err := callAs[api.JobResponse](ctx, c, http.MethodPost, idPath(api.JobsPath, id, "/retry"), api.RetryRequest{Extra: extra})
	return out.Job, err
}

// Event is one job event as received: its JSON as the server sent it, and
// decoded.
type Event struct {
	Raw json.RawMessage
	store.JobEvent
}

// UnmarshalJSON keeps the event's JSON besides decoding it.
func (e *Event) UnmarshalJSON(data []byte) error {
	e.Raw = append(json.RawMessage(nil), data...)
	return json.Unmarshal(data, &e.JobEvent)
}

// EventPage is an api.JobEventPage whose events keep their JSON as sent.
type EventPage struct {
	api.JobEventPage
	// Events replaces JobEventPage.Events (left empty).
	Events []Event `json:"events"`
}

// JobEvents reads one page of a job's event log: the events after the
// sequence number after, at most limit of them (0: the server's default).
func (c *Client) JobEvents(ctx context.Context, id, after int64, limit int) (EventPage, error) {
	return getAs[EventPage](ctx, c, idPath(api.JobsPath, id, "/events"), newQuery().num("after", after).num("limit", int64(limit)))
}

// FollowOptions are the callbacks of FollowJob.
type FollowOptions struct {
	// Event receives every event after the starting point, in order,
	// exactly once, across reconnections.
	Event func(Event)
	// StreamError receives an error the server reports inside a stream;
	// the stream then ends and FollowJob reconnects.
	StreamError func(api.Error)
	// Reconnect is called before each reconnection with why the stream
	// stopped, the last event received and the pause before reconnecting.
	Reconnect func(err error, after int64, pause time.Duration)
	// MaxFailures is how many connections in a row may fail without an
	// event before FollowJob gives up (default 10).
	MaxFailures int
}

// FollowJob reads a job's events after the sequence number after as
// Server-Sent Events until the server ends the stream (the job finished)
// and returns the stream's end. A dropped connection is resumed with
// Last-Event-ID after a growing pause (1 s to 5 s), so no event is missed
// or repeated. It returns ctx's error when ctx ends, an *Error when the
// server refuses the stream (4xx), and an error when MaxFailures
// connections in a row failed.
func (c *Client) FollowJob(ctx context.Context, id, after int64, o FollowOptions) (api.StreamEnd, error) {
	maxFailures := o.MaxFailures
	if maxFailures <= 0 {
		maxFailures = 10
	}
	failures := 0
	for {
		end, got, err := c.streamOnce(ctx, id, &after, o)
		if end != nil {
			return *end, nil
		}
		if ctx.Err() != nil {
			return api.StreamEnd{}, ctx.Err()
		}
		if ae, ok := errors.AsType[*Error](err); ok && ae.Status < 500 {
			return api.StreamEnd{}, err
		}
		if got {
			failures = 0
		}
		failures++
		if failures > maxFailures {
			return api.StreamEnd{}, fmt.Errorf("following job %d: giving up after %d failed connections: %w", id, maxFailures, err)
		}
		pause := time.Duration(min(failures, 5)) * time.Second
		if o.Reconnect != nil {
			o.Reconnect(err, after, pause)
		}
		select {
		case <-ctx.Done():
			return api.StreamEnd{}, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// streamOnce reads one SSE connection. It returns the stream's end when
// the server sent it, whether any event arrived, and why it stopped
// otherwise.
func (c *Client) streamOnce(ctx context.Context, id int64, after *int64, o FollowOptions) (end *api.StreamEnd, got bool, err error) {
	req, err := c.newRequest(ctx, http.MethodGet, idPath(api.JobsPath, id, "/events"), nil, "")
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	resp, err := c.send(c.stream, req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var event, data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, got, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			switch event {
			case "":
			case api.StreamEndEvent:
				var e api.StreamEnd
				json.Unmarshal([]byte(data), &e)
				return &e, got, nil
			case api.StreamErrorEvent:
				if o.StreamError != nil {
					var e api.Error
					if json.Unmarshal([]byte(data), &e) != nil || e.Error == "" {
						e.Error = data
					}
					o.StreamError(e)
				}
			default:
				var e store.JobEvent
				if json.Unmarshal([]byte(data), &e) == nil && e.Seq > *after {
					*after = e.Seq
					got = true
					if o.Event != nil {
						o.Event(Event{Raw: json.RawMessage(data), JobEvent: e})
					}
				}
			}
			event, data = "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			// Lines of one event's data join with newlines (the SSE rules).
			if data != "" {
				data += "\n"
			}
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
}
