package httpattach

import (
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// events serves GET …/events: an SSE stream of envelopes (wire contract §12).
//
// With subscriptionId (query or subscriber header) it attaches that
// explicit subscription: frames queued since /subscribe come first and
// ?cursor= is ignored. Without, it is an implicit stream on its own
// subscription (of the connection header's connection, else of a new
// connection with the role header's role): its first envelope is a
// snapshot, or with ?cursor=N the buffered envelopes after N, or
// reset{replay_gap} when N is older than the ring. After MarkRestored a
// stream without cursor, and every explicit stream, starts with
// reset{restored_from_snapshot} instead, and a cursor before the reset
// published at the restore replays from that reset on.
//
// Cursors (the rule of strict clients: apply an envelope only when its
// cursor is greater than the last one applied). Snapshot envelopes
// published into the stream — after an interrupt, and the one
// reset{restored_from_snapshot} of a restore — take a cursor of their own
// and are replayed in order, as upstream TS does. The envelopes a stream
// makes for itself take none: its first snapshot (TS: the current
// cursor), reset{replay_gap} and reset{lagged}, whose cursor, the
// current one, is already greater than anything the client applied (it
// asked for an evicted cursor, or left frames unread), and heartbeats.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	s, ok := h.readySession(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	for k := range q {
		// A misspelt parameter (?curser=3) was ignored: the stream
		// started from now, not where the client meant.
		if k != "cursor" && k != "subscriptionId" && k != "optOutNotifications" {
			writeError(w, badRequest("query.%s is not a parameter of this route: it takes cursor, subscriptionId and optOutNotifications", k))
			return
		}
	}
	optOut, e := parseOptOut(q.Get("optOutNotifications"))
	if e != nil {
		writeError(w, e)
		return
	}
	subID := q.Get("subscriptionId")
	if subID == "" {
		subID = header(r, subscriptionHeaders)
	}
	var (
		sub   *subscription
		first []byte // the first envelope, if any
	)
	// Snapshots list every connection: a thousand clients attaching at
	// once must not each hold one being built.
	select {
	case h.snapshotting <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	release := sync.OnceFunc(func() { <-h.snapshotting })
	defer release()
	if subID != "" {
		var ok bool
		if sub, ok = s.get(subID); !ok {
			writeError(w, notFound(CodeNotFound, msgSubscriberNotFound))
			return
		}
		if s.restored.Load() {
			// The /subscribe answer carried a snapshot already; frames
			// queued since are replaced by the current one.
			first = s.envelope(protocol.ResetEnvelope{Reason: protocol.ResetRestoredFromSnapshot, Snapshot: s.fill(sub.sub.Resync())})
		}
	} else {
		if sub, first, e = s.implicit(r, optOut); e != nil {
			writeError(w, e)
			return
		}
	}
	release()
	kick := s.attach(sub)
	defer s.detach(sub)

	st := &stream{s: s, sub: sub, sse: httpedge.StartSSE(w, h.cfg.WriteTimeout)}
	defer st.sse.Close()
	if !st.write(first) || !st.flush() {
		return
	}
	ticks, stopTicker := h.cfg.NewTicker(h.cfg.Heartbeat)
	defer stopTicker()
	for {
		if !st.drain() {
			return
		}
		select {
		case <-sub.sub.Wait():
		case <-ticks:
			// An attached stream keeps its connection's lease fresh.
			sub.conn.Touch()
			if sub.sub.OptsOut(protocol.NotifyHeartbeat) {
				continue
			}
			// The frames published so far first: the heartbeat's cursor
			// is then the current one, and never one whose frame this
			// stream has not written yet.
			if !st.drain() || !st.write(heartbeatEnvelope(sub.sub.Cursor())) || !st.flush() {
				return
			}
		case <-kick:
			return
		case <-h.stop:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// implicit makes the subscription of an implicit stream and its first
// envelope.
func (s *session) implicit(r *http.Request, optOut []protocol.Notification) (*subscription, []byte, *Error) {
	h := s.h
	var cursor *int64
	if raw := r.URL.Query().Get("cursor"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, nil, badRequest("query.cursor must be an integer, got %q", raw)
		}
		cursor = &n
	}
	var c *runtime.Conn
	owns := false
	if id := header(r, connectionHeaders); id != "" {
		var ok bool
		if c, ok = s.rt.Conn(id); !ok {
			return nil, nil, notFound(CodeStaleConnection, msgConnectionNotFound)
		}
	} else {
		var err error
		c, err = s.rt.Connect(runtime.ConnectOptions{Role: headerRole(r), Passive: true})
		if err != nil {
			return nil, nil, asError(err, http.StatusForbidden)
		}
		owns = true
	}
	opts := runtime.SubscribeOptions{From: runtime.FromNow, MaxBacklog: h.cfg.MaxBacklog, OptOut: optOut, Envelopes: true}
	if cursor != nil {
		opts.From, opts.Cursor = runtime.FromCursor, *cursor
		if at := s.restoredAt.Load(); at > 0 && *cursor >= 0 && (*cursor < at-1 || s.rt.Restored() && s.fromDrained(at, *cursor)) {
			// Resuming from before a restore (a client of the drained
			// runner): its reset comes first, in place of the frames
			// before it, which its snapshot includes. A restored
			// runtime's reset carries the manifest's cursor N itself
			// (runtime.Config.Restored), so a client resuming at N gets
			// it too.
			opts.Cursor = at - 1
		}
	}
	rs, err := c.Subscribe(opts)
	gap := errors.Is(err, runtime.ErrReplayGap)
	if gap {
		opts.From = runtime.FromNow
		rs, err = c.Subscribe(opts)
	}
	if err != nil {
		if owns {
			c.Close()
		}
		return nil, nil, asError(err, http.StatusServiceUnavailable)
	}
	var first []byte
	switch {
	case gap:
		first = s.envelope(protocol.ResetEnvelope{Reason: protocol.ResetReplayGap, Snapshot: s.fill(rs.Resync())})
	case cursor != nil:
		// A replay: the buffered envelopes after the cursor, starting
		// with a restore's reset{restored_from_snapshot} when the cursor
		// is before it.
	case s.restored.Load():
		first = s.envelope(protocol.ResetEnvelope{Reason: protocol.ResetRestoredFromSnapshot, Snapshot: s.fill(rs.Resync())})
	default:
		first = s.envelope(protocol.SnapshotEnvelope{Snapshot: s.fill(rs.Resync())})
	}
	sub := &subscription{id: protocol.NewID("sub", 8, h.cfg.Now()), conn: c, sub: rs, role: c.Role(), optOut: optOut, ownsConn: owns}
	s.add(sub)
	return sub, first, nil
}

// fromDrained reports whether cursor, on a runtime restored at N (at,
// runtime.Config.Restored), is a cursor of the drained runner that the
// restored one must answer with its reset: N itself; N+1, the drain's
// snapshot envelope that every client watching the drain applied (the
// restored runtime's first new frame takes N+1 too, so a client of the
// restored runner resuming there gets the reset and that frame again,
// which a reset allows); or anything past the current cursor, which this
// runtime never gave.
func (s *session) fromDrained(at, cursor int64) bool {
	return cursor == at || cursor == at+1 || cursor > s.rt.Cursor()
}

// attach marks the subscription read by a stream, ending the stream that
// read it before; it returns the channel that ends this one.
func (s *session) attach(sub *subscription) <-chan struct{} {
	s.mu.Lock()
	if sub.removed {
		s.mu.Unlock()
		return sub.kick // closed: the stream ends at once
	}
	if sub.attached {
		close(sub.kick)
		sub.kick = make(chan struct{})
	}
	sub.attached = true
	kick := sub.kick
	s.mu.Unlock()
	sub.sub.SetAttached(true)
	return kick
}

// detach ends a stream: an implicit subscription (and the connection made
// for it) goes away; an explicit one waits for the next stream, or the
// idle sweep.
func (s *session) detach(sub *subscription) {
	if !sub.explicit {
		s.remove(sub, sub.ownsConn)
		return
	}
	s.mu.Lock()
	sub.attached = false
	sub.detachedAt = s.h.cfg.Now()
	s.mu.Unlock()
	sub.sub.SetAttached(false)
}

// envelope encodes an envelope the transport makes itself.
func (s *session) envelope(m protocol.Message) []byte {
	data, err := protocol.Marshal(m)
	if err != nil {
		s.h.log.Error("encode SSE envelope", "type", m.MessageType(), "err", err)
		return nil
	}
	return data
}

func heartbeatEnvelope(cursor int64) []byte {
	b := append(make([]byte, 0, 48), `{"type":"heartbeat","cursor":`...)
	b = strconv.AppendInt(b, cursor, 10)
	return append(b, '}')
}

// stream writes envelopes to one SSE response.
type stream struct {
	s   *session
	sub *subscription
	sse *httpedge.SSE
	env []byte // the message envelope being written
}

// drainBatch is how many frames are written between flushes.
const drainBatch = 64

// drain writes every frame ready now; it reports false when the stream
// is over (runtime closed, subscription closed, client gone).
func (st *stream) drain() bool {
	n := 0
	for {
		f, ok, err := st.sub.sub.TryNext()
		switch {
		case errors.Is(err, runtime.ErrLagged):
			snap := st.s.fill(st.sub.sub.Resync())
			if !st.write(st.s.envelope(protocol.ResetEnvelope{Reason: protocol.ResetLagged, Snapshot: snap})) {
				return false
			}
			n++
			continue
		case err != nil: // io.EOF: the runtime closed; or the subscription did
			st.flush()
			return false
		case !ok:
			if n > 0 {
				return st.flush()
			}
			return true
		}
		if !st.writeFrame(f) {
			return false
		}
		if n++; n%drainBatch == 0 && !st.flush() {
			return false
		}
	}
}

// messageEnvelope appends {"type":"message","cursor":N,"message":…} to
// dst without re-encoding the frame.
func messageEnvelope(dst []byte, f runtime.Frame) []byte {
	dst = append(dst, `{"type":"message","cursor":`...)
	dst = strconv.AppendInt(dst, f.Cursor, 10)
	dst = append(dst, `,"message":`...)
	dst = append(dst, f.Data...)
	return append(dst, '}')
}

// write sends one envelope as an SSE data event.
func (st *stream) write(env []byte) bool {
	return env == nil || st.sse.Data(env) == nil
}

// writeFrame sends a frame: a message envelope, or a snapshot envelope
// published into the stream as it is.
func (st *stream) writeFrame(f runtime.Frame) bool {
	if f.Envelope {
		return st.write(f.Data)
	}
	st.env = messageEnvelope(st.env[:0], f)
	ok := st.write(st.env)
	if cap(st.env) > maxKeptEnvelope {
		st.env = nil
	}
	return ok
}

// maxKeptEnvelope is the largest envelope buffer a stream keeps between
// frames: a thousand idle streams must not each hold a large one.
const maxKeptEnvelope = 4 << 10

func (st *stream) flush() bool { return st.sse.Flush() == nil }
