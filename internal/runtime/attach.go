package runtime

import (
	"slices"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Accessors the HTTP attach transport (internal/transport/http) needs on
// top of Connect / Subscribe: looking connections up, the lease as seen
// by one connection, re-registering an existing connection, and waiting
// for frames without a goroutine per wait.

// Cursor returns the cursor of the last published frame (a heartbeat
// envelope's cursor).
func (r *Runtime) Cursor() int64 {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	if r.cfg.Log != nil {
		return r.cfg.Log.Cursor()
	}
	return r.cursor
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
// heartbeat snapshot of contract §11.4).
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
// negotiate mcp_elicitation, user_input or tool_retry.
func (c *Conn) Update(o ConnectOptions) error {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if o.Capabilities != nil && c.effectiveRole() == protocol.RoleViewer {
		if t := viewerDisallowed(o.Capabilities); t != "" {
			return refuse(CodeBadRequest, protocol.ErrorProtocol, "viewer headless connections cannot negotiate "+string(t)+" requests")
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

// closedChan is returned by Wait when there is no need to wait.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Wait returns a channel that is closed once TryNext may have something
// to return (a frame, the end of the runtime, a lag or the closing of
// the subscription); it is already closed when that is the case now. A
// transport that multiplexes frames with timers selects on it.
func (s *Subscription) Wait() <-chan struct{} {
	r := s.r
	r.logMu.Lock()
	defer r.logMu.Unlock()
	h := &r.hub
	if s.closed || h.closed || s.next != h.end() {
		return closedChan
	}
	return h.wait()
}
