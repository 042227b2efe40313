package httpattach

import (
	"bytes"
	"context"
	"net/http"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// routes registers the session routes of wire contract §11.1.
func (h *Handler) routes() *http.ServeMux {
	m := http.NewServeMux()
	for _, r := range h.routeTable() {
		m.HandleFunc(r.pattern, r.serve)
	}
	m.HandleFunc("/api/headless/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound(CodeNotFound, "No headless route "+r.Method+" "+r.URL.Path))
	})
	return m
}

type route struct {
	pattern string
	serve   http.HandlerFunc
}

func (h *Handler) routeTable() []route {
	return []route{
		{"POST /api/headless/sessions", h.create},
		{"GET /api/headless/sessions", h.list},
		{"POST /api/headless/connections", h.connections},
		{"GET /api/headless/sessions/{id}", h.state},
		{"GET /api/headless/sessions/{id}/state", h.state},
		{"POST /api/headless/sessions/{id}/subscribe", h.subscribe},
		{"POST /api/headless/sessions/{id}/unsubscribe", h.unsubscribe},
		{"GET /api/headless/sessions/{id}/events", h.events},
		{"POST /api/headless/sessions/{id}/messages", h.messages},
		{"POST /api/headless/sessions/{id}/message", h.messages},
		{"POST /api/headless/sessions/{id}/heartbeat", h.heartbeat},
		{"POST /api/headless/sessions/{id}/disconnect", h.disconnect},
		{"POST /api/headless/sessions/{id}/attachments", h.attachments},
	}
}

// Routes lists the patterns the Handler serves ("POST
// /api/headless/sessions/{id}/messages"), for an embedder's route list
// and API description; any other path under /api/headless/ is a JSON 404.
func (h *Handler) Routes() []string {
	var out []string
	for _, r := range h.routeTable() {
		out = append(out, r.pattern)
	}
	return out
}

// ready refuses new attach traffic while draining or not restored.
func (h *Handler) ready(w http.ResponseWriter) bool {
	if e := h.unready.Load(); e != nil {
		writeError(w, e)
		return false
	}
	return true
}

// heartbeatSnapshot is the heartbeat response (wire contract §11.4).
type heartbeatSnapshot struct {
	ConnectionID           string                    `json:"connection_id"`
	ControllerLeaseGranted bool                      `json:"controller_lease_granted"`
	ControllerConnectionID protocol.Nullable[string] `json:"controller_connection_id"`
	LeaseExpiresAt         protocol.Nullable[string] `json:"lease_expires_at"`
	HeartbeatIntervalMS    int64                     `json:"heartbeat_interval_ms"`
}

// connectionSnapshot is the /connections response: the heartbeat
// snapshot and the session's.
type connectionSnapshot struct {
	heartbeatSnapshot
	SessionID           string                  `json:"session_id"`
	Role                protocol.Role           `json:"role"`
	OptOutNotifications []protocol.Notification `json:"opt_out_notifications,omitempty"`
	Snapshot            protocol.Snapshot       `json:"snapshot"`
}

// subscriptionSnapshot is the /subscribe response.
type subscriptionSnapshot struct {
	ConnectionID             string                    `json:"connection_id"`
	SubscriptionID           string                    `json:"subscription_id"`
	OptOutNotifications      []protocol.Notification   `json:"opt_out_notifications,omitempty"`
	Role                     protocol.Role             `json:"role"`
	ControllerLeaseGranted   bool                      `json:"controller_lease_granted"`
	ControllerSubscriptionID protocol.Nullable[string] `json:"controller_subscription_id"`
	ControllerConnectionID   protocol.Nullable[string] `json:"controller_connection_id"`
	LeaseExpiresAt           protocol.Nullable[string] `json:"lease_expires_at"`
	HeartbeatIntervalMS      int64                     `json:"heartbeat_interval_ms"`
	Snapshot                 protocol.Snapshot         `json:"snapshot"`
}

// disconnectResult is the /disconnect response.
type disconnectResult struct {
	Success                     bool                      `json:"success"`
	ConnectionID                string                    `json:"connection_id"`
	ControllerConnectionID      protocol.Nullable[string] `json:"controller_connection_id"`
	DisconnectedSubscriptionIDs []string                  `json:"disconnected_subscription_ids"`
}

