package httpattach

import (
	"net/http"
	"slices"

	"github.com/maestro-run/maestro/internal/protocol"
)

// SessionLister is implemented by Sessions that can name their live
// sessions (SessionMap does); GET /api/headless/sessions lists them.
type SessionLister interface {
	// IDs returns the ids of the live sessions, in any order.
	IDs() []string
}

// sessionList is the answer of GET /api/headless/sessions: each live
// session's runtime snapshot, by session id.
type sessionList struct {
	Sessions []protocol.Snapshot `json:"sessions"`
}

// list serves GET /api/headless/sessions, a Maestro addition to the
// wire contract's routes (docs/remote-attach.md, "Routes"): the
// snapshots of the live sessions, sorted by id. Sessions that cannot
// list (a hosted runner's one session) answer an empty list.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, sessionList{Sessions: h.Snapshots()})
}

// Snapshots returns the runtime snapshots of the live sessions, sorted by
// id (none for Sessions that cannot list, a hosted runner's one session).
func (h *Handler) Snapshots() []protocol.Snapshot {
	out := []protocol.Snapshot{}
	l, ok := h.cfg.Sessions.(SessionLister)
	if !ok {
		return out
	}
	ids := l.IDs()
	slices.Sort(ids)
	for _, id := range ids {
		s, e := h.lookup(id)
		if e != nil {
			continue // ended between IDs and Get
		}
		out = append(out, s.snapshot())
	}
	return out
}
