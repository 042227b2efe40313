package hostedrunner

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// Paths of the remote-runner surface.
const (
	IdentityPath = "/.well-known/evalops/remote-runner/identity"
	DrainPath    = "/.well-known/evalops/remote-runner/drain"
)

// errorBody is the Rust-style error body {error, error_type, code}.
type errorBody struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
	Code      string `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(errorBody{Error: "encode response: " + err.Error(), ErrorType: "internal_error", Code: "internal_error"})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, errorBody{Error: msg, ErrorType: code, Code: code})
}

// Handler serves the runner's HTTP surface: identity, drain, /healthz and
// /readyz (open), and /api/headless/... through the session API (auth as
// the Attach handler decides). Call SetAttach first.
func (r *Runner) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+IdentityPath, r.serveIdentity)
	mux.HandleFunc("POST "+DrainPath, r.serveDrain)
	mux.HandleFunc("GET /healthz", r.serveHealth)
	mux.HandleFunc("GET /readyz", r.serveHealth)
	if r.attach != nil {
		mux.Handle("/api/", r.attach)
	}
	return mux
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