// messageAck is the /messages response: the reference server's
// {success:true} and the Rust runner's extended acknowledgement.
type messageAck struct {
	OK        bool   `json:"ok"`
	Success   bool   `json:"success"`
	Accepted  bool   `json:"accepted"`
	Cursor    int64  `json:"cursor"`
	Execution string `json:"execution"`
	// PublishedMessages counts the cursors taken while the message was
	// handled (a prompt's run goes on afterwards).
	PublishedMessages int64             `json:"published_messages"`
	Message           string            `json:"message"`
	Snapshot          protocol.Snapshot `json:"snapshot"`
}

func (h *Handler) heartbeatOf(c *runtime.Conn) heartbeatSnapshot {
	l := c.Lease()
	return heartbeatSnapshot{
		ConnectionID:           c.ID(),
		ControllerLeaseGranted: l.Granted,
		ControllerConnectionID: l.ControllerID,
		LeaseExpiresAt:         l.ExpiresAt,
		HeartbeatIntervalMS:    h.HeartbeatIntervalMS(),
	}
}

// create serves POST /api/headless/sessions: create a runtime, or attach
// to the one a sessionId names; the answer is its snapshot.
func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	s, _, e := h.open(w, r, createFields)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, s.snapshot())
}

// open reads a create or register body with the allowed fields, checks
// its capabilities and returns the session it names, or a new one from
// Sessions.Create. Like ready, it refuses while draining or not restored.
func (h *Handler) open(w http.ResponseWriter, r *http.Request, allowed []string) (*session, attachBody, *Error) {
	if e := h.unready.Load(); e != nil {
		return nil, attachBody{}, e
	}
	b, e := readBody(w, r, allowed, false)
	if e != nil {
		return nil, b, e
	}
	req := h.createRequest(r, &b)
	if e := checkCapabilities(req.Role, req.Capabilities, req.EnableClientTools); e != nil {
		return nil, b, e
	}
	s, e := h.openSession(r.Context(), req)
	return s, b, e
}

// openSession returns the session req names, or a new one from
// Sessions.Create.
func (h *Handler) openSession(ctx context.Context, req CreateRequest) (*session, *Error) {
	if req.SessionID != "" {
		rt, ok := h.cfg.Sessions.Get(req.SessionID)
		if !ok || rt == nil {
			return nil, h.missing(req.SessionID, msgCreateSessionNotFound)
		}
		return h.bind(req.SessionID, rt), nil
	}
	rt, id, err := h.cfg.Sessions.Create(ctx, req)
	if err != nil {
		return nil, asError(err, http.StatusInternalServerError)
	}
	return h.bind(id, rt), nil
}

// connections serves POST /api/headless/connections: register a
// connection (or refresh an existing one) as controller or viewer.
func (h *Handler) connections(w http.ResponseWriter, r *http.Request) {
	s, b, e := h.open(w, r, connectionFields)
	if e != nil {
		writeError(w, e)
		return
	}
	c, e := s.connection(r, &b, b.role(r), false)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, connectionSnapshot{
		heartbeatSnapshot:   h.heartbeatOf(c),
		SessionID:           s.id,
		Role:                c.Role(),
		OptOutNotifications: b.OptOutNotifications,
		Snapshot:            s.snapshot(),
	})
}

// connection registers or refreshes the connection of a /connections or
// /subscribe body. An explicit controller takes the lease when it is
// free or with takeControl; otherwise 409.
func (s *session) connection(r *http.Request, b *attachBody, role protocol.Role, reuse bool) (*runtime.Conn, *Error) {
	take := b.TakeControl != nil && *b.TakeControl
	opts := runtime.ConnectOptions{
		Role:                role,
		ProtocolVersion:     str(b.ProtocolVersion),
		ClientInfo:          b.ClientInfo,
		Capabilities:        b.capabilities(),
		OptOutNotifications: b.OptOutNotifications,
		TakeControl:         take,
	}
	id := str(b.ConnectionID)
	if id == "" && role == protocol.RoleController && reuse {
		// A controller subscribing without a connection reuses the lease
		// holder's when it has no subscriptions (wire contract §11.2).
		if ctrl := s.rt.ControllerID(); ctrl != "" {
			if c, ok := s.rt.Conn(ctrl); ok && len(s.connSubs(c)) == 0 && !s.isAnonymous(c) {
				id = ctrl
			}
		}
	}
	if id == "" {
		c, err := s.rt.Connect(opts)
		if err != nil {
			return nil, asError(err, http.StatusForbidden)
		}
		return c, nil
	}
	c, ok := s.rt.Conn(id)
	if !ok {
		return nil, notFound(CodeStaleConnection, msgConnectionNotFound)
	}
	explicitRole := b.Role != nil || header(r, roleHeaders) != ""
	if explicitRole && c.Role() != role {
		return nil, badRequest(msgRoleMismatch)
	}
	if err := c.Update(opts); err != nil {
		return nil, asError(err, http.StatusBadRequest)
	}
	if err := c.Claim(take); err != nil {
		return nil, asError(err, http.StatusConflict)
	}
	return c, nil
}

