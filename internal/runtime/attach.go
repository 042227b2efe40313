package runtime

import (
	"context"
	"slices"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Accessors the HTTP attach transport (internal/transport/httpattach) needs on
// top of Connect / Subscribe: looking connections up, the lease as seen
// by one connection, re-registering an existing connection, and waiting
// for frames without a goroutine per wait.

// Cursor returns the last assigned cursor: of the last published frame,
// log record or snapshot envelope.
func (r *Runtime) Cursor() int64 {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return r.cursorLocked()
}

// Restored reports whether the runtime continues a drained session
// (Config.Restored).
func (r *Runtime) Restored() bool { return r.cfg.Restored }

// PublishSnapshot publishes a snapshot envelope into the stream, as the
// reference server does after an interrupt (wire contract §8.9, §12): the
// envelope takes the next cursor, which is its snapshot's cursor, so it
// is strictly greater than every frame before it, and it is buffered in
// the ring like a message, so that a ?cursor= replay delivers it in
// order. With reason set it is reset{reason} instead (a restore). fill,
// when not nil, completes the snapshot (the transport's
// controller_subscription_id); it runs under the runtime's locks and
// must neither block nor call into the runtime. The envelope reaches
// subscriptions made with SubscribeOptions.Envelopes; the session log
// does not record it, so from then on cursors run ahead of the log's
// record numbers (except a restored runtime's reset, see Config.Restored).
// It returns the envelope's cursor (0 once the runtime is closed).
func (r *Runtime) PublishSnapshot(reason protocol.ResetReason, fill func(*protocol.Snapshot)) int64 {
	for {
		r.mu.Lock()
		r.logMu.Lock()
		unlock := func() {
			r.logMu.Unlock()
			r.mu.Unlock()
		}
		h := r.hub
		if h.Closed() {
			unlock()
			return 0
		}
		// A restored runtime's reset{restored_from_snapshot} carries the
		// restored cursor and takes none of its own (Config.Restored).
		own := !(r.cfg.Restored && reason == protocol.ResetRestoredFromSnapshot)
		snap := r.snapshotLocked()
		snap.Cursor = r.cursorLocked()
		if own {
			snap.Cursor++
		}
		if fill != nil {
			fill(&snap)
		}
		var env protocol.Message = protocol.SnapshotEnvelope{Snapshot: snap}
		if reason != "" {
			env = protocol.ResetEnvelope{Reason: reason, Snapshot: snap}
		}
		data, err := protocol.Marshal(env)
		if err != nil {
			unlock()
			r.cfg.Logger.Error("encode snapshot envelope", "err", err)
			return 0
		}
		if !h.MakeRoom(len(data)) {
			// A lossless reader holds the oldest frame: wait for it
			// without holding mu, then build the snapshot again.
			r.mu.Unlock()
			h.WaitSpace()
			r.logMu.Unlock()
			continue
		}
		if h.Closed() {
			unlock()
			return 0
		}
		switch {
		case !own:
		case r.cfg.Log != nil:
			r.unlogged++
		default:
			r.cursor++
		}
		cursor := r.cursorLocked()
		h.push(Frame{Cursor: cursor, Message: env, Data: data, Envelope: true})
		unlock()
		return cursor
	}
}

// settleLimit bounds how long HandleSettled waits for a prompt's run to
// publish its first message.
const settleLimit = 10 * time.Second

// HandleSettled handles m as Handle does (with context.WithoutCancel(ctx):
// a message once accepted is not undone by its client going away). For a
// message whose handling goes on in the background it then waits until
// the runtime has published something since the message was accepted: a
// prompt's first message (the fixture agent's "Prompt: …" status, the
// agent's response_start) unless its run ends first, a file read's or
// search's result — at most settleLimit, or until ctx ends. A snapshot
// taken afterwards shows the message handled, as the reference servers'
// /messages answers do (wire contract §11.4).
func (c *Conn) HandleSettled(ctx context.Context, m protocol.Message) error {
	r := c.r
	before := r.Cursor()
	if err := c.Handle(context.WithoutCancel(ctx), m); err != nil {
		return err
	}
	var ended <-chan struct{} // nil: only a published message ends the wait
	switch m.(type) {
	case protocol.Prompt:
		r.mu.Lock()
		run := r.run
		r.mu.Unlock()
		if run == nil {
			return nil
		}
		ended = run.done
	case protocol.UtilityFileRead, protocol.UtilityFileSearch:
	default:
		return nil
	}
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	for {
		r.logMu.Lock()
		moved := r.cursorLocked() > before || r.hub.Closed()
		wait := r.hub.Wait()
		r.logMu.Unlock()
		if moved {
			return nil
		}
		select {
		case <-wait:
		case <-ended:
			return nil
		case <-limit.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// Conn returns the open connection with this id.
func (r *Runtime) Conn(id string) (*Conn, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.conns[id]
	return c, ok
}

// ControllerID returns the id of the connection holding the controller
// lease, or "".
func (r *Runtime) ControllerID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.controller
}

// Role returns the connection's effective role (controller when not yet
// determined).
func (c *Conn) Role() protocol.Role {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.effectiveRole()
}

// Closed reports whether the connection was closed (disconnect, sweep,
// runtime closed).
func (c *Conn) Closed() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.closed
}

// Runtime returns the runtime the connection belongs to.
func (c *Conn) Runtime() *Runtime { return c.r }

// Lease is the controller lease as one connection sees it (the
// heartbeat snapshot of wire contract §11.4).
type Lease struct {
	// Granted: this connection holds the lease.
	Granted bool
	// ControllerID is the holder's id, or null.
	ControllerID protocol.Nullable[string]
	// ExpiresAt is this connection's lease_expires_at: last seen + 45 s
	// (null for the stdio connection).
	ExpiresAt protocol.Nullable[string]
}

// Lease returns the lease as c sees it.
func (c *Conn) Lease() Lease {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	return Lease{Granted: r.controller == c.id, ControllerID: r.controllerID(), ExpiresAt: r.leaseExpiry(c)}
}

// Claim gives an existing controller connection the lease when it is
// free or when take is set (takeControl); otherwise, while another
// connection holds it, it fails with ErrLeaseHeld. A viewer claims
// nothing. When the holder changes, connection_info is published.
func (c *Conn) Claim(take bool) error {
	r := c.r
	r.mu.Lock()
	if c.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	c.lastSeen = r.now()
	if c.effectiveRole() != protocol.RoleController || r.controller == c.id {
		r.mu.Unlock()
		return nil
	}
	if r.controller != "" && !take {
		r.mu.Unlock()
		return ErrLeaseHeld
	}
	r.controller = c.id
	info := r.connectionInfoLocked(c)
	r.mu.Unlock()
	r.publish(info, "")
	return nil
}

// Update replaces the metadata of an existing connection with the fields
// o sets (protocol version, client info, capabilities, opt-outs); ID,
// Role, TakeControl, Passive and Local are ignored. A viewer may not
// negotiate what ViewerDisallowed names.
func (c *Conn) Update(o ConnectOptions) error {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if o.Capabilities != nil && c.effectiveRole() == protocol.RoleViewer {
		if t := ViewerDisallowed(o.Capabilities, c.local); t != "" {
			return viewerRefusal(t)
		}
	}
	if o.ProtocolVersion != "" {
		c.protocolVersion = o.ProtocolVersion
	}
	if o.ClientInfo != nil {
		c.clientInfo = o.ClientInfo
	}
	if o.Capabilities == nil && o.OptOutNotifications == nil {
		return nil
	}
	p := *c.prefs.Load()
	if o.Capabilities != nil {
		c.caps = o.Capabilities
		p.rawEvents = o.Capabilities.RawAgentEvents != nil && *o.Capabilities.RawAgentEvents
	}
	if o.OptOutNotifications != nil {
		p.optOut = slices.Clone(o.OptOutNotifications)
	}
	c.prefs.Store(&p)
	return nil
}

// OptsOut reports whether the subscription opted out of n (its own list,
// else its connection's): how a transport filters the envelopes it makes
// itself, such as SSE heartbeats.
func (s *Subscription) OptsOut(n protocol.Notification) bool {
	r := s.r
	r.mu.Lock()
	optOut, has := s.optOut, s.hasOptOut
	r.mu.Unlock()
	if !has {
		optOut = s.conn.prefs.Load().optOut
	}
	return slices.Contains(optOut, n)
}

// Conn returns the subscription's connection.
func (s *Subscription) Conn() *Conn { return s.conn }

// Cursor is the heartbeat cursor of the subscription: the current cursor
// once it has read every frame, else the cursor of the last frame it read
// or skipped, so that a heartbeat never claims a cursor whose frame is
// still on its way to the reader.
func (s *Subscription) Cursor() int64 {
	r := s.r
	r.logMu.Lock()
	defer r.logMu.Unlock()
	if c, caughtUp := r.hub.Position(&s.rd); !caughtUp {
		return c
	}
	return r.cursorLocked()
}

// Wait returns a channel that is closed once TryNext may have something
// to return (a frame, the end of the runtime, a lag or the closing of
// the subscription); it is already closed when that is the case now. A
// transport that multiplexes frames with timers selects on it.
func (s *Subscription) Wait() <-chan struct{} {
	r := s.r
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return r.hub.Ready(&s.rd)
}
