package runtime

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// LocalConnectionID is the id of the stdio connection.
const LocalConnectionID = "local"

// LeaseTTL is how long a controller lease lasts after the connection was
// last seen: three heartbeat intervals (wire contract §8.5).
const LeaseTTL = 45 * time.Second

// ConnectOptions describe a connection. Over HTTP they come from the
// registration body; over stdio only ID and Local are set and hello
// supplies the rest.
type ConnectOptions struct {
	// ID is the connection id; empty generates conn_<ms>_<8 base36>.
	ID string
	// Role is viewer or controller. Empty leaves it undetermined until
	// hello (stdio); an undetermined role acts as controller.
	Role                protocol.Role
	ProtocolVersion     string
	ClientInfo          *protocol.ClientInfo
	Capabilities        *protocol.Capabilities
	OptOutNotifications []protocol.Notification
	// TakeControl moves the controller lease to this connection.
	TakeControl bool
	// Passive registers a controller without claiming the lease (an
	// implicit HTTP event stream); it claims a free lease with its first
	// message. A passive connection's arrival and departure publish no
	// connection_info.
	Passive bool
	// Local marks the stdio connection: its lease never expires
	// (lease_expires_at is null) and registering it publishes nothing.
	Local bool
}

// Conn is one client connection to the runtime. Handle its messages with
// Handle and read its frames through a Subscription.
type Conn struct {
	r               *Runtime
	id              string
	local           bool
	passive         bool
	role            protocol.Role // "" until hello on stdio
	helloSeen       bool
	protocolVersion string
	clientInfo      *protocol.ClientInfo
	caps            *protocol.Capabilities
	prefs           atomic.Pointer[connPrefs]
	subs            []*Subscription
	lastSeen        time.Time
	closed          bool
}

// connPrefs are what subscriptions read on every frame, replaced as a whole.
type connPrefs struct {
	optOut    []protocol.Notification
	rawEvents bool
}

// ID returns the connection id.
func (c *Conn) ID() string { return c.id }

// effectiveRole is the role, controller when undetermined.
func (c *Conn) effectiveRole() protocol.Role {
	if c.role == "" {
		return protocol.RoleController
	}
	return c.role
}

func (c *Conn) optOutList() []protocol.Notification {
	if p := c.prefs.Load(); p != nil && p.optOut != nil {
		return p.optOut
	}
	return nil
}

// negotiated reports whether the connection negotiated a server request type.
func (c *Conn) negotiated(t protocol.RequestType) bool {
	return c.caps != nil && slices.Contains(c.caps.ServerRequests, t)
}

// hasOp reports whether the connection negotiated a utility operation.
func (c *Conn) hasOp(op protocol.UtilityOperation) bool {
	return c.caps != nil && slices.Contains(c.caps.UtilityOperations, op)
}

// ViewerDisallowed returns the first server request type a viewer may not
// negotiate, or "" (wire contract §8.5): mcp_elicitation and user_input on
// every transport, and tool_retry only on stdio (local); over HTTP a viewer
// may list tool_retry.
func ViewerDisallowed(caps *protocol.Capabilities, local bool) protocol.RequestType {
	if caps == nil {
		return ""
	}
	for _, t := range caps.ServerRequests {
		switch t {
		case protocol.RequestMCPElicitation, protocol.RequestUserInput:
			return t
		case protocol.RequestToolRetry:
			if local {
				return t
			}
		}
	}
	return ""
}

// viewerRefusal is the refusal of a viewer that negotiates t.
func viewerRefusal(t protocol.RequestType) *Error {
	return refuse(CodeBadRequest, protocol.ErrorProtocol, fmt.Sprintf("viewer headless connections cannot negotiate %s requests", t))
}

// Connect registers a connection. A controller takes the lease when it is
// free or with TakeControl; otherwise Connect fails with ErrLeaseHeld.
func (r *Runtime) Connect(o ConnectOptions) (*Conn, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	id := o.ID
	if id == "" {
		id = newConnID(r.now())
	}
	if _, dup := r.conns[id]; dup {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrDuplicateConnection, id)
	}
	c := &Conn{r: r, id: id, local: o.Local, passive: o.Passive, role: o.Role, protocolVersion: o.ProtocolVersion,
		clientInfo: o.ClientInfo, caps: o.Capabilities, lastSeen: r.now()}
	if !o.Local && c.role == "" {
		c.role = protocol.RoleController
	}
	if c.role == protocol.RoleViewer {
		if t := ViewerDisallowed(o.Capabilities, o.Local); t != "" {
			r.mu.Unlock()
			return nil, viewerRefusal(t)
		}
	}
	if c.role == protocol.RoleController && !o.Passive {
		switch {
		case r.controller == "" || o.TakeControl:
			r.controller = id
		default:
			r.mu.Unlock()
			return nil, ErrLeaseHeld
		}
	}
	p := &connPrefs{optOut: slices.Clone(o.OptOutNotifications)}
	if o.Capabilities != nil && o.Capabilities.RawAgentEvents != nil {
		p.rawEvents = *o.Capabilities.RawAgentEvents
	}
	c.prefs.Store(p)
	r.conns[id] = c
	r.connOrder = append(r.connOrder, c)
	var info protocol.ConnectionInfo
	quiet := o.Local || o.Passive
	if !quiet {
		info = r.connectionInfoLocked(c)
	}
	r.mu.Unlock()
	if !quiet {
		r.publish(info, "")
	}
	return c, nil
}

