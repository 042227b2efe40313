package sessionowner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// API is the session API a Router fronts (an *httpattach.Handler).
type API interface {
	http.Handler
	Routes() []string
	Authorized(r *http.Request) bool
	// Snapshots returns the runtime snapshots of this process's live
	// sessions (the listing adds them to the sessions it owns).
	Snapshots() []protocol.Snapshot
}

// ListRoute lists the live sessions of every serve sharing the store.
const ListRoute = "GET /api/headless/sessions"

const (
	sessionsPath    = "/api/headless/sessions"
	connectionsPath = "/api/headless/connections"
	errorDomain     = "maestro.serve"
)

// Router serves the attach API of one serve among several: requests for
// its own sessions (and new sessions) go to the API, requests for a
// session another serve owns are proxied to it or refused with 409, and
// requests for a session whose owner died say it ended.
type Router struct {
	c    *Cluster
	next API
}

// Handler returns next behind c's routing.
func (c *Cluster) Handler(next API) *Router { return &Router{c: c, next: next} }

// Routes lists the API's routes and the listing.
func (rt *Router) Routes() []string { return append([]string{ListRoute}, rt.next.Routes()...) }

// ServeHTTP implements http.Handler.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == sessionsPath {
		rt.list(w, r)
		return
	}
	id, e := sessionOf(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	if id == "" {
		rt.next.ServeHTTP(w, r)
		return
	}
	if _, local := rt.c.Get(id); local {
		rt.next.ServeHTTP(w, r)
		return
	}
	owner, e := rt.c.owner(r.Context(), id)
	switch {
	case e != nil:
		writeError(w, e)
	case owner == nil:
		// Unknown here and in the store (or ours): the API's own answer.
		rt.next.ServeHTTP(w, r)
	case !rt.c.cfg.Proxy || r.Header.Get(ProxiedHeader) != "":
		writeError(w, ownedElsewhere(*owner))
	default:
		rt.c.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, *owner)))
	}
}

// owner returns the live record of a session another serve owns: nil
// when the store does not know the session, it is this process's, or a
// client shut it down; an error (410) when its owner died (marked ended
// now) or stopped.
func (c *Cluster) owner(ctx context.Context, id string) (*store.LiveSession, *httpattach.Error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	s, err := c.cfg.Store.GetLiveSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, c.storeUnavailable("look up the session's owner", err, "session", id)
	}
	if c.stale(s) {
		if _, err := c.sweep(ctx); err != nil {
			return nil, c.storeUnavailable("look up the session's owner", err, "session", id)
		}
		if s, err = c.cfg.Store.GetLiveSession(ctx, id); err != nil {
			return nil, c.storeUnavailable("look up the session's owner", err, "session", id)
		}
	}
	if s.Ended() {
		if s.EndReason == ReasonShutDown {
			// Shut down by a client: the API's 404, as on the owner
			// (wire contract §11.5).
			return nil, nil
		}
		return nil, sessionEnded(s)
	}
	if s.Instance == c.cfg.Instance {
		return nil, nil
	}
	return &s, nil
}

// storeUnavailable is the 503 of a store call (what) that failed: the
// error is logged, and the client told the store does not answer, not
// the database's address, user and driver's text.
func (c *Cluster) storeUnavailable(what string, err error, attrs ...any) *httpattach.Error {
	c.log.Warn("cannot "+what, append(attrs, "err", err)...)
	return &httpattach.Error{Status: http.StatusServiceUnavailable, Code: httpattach.CodeRuntimeNotReady,
		Message: "Cannot " + what + ": the store does not answer (see the server log); try again"}
}

func ownerInfo(reason string, s store.LiveSession, extra ...string) []httpattach.ErrorInfo {
	md := map[string]string{"session_id": s.ID, "owner_instance_id": s.Instance, "owner_address": s.Address}
	for i := 0; i+1 < len(extra); i += 2 {
		md[extra[i]] = extra[i+1]
	}
	return []httpattach.ErrorInfo{{Type: httpattach.ErrorInfoType, Reason: reason, Domain: errorDomain, Metadata: md}}
}

// ownedElsewhere is the 409 of a session another serve owns when this
// one does not proxy.
func ownedElsewhere(s store.LiveSession) *httpattach.Error {
	return &httpattach.Error{Status: http.StatusConflict, Code: httpattach.CodeRuntimeOwnedElsewhere,
		Message: fmt.Sprintf("Headless session %s is owned by another serve process: %s", s.ID, s.Address),
		Details: ownerInfo(httpattach.CodeRuntimeOwnedElsewhere, s)}
}

// sessionEnded is the 410 of a session that ended.
func sessionEnded(s store.LiveSession) *httpattach.Error {
	return &httpattach.Error{Status: http.StatusGone, Code: httpattach.CodeStaleSession,
		Message: fmt.Sprintf("Headless session %s ended at %s: %s (owner %s at %s)", s.ID,
			s.EndedAt.UTC().Format(time.RFC3339), s.EndReason, s.Instance, s.Address),
		Details: ownerInfo(httpattach.CodeStaleSession, s, "end_reason", s.EndReason, "ended_at", s.EndedAt.UTC().Format(time.RFC3339Nano))}
}

