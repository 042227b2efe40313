package hostedrunner

import (
	"errors"
	"io"
	"net/http"

	"github.com/maestro-run/maestro/internal/httpedge"
)

// Paths of the remote-runner surface.
const (
	IdentityPath = "/.well-known/evalops/remote-runner/identity"
	DrainPath    = "/.well-known/evalops/remote-runner/drain"
)

func writeJSON(w http.ResponseWriter, status int, v any) { httpedge.WriteJSON(w, status, v) }

// writeError answers in the contract's error shape (§11.5); a 503 says to
// retry after 1 s.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	httpedge.WriteError(w, httpedge.Headless, &httpedge.Error{Status: status, Code: code, Message: msg, RetryAfter: 1})
}

// Handler serves the runner's HTTP surface behind its edge policy
// (Config.Edge: Host allowlist and cross-origin refusal on every route,
// the token on /api/): identity, drain, /healthz and /readyz, and
// /api/headless/... through the session API. Call SetAttach first.
func (r *Runner) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+IdentityPath, r.serveIdentity)
	mux.HandleFunc("POST "+DrainPath, r.serveDrain)
	mux.HandleFunc("GET /healthz", r.serveHealth)
	mux.HandleFunc("GET /readyz", r.serveHealth)
	if r.attach != nil {
		mux.Handle("/api/", r.attach)
	}
	// Every other request answers in the contract's error shape, as the
	// routes above do (net/http's are plain text): a known path asked
	// with another method 405 with Allow, any other path 404.
	allow := map[string]string{IdentityPath: "GET, HEAD", DrainPath: "POST", "/healthz": "GET, HEAD", "/readyz": "GET, HEAD"}
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		if a, ok := allow[req.URL.Path]; ok {
			w.Header().Set("Allow", a)
			writeError(w, http.StatusMethodNotAllowed, "bad_request", "method "+req.Method+" not allowed: "+req.URL.Path+" answers "+a)
			return
		}
		writeError(w, http.StatusNotFound, "not_found", "No hosted runner route "+req.Method+" "+req.URL.Path)
	})
	return r.cfg.Edge().Handler(mux)
}

func (r *Runner) serveIdentity(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, r.Identity())
}

// health is the /healthz and /readyz body (the Rust column of §11.1, with
// the reason when not ready).
type health struct {
	OK        bool   `json:"ok"`
	Status    string `json:"status,omitempty"`
	Error     string `json:"error,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	Code      string `json:"code,omitempty"`
}

func (r *Runner) serveHealth(w http.ResponseWriter, _ *http.Request) {
	ready, draining, lastErr := r.Ready()
	if ready {
		writeJSON(w, http.StatusOK, health{OK: true})
		return
	}
	h := health{Status: "unavailable", Error: cmpOr(lastErr, "Hosted runner is not ready"), ErrorType: "runtime_not_ready", Code: "runtime_not_ready"}
	if draining {
		h.Status, h.Error = "draining", "Hosted runner is draining"
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, h)
}

func (r *Runner) serveDrain(w http.ResponseWriter, req *http.Request) {
	// The route is open (a pod's preStop hook calls it without a token),
	// so only this machine may drain without the token.
	if !httpedge.LoopbackPeer(req) && !httpedge.ValidToken(req, r.cfg.AuthToken) {
		httpedge.WriteError(w, httpedge.Headless, &httpedge.Error{Status: http.StatusUnauthorized, Code: httpedge.CodeAccessDenied,
			Message: "drain from another machine needs the runner's token (Authorization: Bearer <token>); without it only a loopback peer may drain"})
		return
	}
	if e := httpedge.RequireJSON(req); e != nil {
		httpedge.WriteError(w, httpedge.Headless, e)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxDrainBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "read drain request body: "+err.Error())
		return
	}
	if len(body) > MaxDrainBody {
		writeError(w, http.StatusRequestEntityTooLarge, "bad_request", "drain request body is larger than 64 KB")
		return
	}
	d, err := DecodeDrainRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	resp, code, err := r.Drain(req.Context(), d)
	if err != nil {
		if _, ok := errors.AsType[*BadRequestError](err); ok {
			writeError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		writeError(w, code, "internal_error", err.Error())
		return
	}
	writeJSON(w, code, resp)
}