// Close disconnects the connection: its subscriptions end, it releases the
// controller lease, and its utility commands and watches stop.
func (c *Conn) Close() {
	r := c.r
	r.mu.Lock()
	if c.closed {
		r.mu.Unlock()
		return
	}
	subs := slices.Clone(c.subs)
	r.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
	r.mu.Lock()
	c.closed = true
	delete(r.conns, c.id)
	r.connOrder = slices.DeleteFunc(r.connOrder, func(x *Conn) bool { return x == c })
	held := r.controller == c.id
	if held {
		r.controller = ""
	}
	util := r.util
	// A passive connection leaves quietly unless it held the lease.
	local := c.local || (c.passive && !held)
	var info protocol.ConnectionInfo
	if !local {
		info = r.connectionInfoLocked(c)
	}
	r.mu.Unlock()
	if util != nil {
		util.CloseOwner(c.id, reasonOwnerClosed)
	}
	if !local {
		r.publish(info, "")
	}
}

// Touch records that the client was seen (HTTP heartbeat), extending its
// controller lease.
func (c *Conn) Touch() {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.lastSeen = c.r.now()
}

// SweepConnections closes every non-local connection that has no attached
// subscription and was last seen more than LeaseTTL ago, releasing its
// lease and its utilities (the HTTP transport calls it periodically). It
// returns the ids closed.
func (r *Runtime) SweepConnections() []string {
	r.mu.Lock()
	now := r.now()
	var stale []*Conn
	for _, c := range r.connOrder {
		if c.local || now.Sub(c.lastSeen) <= LeaseTTL {
			continue
		}
		attached := false
		for _, s := range c.subs {
			attached = attached || s.attached
		}
		if !attached {
			stale = append(stale, c)
		}
	}
	r.mu.Unlock()
	ids := make([]string, 0, len(stale))
	for _, c := range stale {
		c.Close()
		ids = append(ids, c.id)
	}
	return ids
}

// leaseExpiry is lease_expires_at for c: null on stdio.
func (r *Runtime) leaseExpiry(c *Conn) protocol.Nullable[string] {
	if c.local {
		return protocol.Null[string]()
	}
	return protocol.Some(c.lastSeen.Add(LeaseTTL).UTC().Format("2006-01-02T15:04:05.000Z"))
}

func (r *Runtime) controllerID() protocol.Nullable[string] {
	if r.controller == "" {
		return protocol.Null[string]()
	}
	return protocol.Some(r.controller)
}

// connectionStateLocked describes c; the caller holds mu.
func (r *Runtime) connectionStateLocked(c *Conn) protocol.ConnectionState {
	attached := 0
	for _, s := range c.subs {
		if s.attached {
			attached++
		}
	}
	return protocol.ConnectionState{
		ConnectionID:              c.id,
		Role:                      c.effectiveRole(),
		ClientProtocolVersion:     c.protocolVersion,
		ClientInfo:                c.clientInfo,
		Capabilities:              c.caps,
		OptOutNotifications:       c.optOutList(),
		SubscriptionCount:         len(c.subs),
		AttachedSubscriptionCount: attached,
		ControllerLeaseGranted:    r.controller == c.id,
		LeaseExpiresAt:            r.leaseExpiry(c),
	}
}

// connectionInfoLocked builds connection_info for c and the whole graph.
func (r *Runtime) connectionInfoLocked(c *Conn) protocol.ConnectionInfo {
	n := len(r.connOrder)
	conns := make([]protocol.ConnectionState, 0, n)
	for _, x := range r.connOrder {
		conns = append(conns, r.connectionStateLocked(x))
	}
	return protocol.ConnectionInfo{
		ConnectionID:           c.id,
		ClientProtocolVersion:  c.protocolVersion,
		ClientInfo:             c.clientInfo,
		Capabilities:           c.caps,
		OptOutNotifications:    c.optOutList(),
		Role:                   c.effectiveRole(),
		ConnectionCount:        &n,
		ControllerConnectionID: r.controllerID(),
		LeaseExpiresAt:         r.leaseExpiry(c),
		Connections:            conns,
	}
}