// sessionOf returns the session id a request names: in its path, or in
// the sessionId of a create or connections body (read and put back).
func sessionOf(w http.ResponseWriter, r *http.Request) (string, *httpattach.Error) {
	if rest, ok := strings.CutPrefix(r.URL.Path, sessionsPath+"/"); ok {
		id, _, _ := strings.Cut(rest, "/")
		return id, nil
	}
	if r.Method != http.MethodPost || (r.URL.Path != sessionsPath && r.URL.Path != connectionsPath) || r.Body == nil {
		return "", nil
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpattach.MaxMessageBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return "", &httpattach.Error{Status: http.StatusRequestEntityTooLarge, Code: httpattach.CodeBadRequest, Message: "Request body exceeds 1 MB"}
		}
		return "", &httpattach.Error{Status: http.StatusBadRequest, Code: httpattach.CodeBadRequest, Message: "Failed to read request body: " + err.Error()}
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	var b struct {
		SessionID any `json:"sessionId"`
	}
	if json.Unmarshal(data, &b) != nil {
		return "", nil // the API reports the malformed body
	}
	id, _ := b.SessionID.(string)
	return id, nil
}

// list serves GET /api/headless/sessions: every session in the store,
// newest first, with its owner and whether this process owns it.
func (rt *Router) list(w http.ResponseWriter, r *http.Request) {
	if !rt.next.Authorized(r) {
		rt.next.ServeHTTP(w, r) // the API's 401
		return
	}
	state := r.URL.Query().Get("state")
	if state != "" && state != "live" {
		// ?state=bogus listed every session, as if no state was asked.
		writeError(w, &httpattach.Error{Status: http.StatusBadRequest, Code: httpattach.CodeBadRequest,
			Message: fmt.Sprintf("query.state must be live (the open sessions) or left out (every session), got %q", state)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	if _, err := rt.c.sweep(ctx); err != nil {
		writeError(w, rt.c.storeUnavailable("list the live sessions", err))
		return
	}
	f := store.LiveSessionFilter{Open: state == "live"}
	all, err := rt.c.cfg.Store.ListLiveSessions(ctx, f)
	if err != nil {
		writeError(w, rt.c.storeUnavailable("list the live sessions", err))
		return
	}
	local := map[string]*protocol.Snapshot{}
	for _, snap := range rt.next.Snapshots() {
		local[snap.SessionID] = &snap
	}
	out := SessionList{Instance: rt.c.cfg.Instance, Sessions: make([]ListedSession, 0, len(all))}
	for _, s := range all {
		l := ListedSession{LiveSession: s, Local: s.Instance == rt.c.cfg.Instance && !s.Ended()}
		if l.Local {
			l.Snapshot = local[s.ID]
		}
		out.Sessions = append(out.Sessions, l)
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
}

// SessionList is the answer of GET /api/headless/sessions.
type SessionList struct {
	// Instance is the answering serve's instance id.
	Instance string          `json:"instance"`
	Sessions []ListedSession `json:"sessions"`
}

// ListedSession is one session of the listing.
type ListedSession struct {
	store.LiveSession
	// Local: the answering serve owns the live session.
	Local bool `json:"local"`
	// Snapshot is the runtime snapshot of a local live session, absent
	// for the sessions of other serve processes (their snapshot is a
	// GET …/state away, proxied to the owner).
	Snapshot *protocol.Snapshot `json:"snapshot,omitempty"`
}

func writeError(w http.ResponseWriter, e *httpattach.Error) {
	httpedge.WriteError(w, httpedge.Headless, e)
}

// ownerKey carries the owner record of a proxied request.
type ownerKey struct{}

// hopHeaders are request headers a proxied request drops: the browser's
// view of the origin was checked here, and the owner would compare it
// with its own address.
var hopHeaders = []string{"Origin", "Referer", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest"}

// newProxy forwards a request to the owner its context names, as is:
// method, path, query (?cursor=), body and headers (authentication,
// Last-Event-ID, the attach headers), flushing every write of an event
// stream at once.
func (c *Cluster) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport:     c.cfg.Transport,
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			owner := pr.In.Context().Value(ownerKey{}).(store.LiveSession)
			u, _ := url.Parse(owner.Address) // checked by the owner's New
			pr.SetURL(u)
			pr.SetXForwarded()
			for _, h := range hopHeaders {
				pr.Out.Header.Del(h)
			}
			pr.Out.Header.Set(ProxiedHeader, c.cfg.Instance)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			owner := r.Context().Value(ownerKey{}).(store.LiveSession)
			c.log.Warn("proxy a live session request to its owner", "session", owner.ID, "owner", owner.Address, "err", err)
			if _, e := c.owner(r.Context(), owner.ID); e != nil {
				writeError(w, e) // ended meanwhile
				return
			}
			writeError(w, &httpattach.Error{Status: http.StatusBadGateway, Code: httpattach.CodeRuntimeNotReady,
				Message: fmt.Sprintf("Headless session %s is owned by %s, which cannot be reached: %v", owner.ID, owner.Address, err),
				Details: ownerInfo(httpattach.CodeRuntimeNotReady, owner)})
		},
	}
}
