package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/fanout"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/store"
)

// The job event stream: a job's log read by every stream following it
// through one shared feed, the job side of the cursor fan-out
// (internal/fanout) that the headless runtime uses for sessions.
// docs/remote-attach.md ("Fan-out") and docs/api.md ("Event stream (SSE)")
// document the window and the resume rules.

// Limits of a feed's window of recent events: a stream further behind
// (resuming from an old Last-Event-ID, or one that fell behind) reads the
// store itself, which holds every event.
const (
	feedWindow      = 4096
	feedWindowBytes = 8 << 20
)

// streamRetry is the reconnection delay the stream suggests to
// EventSource clients.
const streamRetry = 2 * time.Second

// maxKeptEvents is the largest read buffer a stream keeps between reads:
// a thousand streams must not each hold a window's worth after catching up.
const maxKeptEvents = 64

// feeds shares one reader of each followed job's event log among all the
// streams following it in this process: on a wake-up the feed reads the
// new events once and every stream takes them from memory, instead of
// every stream querying the store (1,000 subscribers on one job would be
// 1,000 queries per event).
type feeds struct {
	st        store.Store
	poll      time.Duration
	mu        sync.Mutex
	m         map[int64]*feed
	onStopped func() // tests

	// lost holds, per job, the resume cursors (Last-Event-ID) of the
	// streams the DropStreamsAfter test hook aborted (guarded by mu).
	lost map[int64]map[int64]bool
}

// feed is the shared reader of one job's log.
type feed struct {
	id     int64
	refs   int // guarded by feeds.mu
	cancel context.CancelFunc

	mu   sync.Mutex
	ring *fanout.Ring[store.JobEvent] // the most recent events read, by seq
	last int64                        // the highest sequence number read
}

func newFeeds(st store.Store, poll time.Duration) *feeds {
	return &feeds{st: st, poll: poll, m: map[int64]*feed{}}
}

// join returns the feed of job id, starting it if needed; call the
// returned function when the stream ends. The feed is subscribed to the
// job's wake-ups before join returns, so an event appended after join is
// delivered by the feed.
func (fs *feeds) join(ctx context.Context, id int64) (*feed, func(), error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, ok := fs.m[id]
	if !ok {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		sub, err := fs.st.Subscribe(fctx, store.JobTopic(id))
		if err != nil {
			cancel()
			return nil, nil, err
		}
		j, err := fs.st.GetJob(ctx, id)
		if err != nil {
			sub.Close()
			cancel()
			return nil, nil, err
		}
		f = &feed{id: id, cancel: cancel, last: j.LastSeq}
		// The events up to LastSeq are not in the window: a stream
		// after an earlier seq reads them from the store.
		f.ring = fanout.New[store.JobEvent](&f.mu, fanout.Limits{Frames: feedWindow, Bytes: feedWindowBytes}, j.LastSeq)
		fs.m[id] = f
		go fs.run(fctx, f, sub)
	}
	f.refs++
	leave := func() {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		f.refs--
		if f.refs == 0 {
			f.cancel()
			if fs.m[id] == f {
				delete(fs.m, id)
			}
		}
	}
	return f, leave, nil
}

// cut is the DropStreamsAfter test hook's choice for a stream of job id
// that resumed from cursor from and has sent its quota: abort it (true),
// or end it cleanly (false) when a stream from the same cursor was
// aborted before and the client is back at that cursor. An aborted
// response loses what the client had received but not yet read (a
// browser errors the body stream and drops its queued chunks), and a busy
// client reads the quota's events only after the abort: cutting at the
// same place every time would then send it the same events, lost the
// same way, forever. A clean end keeps them, so the client always moves
// on; the next stream, from the new cursor, is aborted again.
func (fs *feeds) cut(id, from int64) (abort bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.lost[id][from] {
		delete(fs.lost[id], from)
		return false
	}
	if fs.lost == nil {
		fs.lost = map[int64]map[int64]bool{}
	}
	if fs.lost[id] == nil {
		fs.lost[id] = map[int64]bool{}
	}
	fs.lost[id][from] = true
	return true
}

// errCut ends a stream cleanly at the test hook's cut.
var errCut = errors.New("the stream was cut (test hook)")

// run reads the job's new events on every wake-up (and every poll
// interval, as a backstop for lost wake-ups) until ctx ends.
func (fs *feeds) run(ctx context.Context, f *feed, sub *store.Subscription) {
	defer sub.Close()
	defer func() {
		f.mu.Lock()
		f.ring.Close()
		f.mu.Unlock()
		if fs.onStopped != nil {
			fs.onStopped()
		}
	}()
	tick := time.NewTicker(fs.poll)
	defer tick.Stop()
	for sub.Wait(ctx, tick.C) {
		for {
			f.mu.Lock()
			after := f.last
			f.mu.Unlock()
			events, err := fs.st.ReadJobEvents(ctx, f.id, after, store.MaxListLimit)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				break // try again on the next wake-up or tick
			}
			if len(events) > 0 {
				f.mu.Lock()
				for _, e := range events {
					f.ring.Push(e.Seq, len(e.Data), e)
				}
				f.last = events[len(events)-1].Seq
				f.mu.Unlock()
			}
			if len(events) < store.MaxListLimit {
				break
			}
		}
	}
}

