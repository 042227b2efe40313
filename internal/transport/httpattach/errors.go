package httpattach

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/utility"
)

// Error codes of error bodies (wire contract §11.5): the body's error_type and
// code.
const (
	CodeBadRequest            = "bad_request"
	CodeAccessDenied          = "access_denied"
	CodeWorkspaceViolation    = "workspace_violation"
	CodeNotFound              = "not_found"
	CodeStaleSession          = "stale_session"
	CodeStaleConnection       = "stale_connection"
	CodeControllerLeaseHeld   = "controller_lease_held"
	CodeRuntimeOwnedElsewhere = "runtime_owned_elsewhere"
	CodeUnsupported           = "unsupported_capability"
	CodeRuntimeNotReady       = "runtime_not_ready"
	CodeRuntimeFailed         = "runtime_failed"
	CodeInternal              = "internal_error"
)

// Error is an HTTP error answer: {error, error_type, code, details?}
// with error_type = code = Code (the Rust hosted runner's body; clients key
// on error_type and on the verbatim texts of Message), written by the one
// edge writer (httpedge.WriteError, surface Headless). Sessions may return
// one from Create.
type Error = httpedge.Error

// ErrorInfo is one TS-style error detail: {"@type":
// "type.googleapis.com/google.rpc.ErrorInfo", reason, domain, metadata}.
type ErrorInfo = httpedge.ErrorInfo

// ErrorInfoType is ErrorInfo.Type.
const ErrorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

type apiError = Error

// Texts clients match on (wire contract §11.5): keep verbatim.
const (
	msgSessionNotFound         = "Headless session not found"
	msgCreateSessionNotFound   = "Session not found"
	msgConnectionNotFound      = "Headless connection not found"
	msgSubscriberNotFound      = "Headless subscriber not found"
	msgRoleMismatch            = "Headless connection role does not match subscription role"
	msgViewerCannotSend        = "Viewer headless connections cannot send messages"
	msgLeaseHeldElsewhere      = "Controller lease is currently held by another connection"
	msgViewerClientTools       = "viewer headless connections cannot enable client-side tools"
	msgClientToolsCapability   = "client_tool capability is required when enableClientTools is true"
	msgUnauthorized            = httpedge.MsgUnauthorizedHeadless
	msgBodyRequired            = "Request body required"
	msgMissingConnectionTarget = "connectionId or subscriptionId is required"
)

var errUnauthorized = &Error{Status: http.StatusUnauthorized, Code: CodeAccessDenied, Message: msgUnauthorized}

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

func notFound(code, msg string) *Error {
	return &Error{Status: http.StatusNotFound, Code: code, Message: msg}
}

// codeOf names an HTTP status in the contract's vocabulary.
func codeOf(status int, msg string) string {
	switch status {
	case http.StatusBadRequest:
		return CodeBadRequest
	case http.StatusUnauthorized:
		return CodeAccessDenied
	case http.StatusForbidden:
		if strings.Contains(msg, "outside") && strings.Contains(msg, "workspace root") {
			return CodeWorkspaceViolation
		}
		return CodeAccessDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeControllerLeaseHeld
	case http.StatusNotImplemented:
		return CodeUnsupported
	case http.StatusServiceUnavailable:
		return CodeRuntimeNotReady
	}
	return CodeInternal
}

// asError converts an error from the runtime, the utilities or Sessions
// into an HTTP error. Runtime refusals keep their status (viewer 403,
// lease 409, …); anything else the runtime throws is 403, as the
// reference server answers (wire contract §11.5).
func asError(err error, fallback int) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	if e, ok := errors.AsType[*runtime.Error](err); ok {
		return &Error{Status: e.Code, Code: codeOf(e.Code, e.Message), Message: e.Message}
	}
	if e, ok := errors.AsType[*utility.Error](err); ok {
		status := e.Code
		if status < 400 || status > 599 {
			status = http.StatusForbidden
		}
		return &Error{Status: status, Code: codeOf(status, e.Message), Message: e.Message}
	}
	if errors.Is(err, runtime.ErrClosed) {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeRuntimeNotReady, Message: "Headless runtime is closed"}
	}
	code := codeOf(fallback, err.Error())
	if fallback == http.StatusInternalServerError {
		code = CodeRuntimeFailed
	}
	return &Error{Status: fallback, Code: code, Message: err.Error()}
}

func writeError(w http.ResponseWriter, e *Error) { httpedge.WriteError(w, httpedge.Headless, e) }

func writeJSON(w http.ResponseWriter, status int, v any) { httpedge.WriteJSON(w, status, v) }

// edge is the Handler's authentication rule as an httpedge.Policy: with a
// Token, every /api request must present it; with RequireAuth and no
// Token, every /api request is refused.
func (h *Handler) edge() *httpedge.Policy {
	return &httpedge.Policy{Token: h.cfg.Token, RequireAuth: h.cfg.RequireAuth || h.cfg.Token != "",
		Surface: func(*http.Request) httpedge.Surface { return httpedge.Headless }}
}

// Authorized reports whether r may use /api routes: always when neither
// Token nor RequireAuth is configured, else when it carries Token as a
// bearer token (scheme case-insensitive) or in x-maestro-api-key /
// x-composer-api-key.
func (h *Handler) Authorized(r *http.Request) bool { return h.edge().Authorize(r) == nil }

// RequireAuth wraps next with the Handler's authentication rule for every
// path under /api/ and /debug/; /healthz, /readyz, /.well-known/… and
// everything else stay open (wire contract §13). Embedders mount their own
// /api routes behind it.
func (h *Handler) RequireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if (strings.HasPrefix(p, "/api/") || p == "/api" || strings.HasPrefix(p, "/debug/")) && !h.Authorized(r) {
			writeError(w, errUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
