package httpattach

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// session is the transport's view of one runtime: its subscriptions (the
// runtime knows connections, not subscription ids) and its anonymous
// connection.
type session struct {
	h        *Handler
	id       string
	rt       *runtime.Runtime
	restored atomic.Bool
	// restoredAt is the cursor of the reset{restored_from_snapshot}
	// published into the stream (0: none yet).
	restoredAt atomic.Int64
	// active is when a request last named the session (unix ns).
	active atomic.Int64

	mu   sync.Mutex
	subs map[string]*subscription
	seq  uint64
	// anon is the connection of requests that name none.
	anon *runtime.Conn
}

// publishSnapshot publishes a snapshot envelope into the session's stream
// (after an interrupt), or reset{reason} (after a restore): it takes the
// next cursor and every stream delivers it in cursor order (contract
// §12; runtime.PublishSnapshot).
func (s *session) publishSnapshot(reason protocol.ResetReason) int64 {
	// Computed first: the fill runs under the runtime's locks, which must
	// not be held while taking s.mu.
	csid := s.controllerSubscription()
	return s.rt.PublishSnapshot(reason, func(snap *protocol.Snapshot) {
		snap.State.ControllerSubscriptionID = csid
	})
}

// markRestored marks the session restored and, the first time, publishes
// reset{restored_from_snapshot} into its stream.
func (s *session) markRestored() {
	if s.restored.CompareAndSwap(false, true) {
		s.restoredAt.Store(s.publishSnapshot(protocol.ResetRestoredFromSnapshot))
	}
}

// subscription is one subscription id: explicit (POST /subscribe, read by
// later event streams) or implicit (one event stream without a
// subscription id).
type subscription struct {
	id       string
	seq      uint64
	conn     *runtime.Conn
	sub      *runtime.Subscription
	role     protocol.Role
	explicit bool
	optOut   []protocol.Notification
	// ownsConn: the connection was made for this implicit stream and
	// closes with it.
	ownsConn bool

	// Guarded by session.mu.
	attached   bool
	detachedAt time.Time
	// kick is closed to end the stream attached now (another stream
	// attached to the same subscription, or the subscription removed).
	kick chan struct{}
	// removed: dropped from the session; kick is closed for good.
	removed bool
}

// dropLocked forgets sub and ends its stream; the caller holds s.mu.
func (s *session) dropLocked(sub *subscription) {
	if sub.removed {
		return
	}
	sub.removed = true
	delete(s.subs, sub.id)
	close(sub.kick)
}

// lookup returns the session of an existing id.
func (h *Handler) lookup(id string) (*session, *Error) {
	rt, ok := h.cfg.Sessions.Get(id)
	if !ok || rt == nil {
		return nil, h.missing(id, msgSessionNotFound)
	}
	return h.bind(id, rt), nil
}

// pathSession resolves the session the request's {id} names; on an error
// it writes the error and returns false.
func (h *Handler) pathSession(w http.ResponseWriter, r *http.Request) (*session, bool) {
	s, e := h.lookup(r.PathValue("id"))
	if e != nil {
		writeError(w, e)
		return nil, false
	}
	return s, true
}

// readySession is pathSession for the routes that drive a session
// (messages, events, attachments): it first answers the Handler's
// unready error, if any.
func (h *Handler) readySession(w http.ResponseWriter, r *http.Request) (*session, bool) {
	if !h.ready(w) {
		return nil, false
	}
	return h.pathSession(w, r)
}

// missing is the error for an unknown session id: the Sessions' own
// (SessionMissing), else 404 with msg.
func (h *Handler) missing(id, msg string) *Error {
	if m, ok := h.cfg.Sessions.(SessionMissing); ok {
		if err := m.Missing(id); err != nil {
			return asError(err, http.StatusNotFound)
		}
	}
	return notFound(CodeNotFound, msg)
}

// bind returns the session state of rt under id, starting afresh when
// the id now names another runtime.
func (h *Handler) bind(id string, rt *runtime.Runtime) *session {
	h.mu.Lock()
	now := h.cfg.Now()
	if s := h.sessions[id]; s != nil && s.rt == rt {
		s.active.Store(now.UnixNano())
		h.mu.Unlock()
		return s
	}
	s := &session{h: h, id: id, rt: rt, subs: map[string]*subscription{}}
	s.active.Store(now.UnixNano())
	h.sessions[id] = s
	restored := h.restored[id]
	h.mu.Unlock()
	if restored {
		s.markRestored()
	}
	go h.watch(s)
	return s
}

// watch disposes a session whose runtime shut down (a shutdown message).
func (h *Handler) watch(s *session) {
	select {
	case <-s.rt.Done():
	case <-h.stop:
		return
	}
	h.dispose(s)
}

// dispose forgets a session (Sessions too), then shuts its runtime down
// and closes it, which ends its streams.
func (h *Handler) dispose(s *session) {
	h.mu.Lock()
	mine := h.sessions[s.id] == s
	if mine {
		delete(h.sessions, s.id)
	}
	h.mu.Unlock()
	if rm, ok := h.cfg.Sessions.(SessionRemover); ok && mine {
		rm.Remove(s.id)
	}
	s.rt.Shutdown()
	if err := s.rt.Close(); err != nil {
		h.log.Warn("close headless runtime", "session", s.id, "err", err)
	}
}

