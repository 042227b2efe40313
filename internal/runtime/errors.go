package runtime

import (
	"errors"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Error is a client message the runtime refused. Message is the contract's
// text, sent verbatim; Code is the HTTP status an HTTP transport answers
// with (the stdio transport reports it as an error message instead);
// Type is the error_type of that message.
type Error struct {
	Message string
	Code    int
	Type    protocol.ErrorType
	// RequestID, when set, is echoed as error.request_id.
	RequestID string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// HTTP-style codes of refusals.
const (
	CodeBadRequest = 400
	CodeForbidden  = 403
	CodeNotFound   = 404
	CodeConflict   = 409
)

// Texts clients match on (wire contract §8.5, §8.8, §9, §11.5): keep verbatim.
const (
	msgViewerCannotSend   = "Viewer headless connections cannot send messages"
	msgRoleCannotChange   = "headless connection role cannot change after hello"
	msgLeaseAlreadyHeld   = "Controller lease is already held by another connection"
	msgLeaseHeldElsewhere = "Controller lease is currently held by another connection"
	msgBusy               = "Headless runtime is already processing a prompt"
	msgShuttingDown       = "Headless runtime is shutting down"
	msgAutoIgnored        = "Tool response ignored (auto-approval mode)"
	msgNoUtilities        = "Utility operations are not available in this runtime"
	msgOutsideHostedRoot  = "Path is outside hosted workspace root"
)

// Errors returned by Connect and Subscribe (test with errors.Is).
var (
	// ErrLeaseHeld: a controller connected without TakeControl while
	// another connection holds the controller lease.
	ErrLeaseHeld = &Error{Message: msgLeaseAlreadyHeld, Code: CodeConflict, Type: protocol.ErrorProtocol}
	// ErrClosed: the runtime or the subscription is closed.
	ErrClosed = errors.New("headless runtime is closed")
	// ErrLagged: a lossy subscription fell too far behind; the transport
	// sends a reset{lagged} with a fresh snapshot and calls Resync.
	ErrLagged = errors.New("subscription lagged behind the event buffer")
	// ErrReplayGap: the requested cursor is older than the event buffer.
	ErrReplayGap = errors.New("cursor is older than the event buffer")
	// ErrDuplicateConnection: Connect was given an id already in use.
	ErrDuplicateConnection = errors.New("headless connection id is already in use")
)

func refuse(code int, typ protocol.ErrorType, msg string) *Error {
	return &Error{Message: msg, Code: code, Type: typ}
}

// forbidden is the catch-all refusal (HTTP maps runtime refusals to 403),
// typed by the contract's text classification.
func forbidden(msg string) *Error {
	return &Error{Message: msg, Code: CodeForbidden, Type: Classify(msg, false)}
}

// ErrorMessage converts err into the error message a transport sends: an
// *Error keeps its text, type and request id; anything else is classified
// by its text.
func ErrorMessage(err error) protocol.Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return protocol.Error{RequestID: e.RequestID, Message: e.Message, ErrorType: e.Type}
	}
	msg := err.Error()
	return protocol.Error{Message: msg, ErrorType: Classify(msg, false)}
}

// Classify returns the error_type of a runtime error from its text, the
// way the reference server does (wire contract §8.4), first match wins:
// abort/interrupted/cancel → cancelled; rate limit/overloaded/timeout/
// temporar → transient; tool/permission/approval → tool; parse/json/
// protocol → protocol; otherwise fatal when fatal, else tool.
func Classify(message string, fatal bool) protocol.ErrorType {
	m := strings.ToLower(message)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(m, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("abort", "interrupted", "cancel"):
		return protocol.ErrorCancelled
	case has("rate limit", "overloaded", "timeout", "temporar"):
		return protocol.ErrorTransient
	case has("tool", "permission", "approval"):
		return protocol.ErrorTool
	case has("parse", "json", "protocol"):
		return protocol.ErrorProtocol
	case fatal:
		return protocol.ErrorFatal
	}
	return protocol.ErrorTool
}