// hello handles the handshake (wire contract §8.1): hello_ok to this
// connection only (never filtered), then connection_info, then a status
// when the client speaks another protocol version.
func (c *Conn) hello(m protocol.Hello) error {
	r := c.r
	r.mu.Lock()
	role := m.Role
	if role == "" {
		role = c.role
	}
	if role == "" {
		role = protocol.RoleController
	}
	if role == protocol.RoleViewer {
		if t := ViewerDisallowed(m.Capabilities, c.local); t != "" {
			r.mu.Unlock()
			return viewerRefusal(t)
		}
	}
	c.helloSeen = true
	c.role = role
	c.protocolVersion = m.ProtocolVersion
	c.clientInfo = m.ClientInfo
	c.caps = m.Capabilities
	p := &connPrefs{optOut: slices.Clone(m.OptOutNotifications)}
	if p.optOut == nil {
		p.optOut = []protocol.Notification{}
	}
	if m.Capabilities != nil && m.Capabilities.RawAgentEvents != nil {
		p.rawEvents = *m.Capabilities.RawAgentEvents
	}
	c.prefs.Store(p)
	switch {
	case role == protocol.RoleController && r.controller == "":
		r.controller = c.id
	case role == protocol.RoleViewer && r.controller == c.id:
		r.controller = ""
	}
	ok := protocol.HelloOK{
		ProtocolVersion:        protocol.Version,
		ConnectionID:           c.id,
		ClientProtocolVersion:  m.ProtocolVersion,
		ClientInfo:             m.ClientInfo,
		Capabilities:           m.Capabilities,
		OptOutNotifications:    m.OptOutNotifications,
		Role:                   role,
		ControllerConnectionID: r.controllerID(),
		LeaseExpiresAt:         r.leaseExpiry(c),
		ServerCapabilities:     r.serverCapabilities(),
	}
	info := r.connectionInfoLocked(c)
	r.mu.Unlock()

	r.publish(ok, c.id)
	r.publish(info, "")
	if m.ProtocolVersion != "" && m.ProtocolVersion != protocol.Version {
		r.publish(protocol.Status{Message: fmt.Sprintf("Client protocol %s attached to server %s", m.ProtocolVersion, protocol.Version)}, "")
	}
	return nil
}

// serverCapabilities is what this runtime can do (hello_ok, a
// later-version field). mcp_elicitation is advertised when the session
// has MCP servers (Config.MCPElicitation).
func (r *Runtime) serverCapabilities() *protocol.ServerCapabilities {
	reqs := []protocol.RequestType{protocol.RequestApproval}
	if len(r.cfg.ClientTools) > 0 {
		reqs = append(reqs, protocol.RequestClientTool)
	}
	if r.cfg.MCPElicitation {
		reqs = append(reqs, protocol.RequestMCPElicitation)
	}
	reqs = append(reqs, protocol.RequestUserInput, protocol.RequestToolRetry)
	ops := []protocol.UtilityOperation{}
	if r.util != nil {
		ops = append(ops, protocol.OpCommandExec, protocol.OpFileSearch, protocol.OpFileWatch, protocol.OpFileRead)
	}
	return &protocol.ServerCapabilities{
		ServerRequests:    reqs,
		UtilityOperations: ops,
		RawAgentEvents:    true,
		ConnectionRoles:   []protocol.Role{protocol.RoleController, protocol.RoleViewer},
	}
}

// admit applies the role and lease rules (wire contract §8.5) to a message
// before it is handled.
func (c *Conn) admit(m protocol.Message) error {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.lastSeen = r.now()
	if h, ok := m.(protocol.Hello); ok {
		if c.helloSeen && h.Role != "" && h.Role != c.role {
			return refuse(CodeBadRequest, protocol.ErrorProtocol, msgRoleCannotChange)
		}
		return nil
	}
	if c.effectiveRole() == protocol.RoleViewer {
		return refuse(CodeForbidden, protocol.ErrorProtocol, msgViewerCannotSend)
	}
	switch r.controller {
	case c.id:
	case "":
		r.controller = c.id
	default:
		return refuse(CodeConflict, protocol.ErrorProtocol, msgLeaseHeldElsewhere)
	}
	return nil
}

// newConnID returns an id like conn_<epochms>_<8 base36>.
func newConnID(now time.Time) string { return protocol.NewID("conn", 8, now) }
