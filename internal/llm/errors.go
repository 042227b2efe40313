package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrorKind classifies provider failures.
type ErrorKind string

const (
	// KindAuth: missing or rejected credentials (HTTP 401/403).
	KindAuth ErrorKind = "auth"
	// KindRateLimit: HTTP 429; retried with backoff.
	KindRateLimit ErrorKind = "rate_limit"
	// KindOverloaded: HTTP 529 or an overloaded_error; retried.
	KindOverloaded ErrorKind = "overloaded"
	// KindServer: HTTP 5xx; retried.
	KindServer ErrorKind = "server"
	// KindBadRequest: HTTP 400/422; not retried.
	KindBadRequest ErrorKind = "bad_request"
	// KindModelNotFound: the model does not exist (HTTP 404 naming the model).
	KindModelNotFound ErrorKind = "model_not_found"
	// KindStream: the stream broke after it started (connection cut,
	// malformed event, missing terminal event). Transient, not retried
	// because output was already shown.
	KindStream ErrorKind = "stream"
	// KindNetwork: the request could not be sent or no response arrived.
	KindNetwork ErrorKind = "network"
	// KindCancelled: the caller's context was cancelled.
	KindCancelled ErrorKind = "cancelled"
	// KindScript: a replay scenario was exhausted or mismatched.
	KindScript ErrorKind = "script"
	// KindContextLength: the request does not fit the model's context
	// window ("prompt is too long", context_length_exceeded). Not retried
	// as is: the agent loop compacts the conversation and tries again.
	KindContextLength ErrorKind = "context_length"
)

// Error is a classified provider failure.
type Error struct {
	Kind     ErrorKind
	Provider string
	// Status is the HTTP status, 0 when none.
	Status int
	// Message is the provider's message, or ours.
	Message string
	// RetryAfter is the server's Retry-After hint, 0 when none.
	RetryAfter time.Duration
	// Hint tells the user how to fix it (for example which variable to set).
	Hint string
	Err  error
}

func (e *Error) Error() string {
	s := e.Provider
	if s != "" {
		s += ": "
	}
	switch {
	case e.Status != 0:
		s += fmt.Sprintf("%s (HTTP %d): %s", e.Kind, e.Status, e.Message)
	default:
		s += fmt.Sprintf("%s: %s", e.Kind, e.Message)
	}
	if e.Hint != "" {
		s += " — " + e.Hint
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the request may be sent again as is.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindRateLimit, KindOverloaded, KindServer, KindNetwork:
		return true
	}
	return false
}

// Transient reports whether trying again later may succeed.
func (e *Error) Transient() bool {
	return e.Retryable() || e.Kind == KindStream
}

// KindOf returns the kind of err, KindCancelled for context errors, or ""
// when err is not classified.
func KindOf(err error) ErrorKind {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return KindCancelled
	}
	return ""
}

// tooLongPhrases are what providers say when a request exceeds the
// context window: Anthropic "prompt is too long: N tokens > M maximum",
// OpenAI and vLLM "This model's maximum context length is M tokens…" (code
// context_length_exceeded), llama.cpp's server "request (N tokens) exceeds
// the available context size (M tokens)…" (type exceed_context_size_error;
// older builds "input (N tokens) is larger than the max context size"),
// others "context window", "too many tokens".
var tooLongPhrases = []string{
	"prompt is too long", "context_length_exceeded", "maximum context length",
	"context length exceeded", "exceeds the context window", "exceeds context window",
	"input is too long", "too many tokens",
	"exceed_context_size_error", "exceeds the available context size", "larger than the max context size",
}

// MarkContextLength reclassifies a rejected request (KindBadRequest: an
// HTTP 4xx or an invalid-request error event) as KindContextLength when its code or message says the
// prompt does not fit the context window. It returns e.
func MarkContextLength(e *Error, code string) *Error {
	if e == nil || e.Kind != KindBadRequest {
		return e
	}
	text := strings.ToLower(code + " " + e.Message)
	for _, p := range tooLongPhrases {
		if strings.Contains(text, p) {
			e.Kind = KindContextLength
			return e
		}
	}
	return e
}

// ClassifyStatus maps an HTTP status to an error kind.
func ClassifyStatus(status int) ErrorKind {
	switch {
	case status == 401 || status == 403:
		return KindAuth
	case status == 429:
		return KindRateLimit
	case status == 529:
		return KindOverloaded
	case status == 404:
		return KindModelNotFound
	case status >= 500:
		return KindServer
	default:
		return KindBadRequest
	}
}

// RetryAfterHeader reads a response's retry hint: retry-after-ms (the
// precise form the Anthropic and OpenAI APIs send), else Retry-After.
func RetryAfterHeader(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return ParseRetryAfter(strings.TrimSpace(h.Get("Retry-After")), now)
}

// ParseRetryAfter parses a Retry-After header value: delta-seconds or an
// HTTP date.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var secs float64
	if _, err := fmt.Sscanf(v, "%g", &secs); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