// since appends the feed's events after seq `after` to dst and returns
// them with a channel closed when more arrive. ok is false when the feed
// does not hold every event after `after` (the stream must read the
// store), and closed is true when the feed has stopped.
func (f *feed) since(dst []store.JobEvent, after int64) (events []store.JobEvent, wait <-chan struct{}, ok, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ring.Closed() {
		return dst, nil, false, true
	}
	events, err := f.ring.AppendAfter(dst, after)
	return events, f.ring.Wait(), err == nil, false
}

// streamEvents sends the events after seq `after`, then every new one as
// it is appended, until the job is finished (then `event: end`) or the
// client goes away. Events are read by sequence number, so a reconnecting
// client that sends Last-Event-ID gets exactly the events it missed. New
// events come from the job's shared feed (one store read per wake-up for
// all the streams following the job in this process); a stream that is
// behind the feed's window reads the store itself.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, id, after int64, cursor string) {
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
	if cursorPastLog(w, cursor, after, j) {
		return
	}
	state := j.State
	sse := httpedge.StartSSE(w, s.cfg.StreamWriteTimeout)
	defer sse.Close()
	// A retry hint for EventSource clients, and the headers out at once.
	if sse.Retry(streamRetry) != nil || sse.Flush() != nil {
		return
	}
	from := after // the cursor the client resumed from
	sent := 0
	send := func(events []store.JobEvent) error {
		for _, e := range events {
			if e.Seq <= after {
				continue
			}
			data, _ := json.Marshal(e)
			if err := sse.Event(e.Seq, string(e.Type), data); err != nil {
				return err
			}
			after = e.Seq
			if sent++; sent == s.cfg.DropStreamsAfter {
				// The test hook: cut the stream after this event, by
				// closing the connection, or by ending the response when
				// the client has come back from where the last abort
				// began (see cut).
				sse.Flush()
				if s.feeds.cut(id, from) {
					panic(http.ErrAbortHandler)
				}
				return errCut
			}
			if e.Type == store.JobEventStatus {
				var st store.StatusEvent
				if json.Unmarshal(e.Data, &st) == nil && st.State.Valid() {
					state = st.State
				}
			}
		}
		return nil
	}
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	var buf []store.JobEvent
	for {
		events, wait, ok, closed := f.since(buf[:0], after)
		if closed {
			sse.Flush()
			return // the store closed (shutdown); the client reconnects
		}
		if !ok {
			// Behind the feed's window: read the store, then look again.
			events, err := s.st.ReadJobEvents(ctx, id, after, store.MaxListLimit)
			if err != nil {
				s.sseError(sse, r, err)
				sse.Flush()
				return
			}
			if len(events) > 0 {
				if send(events) != nil {
					return
				}
				continue
			}
		}
		if send(events) != nil {
			return
		}
		if cap(events) <= maxKeptEvents {
			clear(events) // the stream keeps no event beyond its send
			buf = events
		} else {
			buf = nil
		}
		// Every event up to the job's LastSeq when the stream began was
		// sent, so a finished state here is final.
		if state.Terminal() && after >= j.LastSeq {
			data, _ := json.Marshal(api.StreamEnd{State: state, LastSeq: after})
			sse.Event(0, api.StreamEndEvent, data)
			sse.Flush()
			return
		}
		if sse.Flush() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		case <-keep.C:
			if sse.Comment("keepalive") != nil || sse.Flush() != nil {
				return
			}
		}
	}
}

// sseError reports an error inside a stream as an `event: error`.
func (s *Server) sseError(sse *httpedge.SSE, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	s.log.Error("event stream", "path", r.URL.Path, "err", err)
	data, _ := json.Marshal(api.Error{Error: "reading the job's events failed; reconnect with Last-Event-ID"})
	sse.Event(0, api.StreamErrorEvent, data)
}

// cursorPastLog answers 400 on the cursor parameter and returns true when
// after is past job j's last event. Events are stored before they are
// sent, so no client can have received one past LastSeq: the cursor is of
// another job or of a log that was replaced. A stream from it would skip
// every event up to it (and end saying last_seq is the cursor); a page
// would be empty for as long.
func cursorPastLog(w http.ResponseWriter, cursor string, after int64, j store.Job) bool {
	if after <= j.LastSeq {
		return false
	}
	writeFieldError(w, http.StatusBadRequest, cursor, fmt.Sprintf("event %d is past the job's last event (%d): expected the sequence number of an event of this job's log", after, j.LastSeq))
	return true
}
