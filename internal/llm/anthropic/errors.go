package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/maestro-run/maestro/internal/llm"
)

// baseURLHint is given when the server answers 404 for something other
// than a model.
const baseURLHint = "check ANTHROPIC_BASE_URL: the Messages API must answer at <base URL>/v1/messages"

// classify turns a failure of a call into an *llm.Error. started says
// whether any stream event had arrived, yielded whether any delta had been
// shown to the consumer.
func (p *Provider) classify(ctx context.Context, err error, started, yielded bool) *llm.Error {
	e := &llm.Error{Provider: ProviderName, Err: err}
	if ctxErr := ctx.Err(); ctxErr != nil || errors.Is(err, context.Canceled) {
		e.Kind = llm.KindCancelled
		e.Message = "request cancelled"
		if ctxErr != nil {
			e.Message += ": " + ctxErr.Error()
		}
		return e
	}
	if apiErr, ok := errors.AsType[*sdk.Error](err); ok {
		return p.classifyAPIError(e, apiErr, yielded)
	}
	_, syntaxErr := errors.AsType[*json.SyntaxError](err)
	_, typeErr := errors.AsType[*json.UnmarshalTypeError](err)
	switch {
	case started || syntaxErr || typeErr:
		e.Kind = llm.KindStream
		e.Message = "stream broke: " + err.Error()
	default:
		e.Kind = llm.KindNetwork
		e.Message = "request failed: " + err.Error()
	}
	return e
}

// classifyAPIError fills e from an error response or an SSE error event.
func (p *Provider) classifyAPIError(e *llm.Error, apiErr *sdk.Error, yielded bool) *llm.Error {
	typ := apiErr.Type()
	e.Message = apiMessage(apiErr)
	if apiErr.StatusCode < http.StatusBadRequest {
		// An error event inside a stream that had started well.
		if yielded {
			e.Kind = llm.KindStream
			e.Message = fmt.Sprintf("stream failed with %s: %s", typ, e.Message)
			return e
		}
		e.Kind = kindOfType(typ)
		if e.Kind == llm.KindAuth {
			e.Hint = authHint
		}
		return llm.MarkContextLength(e, string(typ))
	}
	e.Status = apiErr.StatusCode
	e.Kind = llm.ClassifyStatus(apiErr.StatusCode)
	if typ == sdk.ErrorTypeOverloadedError {
		e.Kind = llm.KindOverloaded
	}
	if apiErr.Response != nil {
		e.RetryAfter = llm.RetryAfterHeader(apiErr.Response.Header, time.Now())
	}
	switch e.Kind {
	case llm.KindAuth:
		e.Hint = authHint
	case llm.KindModelNotFound:
		if typ == sdk.ErrorTypeNotFoundError && strings.Contains(strings.ToLower(e.Message), "model") {
			e.Message = fmt.Sprintf("model %q not found: %s", p.model, e.Message)
		} else {
			e.Kind = llm.KindBadRequest
			e.Hint = baseURLHint
		}
	}
	return llm.MarkContextLength(e, string(typ))
}

// kindOfType classifies an API error type (for errors without a status).
func kindOfType(typ sdk.ErrorType) llm.ErrorKind {
	switch typ {
	case sdk.ErrorTypeOverloadedError:
		return llm.KindOverloaded
	case sdk.ErrorTypeRateLimitError:
		return llm.KindRateLimit
	case sdk.ErrorTypeAuthenticationError, sdk.ErrorTypePermissionError:
		return llm.KindAuth
	case sdk.ErrorTypeInvalidRequestError, sdk.ErrorTypeBillingError:
		return llm.KindBadRequest
	case sdk.ErrorTypeNotFoundError:
		return llm.KindModelNotFound
	default:
		// api_error, timeout_error and anything new: a server-side failure.
		return llm.KindServer
	}
}

// apiMessage returns the message of the API's error body, or the HTTP
// status text when the body has none.
func apiMessage(apiErr *sdk.Error) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	raw := apiErr.RawJSON()
	if json.Unmarshal([]byte(raw), &body) == nil && body.Error.Message != "" {
		return body.Error.Message
	}
	if raw = strings.TrimSpace(raw); raw != "" {
		if len(raw) > 300 {
			raw = raw[:300] + "…"
		}
		return raw
	}
	if text := http.StatusText(apiErr.StatusCode); text != "" {
		return text
	}
	return "error " + strconv.Itoa(apiErr.StatusCode)
}