// state serves GET /api/headless/sessions/{id}[/state].
func (h *Handler) state(w http.ResponseWriter, r *http.Request) {
	s, ok := h.pathSession(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.snapshot())
}

// subscribe serves POST …/subscribe: an explicit subscription whose
// frames queue from now on until an event stream attaches.
func (h *Handler) subscribe(w http.ResponseWriter, r *http.Request) {
	if !h.ready(w) {
		return
	}
	s, b, e := h.lookupBody(w, r, subscribeFields, false)
	if e != nil {
		writeError(w, e)
		return
	}
	role := b.role(r)
	if b.Role == nil && header(r, roleHeaders) == "" && str(b.ConnectionID) != "" {
		if c, ok := s.rt.Conn(str(b.ConnectionID)); ok {
			role = c.Role()
		}
	}
	caps := b.capabilities()
	if e := checkCapabilities(role, caps, false); e != nil {
		writeError(w, e)
		return
	}
	existing := str(b.ConnectionID) != ""
	c, e := s.connection(r, &b, role, true)
	if e != nil {
		writeError(w, e)
		return
	}
	rs, err := c.Subscribe(runtime.SubscribeOptions{
		From: runtime.FromNow, MaxBacklog: h.cfg.MaxBacklog, OptOut: b.OptOutNotifications, Detached: true, Envelopes: true,
	})
	if err != nil {
		if !existing {
			c.Close()
		}
		writeError(w, asError(err, http.StatusServiceUnavailable))
		return
	}
	sub := &subscription{id: protocol.NewID("sub", 8, h.cfg.Now()), conn: c, sub: rs, role: c.Role(), explicit: true, optOut: b.OptOutNotifications}
	s.add(sub)
	snap := s.fill(rs.Resync())
	l := c.Lease()
	writeJSON(w, http.StatusOK, subscriptionSnapshot{
		ConnectionID:             c.ID(),
		SubscriptionID:           sub.id,
		OptOutNotifications:      b.OptOutNotifications,
		Role:                     sub.role,
		ControllerLeaseGranted:   l.Granted,
		ControllerSubscriptionID: s.controllerSubscription(),
		ControllerConnectionID:   l.ControllerID,
		LeaseExpiresAt:           l.ExpiresAt,
		HeartbeatIntervalMS:      h.HeartbeatIntervalMS(),
		Snapshot:                 snap,
	})
}

// unsubscribe serves POST …/unsubscribe {subscriptionId}.
func (h *Handler) unsubscribe(w http.ResponseWriter, r *http.Request) {
	s, b, e := h.lookupBody(w, r, unsubscribeFields, true)
	if e != nil {
		writeError(w, e)
		return
	}
	if str(b.SubscriptionID) == "" {
		// Not a 404 "subscriber not found": no subscriber was named.
		writeError(w, badRequest("subscriptionId is required"))
		return
	}
	sub, ok := s.get(str(b.SubscriptionID))
	if !ok {
		writeError(w, notFound(CodeNotFound, msgSubscriberNotFound))
		return
	}
	s.remove(sub, true)
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}

// lookupBody returns the session the path's {id} names and the request
// body, read with the allowed fields.
func (h *Handler) lookupBody(w http.ResponseWriter, r *http.Request, allowed []string, required bool) (*session, attachBody, *Error) {
	s, e := h.lookup(r.PathValue("id"))
	if e != nil {
		return nil, attachBody{}, e
	}
	b, e := readBody(w, r, allowed, required)
	return s, b, e
}

// target resolves the session and connection (and subscription) of a
// heartbeat or disconnect: from the body, else the headers.
func (h *Handler) target(w http.ResponseWriter, r *http.Request) (*session, *runtime.Conn, *subscription, *Error) {
	s, b, e := h.lookupBody(w, r, targetFields, false)
	if e != nil {
		return nil, nil, nil, e
	}
	subID := str(b.SubscriptionID)
	if subID == "" {
		subID = header(r, subscriptionHeaders)
	}
	connID := str(b.ConnectionID)
	if connID == "" {
		connID = header(r, connectionHeaders)
	}
	if subID != "" {
		sub, ok := s.get(subID)
		if !ok {
			return nil, nil, nil, notFound(CodeNotFound, msgSubscriberNotFound)
		}
		return s, sub.conn, sub, nil
	}
	c, ok := s.rt.Conn(connID)
	if connID == "" || !ok {
		return nil, nil, nil, notFound(CodeStaleConnection, msgConnectionNotFound)
	}
	return s, c, nil, nil
}

