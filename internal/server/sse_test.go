package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
)

// frame is one SSE frame (or a comment line).
type frame struct {
	ID, Event, Data, Comment string
}

// sseStream is an open event stream.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// openStream opens GET /api/v1/jobs/{id}/events as SSE with lastID as
// Last-Event-ID ("" for none) and query appended to the URL.
func (e *env) openStream(jobID int64, lastID, query string) *sseStream {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/api/v1/jobs/"+strconv.FormatInt(jobID, 10)+"/events"+query, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		e.t.Fatalf("open stream: status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseStream{t: e.t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	e.t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next frame; ok is false at the end of the stream.
func (s *sseStream) next() (frame, bool) {
	s.t.Helper()
	var f frame
	seen := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return f, false
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				return f, true
			}
			continue
		}
		seen = true
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "":
			f.Comment = v
		case "id":
			f.ID = v
		case "event":
			f.Event = v
		case "data":
			f.Data = v
		case "retry":
			seen = false
		}
	}
}

// nextEvent skips comments and returns the next event frame.
func (s *sseStream) nextEvent() frame {
	s.t.Helper()
	for {
		f, ok := s.next()
		if !ok {
			s.t.Fatal("the stream ended before the expected event")
		}
		if f.Event != "" {
			return f
		}
	}
}

// eventSeq checks a frame is a job event and returns its sequence number.
func eventSeq(t *testing.T, f frame) int64 {
	t.Helper()
	var ev store.JobEvent
	if err := json.Unmarshal([]byte(f.Data), &ev); err != nil {
		t.Fatalf("frame data %q: %v", f.Data, err)
	}
	if strconv.FormatInt(ev.Seq, 10) != f.ID || string(ev.Type) != f.Event {
		t.Fatalf("frame id %q event %q do not match its data %s", f.ID, f.Event, f.Data)
	}
	return ev.Seq
}

// TestSSEResume: a client reads some events, disconnects, the job goes on,
// and a reconnection with Last-Event-ID (or ?after=) gets exactly the
// events it missed, in order, then `event: end` once the job is finished.
func TestSSEResume(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b.open(t), nil)
			ct := e.createTask("stream me", nil)
			j := claim(t, e.st, "w1")
			appendEvents(t, e.st, j, "movement_started", "tool_start", "tool_result")

			s := e.openStream(ct.Job.ID, "", "")
			// queued, dispatching, running and the three appended.
			var seqs []int64
			for range 6 {
				seqs = append(seqs, eventSeq(t, s.nextEvent()))
			}
			// Live delivery: an event appended while connected arrives.
			appendEvents(t, e.st, j, "llm")
			seqs = append(seqs, eventSeq(t, s.nextEvent()))
			for i, q := range seqs {
				if q != int64(i+1) {
					t.Fatalf("first stream: sequence numbers %v, want 1..%d", seqs, len(seqs))
				}
			}
			last := seqs[len(seqs)-1]
			s.close()

			// Missed while disconnected.
			missed := appendEvents(t, e.st, j, "transition", "movement_started")
			done, err := e.st.Complete(t.Context(), j.Lease(), "all done")
			if err != nil {
				t.Fatal(err)
			}
			all, err := e.st.ReadJobEvents(t.Context(), j.ID, last, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(missed)+1 || all[len(all)-1].Seq != done.LastSeq {
				t.Fatalf("store has %d events after %d, want the %d appended plus the status", len(all), last, len(missed))
			}
			for _, resume := range []struct{ lastID, query string }{
				{strconv.FormatInt(last, 10), ""},
				{"", "?after=" + strconv.FormatInt(last, 10)},
			} {
				s2 := e.openStream(ct.Job.ID, resume.lastID, resume.query)
				var got []int64
				for {
					f := s2.nextEvent()
					if f.Event == "end" {
						if !strings.Contains(f.Data, `"succeeded"`) {
							t.Fatalf("end frame %q: want the final state", f.Data)
						}
						break
					}
					got = append(got, eventSeq(t, f))
				}
				if len(got) != len(all) {
					t.Fatalf("resume %+v: got seqs %v, want %d events after %d", resume, got, len(all), last)
				}
				for i, ev := range all {
					if got[i] != ev.Seq {
						t.Fatalf("resume %+v: got seqs %v, want %v…", resume, got, all)
					}
				}
				if _, ok := s2.next(); ok {
					t.Fatal("the stream goes on after event: end")
				}
			}
		})
	}
}

// TestSSEKeepalive: an idle stream sends keepalive comments.
func TestSSEKeepalive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.KeepAlive = 5 * time.Millisecond })
	ct := e.createTask("idle", nil)
	s := e.openStream(ct.Job.ID, "", "")
	if f := s.nextEvent(); f.Event != "status" {
		t.Fatalf("first frame %+v, want the queued status", f)
	}
	for {
		f, ok := s.next()
		if !ok {
			t.Fatal("stream ended")
		}
		if f.Comment == "keepalive" {
			return
		}
		if f.Event != "" {
			t.Fatalf("unexpected event %+v on an idle job", f)
		}
	}
}

func TestSSEErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	ct := e.createTask("x", nil)
	path := "/api/v1/jobs/" + strconv.FormatInt(ct.Job.ID, 10) + "/events"
	if ae := e.wantError(http.StatusBadRequest, "GET", path, nil, "Accept", "text/event-stream", "Last-Event-ID", "abc"); ae.Field != "Last-Event-ID" {
		t.Fatalf("bad Last-Event-ID: field %q", ae.Field)
	}
	// A cursor past the log (of another job, or of a log that was
	// replaced) is refused rather than streamed from: the stream would
	// skip every event up to it.
	for _, c := range []struct{ field, path, id string }{{"Last-Event-ID", path, "5"}, {"after", path + "?after=5", ""}} {
		ae := e.wantError(http.StatusBadRequest, "GET", c.path, nil, "Accept", "text/event-stream", "Last-Event-ID", c.id)
		if ae.Field != c.field || !strings.Contains(ae.Error, "past the job's last event (1)") {
			t.Errorf("stream from event 5 of a job with 1: %+v, want a 400 on %s", ae, c.field)
		}
	}
	e.wantError(http.StatusNotFound, "GET", "/api/v1/jobs/999/events", nil, "Accept", "text/event-stream")
	e.wantError(http.StatusBadRequest, "GET", path+"?after=-1", nil)

	// JSON pages.
	var page struct {
		Events  []store.JobEvent `json:"events"`
		State   store.State      `json:"state"`
		LastSeq int64            `json:"last_seq"`
	}
	e.must(http.StatusOK, "GET", path, nil, &page)
	if len(page.Events) != 1 || page.Events[0].Type != store.JobEventStatus || page.State != store.StateQueued || page.LastSeq != 1 {
		t.Fatalf("events page %+v", page)
	}
	e.must(http.StatusOK, "GET", path+"?after=1", nil, &page)
	if len(page.Events) != 0 {
		t.Fatalf("after=1: %+v", page.Events)
	}
	// A page past the log is refused as a stream from there is: it was an
	// empty page, and a client polling from that cursor waited for ever.
	if ae := e.wantError(http.StatusBadRequest, "GET", path+"?after=5", nil); ae.Field != "after" || !strings.Contains(ae.Error, "past the job's last event (1)") {
		t.Errorf("page after event 5 of a job with 1: %+v, want a 400 on after", ae)
	}
}

// TestSSEManySubscribers: many streams on one job, joining at different
// points, one of them behind the shared feed's window, each get every
// event exactly once and in order; the feed stops when the last leaves.
func TestSSEManySubscribers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	stopped := make(chan struct{}, 10)
	e.srv.OnFeedStopped(func() { stopped <- struct{}{} })
	ct := e.createTask("fan out", nil)
	j := claim(t, e.st, "w1")

	check := func(s *sseStream, from int64) int64 {
		t.Helper()
		var n int64
		for {
			f := s.nextEvent()
			if f.Event == "end" {
				return n
			}
			n++
			if q := eventSeq(t, f); q != from+n {
				t.Fatalf("event %d has seq %d, want %d", n, q, from+n)
			}
		}
	}
	var streams []*sseStream
	for range 10 {
		streams = append(streams, e.openStream(ct.Job.ID, "", ""))
	}
	// 5,000 events: more than the feed keeps.
	for range 5 {
		var evs []store.NewJobEvent
		for range 1000 {
			evs = append(evs, store.NewJobEvent{Type: "step", Data: json.RawMessage(`{}`)})
		}
		if _, err := e.st.AppendJobEvents(t.Context(), j.Lease(), evs); err != nil {
			t.Fatal(err)
		}
	}
	streams = append(streams, e.openStream(ct.Job.ID, "", ""), e.openStream(ct.Job.ID, "2", ""))
	done, err := e.st.Complete(t.Context(), j.Lease(), "ok")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		from := int64(0)
		if i == len(streams)-1 {
			from = 2
		}
		n := check(s, from)
		want := done.LastSeq - from
		if n != want {
			t.Fatalf("stream %d got %d events, want %d", i, n, want)
		}
		s.close()
	}
	// Every stream ended: the feed stops, once.
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the job's feed still runs after every stream ended")
	}
	if n := e.srv.Feeds(); n != 0 {
		t.Fatalf("%d feeds left", n)
	}
}

// TestSSEStalledReader: a client that keeps its job stream open but stops
// reading is disconnected once a write has waited StreamWriteTimeout; it
// held its connection and the stream's goroutine for as long as it stayed
// connected.
func TestSSEStalledReader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.StreamWriteTimeout = 100 * time.Millisecond })
	stopped := make(chan struct{}, 1)
	e.srv.OnFeedStopped(func() { stopped <- struct{}{} })
	ct := e.createTask("a big log", nil)
	j := claim(t, e.st, "w1")
	// 16 MiB of events: more than the sockets of both ends buffer.
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", 64<<10) + `"}`)
	for range 8 {
		var evs []store.NewJobEvent
		for range 32 {
			evs = append(evs, store.NewJobEvent{Type: "step", Data: big})
		}
		if _, err := e.st.AppendJobEvents(t.Context(), j.Lease(), evs); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := net.DialTimeout("tcp", e.ts.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	req := fmt.Sprintf("GET /api/v1/jobs/%d/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n", ct.Job.ID, e.ts.Listener.Addr())
	if e.token != "" {
		req += "Authorization: Bearer " + e.token + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing: the stream ends (its feed stops) once a
	// write has waited 100 ms.
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream whose client reads nothing is still open after 10 s")
	}
}
