package httpattach

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/utility"
)

// Error codes of error bodies (contract §11.5): the body's error_type and
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

// Error is an HTTP error answer: {error, error_type, code} with
// error_type = code = Code (the Rust hosted runner's body; clients key on
// error_type and on the verbatim texts of Message). Sessions may return
// one from Create.
type Error struct {
	Status  int
	Code    string
	Message string
	// Details, when set, are the reference server's google.rpc.ErrorInfo
	// details (contract §11.5), e.g. a hosted runner's ownership.
	Details []ErrorInfo
}

// ErrorInfo is one TS-style error detail: {"@type":
// "type.googleapis.com/google.rpc.ErrorInfo", reason, domain, metadata}.
type ErrorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ErrorInfoType is ErrorInfo.Type.
const ErrorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

// Error implements error.
func (e *Error) Error() string { return e.Message }

type apiError = Error

// Texts clients match on (contract §11.5): keep verbatim.
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
	msgUnauthorized            = "Unauthorized: a valid API key is required (Authorization: Bearer <token> or x-maestro-api-key)"
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
// reference server answers (contract §11.5).
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

type errorBody struct {
	Error     string      `json:"error"`
	ErrorType string      `json:"error_type"`
	Code      string      `json:"code"`
	Details   []ErrorInfo `json:"details,omitempty"`
}

func writeError(w http.ResponseWriter, e *Error) {
	switch e.Status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "5")
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="maestro"`)
	}
	writeJSON(w, e.Status, errorBody{Error: e.Message, ErrorType: e.Code, Code: e.Code, Details: e.Details})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(errorBody{Error: "encode response: " + err.Error(), ErrorType: CodeInternal, Code: CodeInternal})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// Authorized reports whether r may use /api routes: always when neither
// Token nor RequireAuth is configured, else when it carries Token as a
// bearer token or in x-maestro-api-key / x-composer-api-key.
func (h *Handler) Authorized(r *http.Request) bool {
	if h.cfg.Token == "" {
		return !h.cfg.RequireAuth
	}
	var given []string
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		given = append(given, strings.TrimSpace(a[7:]))
	}
	given = append(given, r.Header.Get("x-maestro-api-key"), r.Header.Get("x-composer-api-key"))
	for _, g := range given {
		if g != "" && subtle.ConstantTimeCompare([]byte(g), []byte(h.cfg.Token)) == 1 {
			return true
		}
	}
	return false
}

// RequireAuth wraps next with the Handler's authentication rule for every
// path under /api/ and /debug/; /healthz, /readyz, /.well-known/… and
// everything else stay open (contract §13). Embedders mount their own
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