// heartbeat serves POST …/heartbeat: it extends the connection's lease.
func (h *Handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	s, c, sub, e := h.target(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	c.Touch()
	if sub != nil {
		s.touch(sub)
	}
	writeJSON(w, http.StatusOK, h.heartbeatOf(c))
}

// touch refreshes a detached explicit subscription's idle clock.
func (s *session) touch(sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sub.attached {
		sub.detachedAt = s.h.cfg.Now()
	}
}

// disconnect serves POST …/disconnect: the connection's subscriptions end
// and its lease and utilities are released; the runtime lives on.
func (h *Handler) disconnect(w http.ResponseWriter, r *http.Request) {
	s, c, _, e := h.target(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	ids := []string{}
	for _, sub := range s.connSubs(c) {
		ids = append(ids, sub.id)
		s.remove(sub, false)
	}
	c.Close()
	writeJSON(w, http.StatusOK, disconnectResult{
		Success:                     true,
		ConnectionID:                c.ID(),
		ControllerConnectionID:      nullable(s.rt.ControllerID()),
		DisconnectedSubscriptionIDs: ids,
	})
}

func nullable(id string) protocol.Nullable[string] {
	if id == "" {
		return protocol.Null[string]()
	}
	return protocol.Some(id)
}

// messages serves POST …/messages and …/message: one client → server
// protocol message (snake_case), from the connection the subscriber or
// connection headers name.
func (h *Handler) messages(w http.ResponseWriter, r *http.Request) {
	s, ok := h.readySession(w, r)
	if !ok {
		return
	}
	if e := httpedge.RequireJSON(r); e != nil {
		writeError(w, e)
		return
	}
	data, ok := readLimited(w, r, MaxMessageBytes, "Request body exceeds 1 MB", "request body")
	if !ok {
		return
	}
	if len(bytes.TrimSpace(data)) == 0 {
		writeError(w, badRequest(msgBodyRequired))
		return
	}
	m, err := protocol.DecodeClient(data)
	if err != nil {
		writeError(w, badRequest("%s", protocol.ProtocolError(err).Message))
		return
	}
	_, isHello := m.(protocol.Hello)
	c, e := s.sender(r, isHello)
	if e != nil {
		writeError(w, e)
		return
	}
	before := s.rt.Cursor()
	// The answer's snapshot is taken once the message is handled: for a
	// prompt, once its run has published its first message.
	if err := c.HandleSettled(r.Context(), m); err != nil {
		writeError(w, asError(err, http.StatusForbidden))
		return
	}
	switch m.(type) {
	case protocol.Interrupt, protocol.Cancel:
		// Wire contract §8.9 step 4: after what the interrupt published, a
		// snapshot envelope with a cursor of its own.
		s.publishSnapshot("")
	}
	snap := s.snapshot()
	writeJSON(w, http.StatusOK, messageAck{
		OK: true, Success: true, Accepted: true, Cursor: snap.Cursor, Execution: "runtime_handled",
		PublishedMessages: max(0, snap.Cursor-before), Message: "Maestro headless runtime accepted the " + m.MessageType() + " message",
		Snapshot: snap,
	})
}

// sender resolves the connection a message comes from: the subscriber
// header's, else the connection header's, else the anonymous one. Only a
// hello may come from a viewer (named by the role header or by its
// subscription).
func (s *session) sender(r *http.Request, isHello bool) (*runtime.Conn, *Error) {
	viewerRefused := &Error{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: msgViewerCannotSend}
	if !isHello && headerRole(r) == protocol.RoleViewer {
		return nil, viewerRefused
	}
	if id := header(r, subscriptionHeaders); id != "" {
		sub, ok := s.get(id)
		if !ok {
			return nil, notFound(CodeNotFound, msgSubscriberNotFound)
		}
		if sub.role != protocol.RoleController && !isHello {
			return nil, viewerRefused
		}
		s.touch(sub)
		return sub.conn, nil
	}
	if id := header(r, connectionHeaders); id != "" {
		c, ok := s.rt.Conn(id)
		if !ok {
			return nil, notFound(CodeStaleConnection, msgConnectionNotFound)
		}
		return c, nil
	}
	return s.anonymous()
}