// add records a new subscription.
func (s *session) add(sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	sub.seq = s.seq
	sub.kick = make(chan struct{})
	sub.detachedAt = s.h.cfg.Now()
	s.subs[sub.id] = sub
}

// get returns a live subscription.
func (s *session) get(id string) (*subscription, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[id]
	if ok && sub.conn.Closed() {
		s.dropLocked(sub)
		return nil, false
	}
	return sub, ok
}

// remove ends a subscription; when closeConn is set and it was its
// connection's last subscription, the connection is closed too (its
// lease released, its utilities stopped).
func (s *session) remove(sub *subscription, closeConn bool) {
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		s.mu.Unlock()
		return
	}
	s.dropLocked(sub)
	last := true
	for _, o := range s.subs {
		if o.conn == sub.conn {
			last = false
		}
	}
	s.mu.Unlock()
	sub.sub.Close()
	if closeConn && last {
		sub.conn.Close()
	}
}

// connSubs returns the subscriptions of a connection, oldest first.
func (s *session) connSubs(c *runtime.Conn) []*subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*subscription
	for _, sub := range s.subs {
		if sub.conn == c {
			out = append(out, sub)
		}
	}
	slices.SortFunc(out, func(a, b *subscription) int { return int(a.seq) - int(b.seq) })
	return out
}

// controllerSubscription is controller_subscription_id: an attached
// subscription of the lease holder, else its oldest, else null.
func (s *session) controllerSubscription() protocol.Nullable[string] {
	ctrl := s.rt.ControllerID()
	if ctrl == "" {
		return protocol.Null[string]()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *subscription
	for _, sub := range s.subs {
		if sub.conn.ID() != ctrl {
			continue
		}
		if best == nil || (sub.attached && !best.attached) || (sub.attached == best.attached && sub.seq < best.seq) {
			best = sub
		}
	}
	if best == nil {
		return protocol.Null[string]()
	}
	return protocol.Some(best.id)
}

// snapshot is the runtime snapshot with the transport's
// controller_subscription_id.
func (s *session) snapshot() protocol.Snapshot {
	return s.fill(s.rt.Snapshot())
}

func (s *session) fill(snap protocol.Snapshot) protocol.Snapshot {
	snap.State.ControllerSubscriptionID = s.controllerSubscription()
	return snap
}

// anonymous returns the connection of requests that name no connection
// or subscription: one controller per session, made on first use, that
// claims the lease with its first message (wire contract §8.5: the first
// controller that sends a message claims a free lease).
func (s *session) anonymous() (*runtime.Conn, *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctrl := s.rt.ControllerID(); ctrl != "" && (s.anon == nil || ctrl != s.anon.ID()) {
		return nil, &Error{Status: http.StatusConflict, Code: CodeControllerLeaseHeld, Message: msgLeaseHeldElsewhere}
	}
	if s.anon != nil && !s.anon.Closed() {
		return s.anon, nil
	}
	c, err := s.rt.Connect(runtime.ConnectOptions{Role: protocol.RoleController, Passive: true})
	if err != nil {
		return nil, asError(err, http.StatusForbidden)
	}
	s.anon = c
	return c, nil
}

func (s *session) isAnonymous(c *runtime.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.anon == c
}

// sweep expires explicit subscriptions nobody attached to for
// SubscriptionIdle, closes idle connections past their lease (the
// runtime's SweepConnections) and forgets what they held.
func (s *session) sweep(now time.Time) {
	var expired []*subscription
	s.mu.Lock()
	for _, sub := range s.subs {
		if sub.explicit && !sub.attached && now.Sub(sub.detachedAt) > s.h.cfg.SubscriptionIdle {
			expired = append(expired, sub)
		}
	}
	s.mu.Unlock()
	for _, sub := range expired {
		s.remove(sub, true)
	}
	if ids := s.rt.SweepConnections(); len(ids) > 0 {
		s.h.log.Debug("swept idle headless connections", "session", s.id, "connections", ids)
	}
	s.mu.Lock()
	for _, sub := range s.subs {
		if sub.conn.Closed() {
			s.dropLocked(sub)
		}
	}
	idle := len(s.subs) == 0 && s.h.cfg.SessionIdle > 0 && now.Sub(time.Unix(0, s.active.Load())) > s.h.cfg.SessionIdle
	s.mu.Unlock()
	if idle && !s.rt.Snapshot().State.IsResponding {
		s.h.log.Info("disposing idle headless session", "session", s.id)
		s.rt.SetCloseReason("idle_timeout")
		s.h.dispose(s)
	}
}

// Sweep runs the idle sweep once over every session (the background
// loop calls it every SweepInterval).
func (h *Handler) Sweep() {
	h.mu.Lock()
	all := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		all = append(all, s)
	}
	h.mu.Unlock()
	now := h.cfg.Now()
	for _, s := range all {
		s.sweep(now)
	}
}

func (h *Handler) sweepLoop() {
	defer h.swept.Done()
	t := time.NewTicker(h.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			h.Sweep()
		case <-h.stop:
			return
		}
	}
}
