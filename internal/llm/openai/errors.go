package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/maestro-run/maestro/internal/llm"
)

// requestError classifies a failure to obtain a response: an HTTP error
// status, a refused connection, a cancelled context.
func (p *Provider) requestError(ctx context.Context, err error) *llm.Error {
	if e := p.commonError(ctx, err); e != nil {
		return e
	}
	return &llm.Error{
		Kind:     llm.KindNetwork,
		Provider: providerName,
		Message:  fmt.Sprintf("sending the request to %s: %v", p.baseURL(), err),
		Hint:     p.networkHint(),
		Err:      err,
	}
}

// streamError classifies a failure after the stream started: a broken
// connection, a malformed event, an error event.
func (p *Provider) streamError(ctx context.Context, err error) *llm.Error {
	if e := p.commonError(ctx, err); e != nil {
		return e
	}
	return &llm.Error{
		Kind:     llm.KindStream,
		Provider: providerName,
		Message:  fmt.Sprintf("reading the response stream: %v", err),
		Err:      err,
	}
}

// badRequest reports a request that cannot be built from the conversation.
func badRequest(err error) *llm.Error {
	return &llm.Error{Kind: llm.KindBadRequest, Provider: providerName, Message: err.Error(), Err: err}
}

// incomplete reports a stream that ended without its terminal event.
func (p *Provider) incomplete(what string) *llm.Error {
	return &llm.Error{
		Kind:     llm.KindStream,
		Provider: providerName,
		Message:  "the stream ended before " + what,
	}
}

// commonError handles what requestError and streamError share:
// cancellation, HTTP errors and in-stream error events. It returns nil for
// anything else.
func (p *Provider) commonError(ctx context.Context, err error) *llm.Error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		cause := ctx.Err()
		if cause == nil {
			cause = err
		}
		return &llm.Error{Kind: llm.KindCancelled, Provider: providerName, Message: "the model call was cancelled", Err: cause}
	}
	if apiErr, ok := errors.AsType[*sdk.Error](err); ok {
		return p.statusError(apiErr)
	}
	if streamErr, ok := errors.AsType[*ssestream.StreamError](err); ok {
		// A chat stream's {"error": {...}} chunk.
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(streamErr.Event.Data, &body)
		code := ""
		if body.Error.Code != nil {
			code = fmt.Sprint(body.Error.Code)
		}
		msg := body.Error.Message
		if msg == "" {
			msg = strings.TrimSpace(string(streamErr.Event.Data))
		}
		e := p.eventError(body.Error.Type, code, msg)
		e.Err = err
		return e
	}
	return nil
}

// statusError maps an HTTP error response.
func (p *Provider) statusError(apiErr *sdk.Error) *llm.Error {
	status := apiErr.StatusCode
	msg := apiErr.Message
	if msg == "" {
		msg = responseText(apiErr.Response)
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := &llm.Error{
		Kind:     llm.ClassifyStatus(status),
		Provider: providerName,
		Status:   status,
		Message:  msg,
		Err:      apiErr,
	}
	if apiErr.Response != nil {
		e.RetryAfter = llm.RetryAfterHeader(apiErr.Response.Header, time.Now())
	}
	switch {
	case e.Kind == llm.KindAuth:
		e.Hint = authHint
	case status == http.StatusTooManyRequests && apiErr.Code == "insufficient_quota":
		// Retrying cannot help until the account has credit.
		e.Kind = llm.KindAuth
		e.Hint = "the account behind OPENAI_API_KEY has no quota left: check its plan and billing"
	case status == http.StatusNotFound:
		if apiErr.Code == "model_not_found" || strings.Contains(strings.ToLower(msg), "model") {
			e.Kind = llm.KindModelNotFound
			e.Message = fmt.Sprintf("model %q not found: %s", p.cfg.Model, msg)
			e.Hint = "check the model id against the models the server lists"
		} else {
			// Usually a base URL without its /v1 suffix.
			e.Kind = llm.KindBadRequest
			e.Message = fmt.Sprintf("%s answered 404: %s", p.baseURL(), msg)
			e.Hint = "check OPENAI_BASE_URL (OpenAI-compatible servers usually serve under /v1)"
		}
	}
	// llama.cpp's server says a prompt over its context size with the
	// type exceed_context_size_error (its code is the status).
	return llm.MarkContextLength(e, apiErr.Code+" "+apiErr.Type)
}

// eventError maps an error reported inside a stream (a chat error chunk, a
// Responses "error" event or a failed response) by its type and code.
func (p *Provider) eventError(typ, code, msg string) *llm.Error {
	kind := llm.KindStream
	switch s := strings.ToLower(typ + " " + code); {
	case strings.Contains(s, "insufficient_quota"),
		strings.Contains(s, "invalid_api_key"),
		strings.Contains(s, "authentication"),
		strings.Contains(s, "permission"):
		kind = llm.KindAuth
	case strings.Contains(s, "rate_limit"):
		kind = llm.KindRateLimit
	case strings.Contains(s, "overloaded"), strings.Contains(s, "slow_down"):
		kind = llm.KindOverloaded
	case strings.Contains(s, "model_not_found"):
		kind = llm.KindModelNotFound
	case strings.Contains(s, "server_error"), strings.Contains(s, "internal"):
		kind = llm.KindServer
	case strings.Contains(s, "invalid"), strings.Contains(s, "context_length"), strings.Contains(s, "exceed_context_size"),
		strings.Contains(s, "policy"):
		kind = llm.KindBadRequest
	}
	if msg == "" {
		msg = strings.TrimSpace(typ + " " + code)
	}
	if code != "" && !strings.Contains(msg, code) {
		msg = code + ": " + msg
	}
	e := &llm.Error{Kind: kind, Provider: providerName, Message: msg}
	if kind == llm.KindAuth {
		e.Hint = authHint
	}
	return llm.MarkContextLength(e, typ+" "+code)
}

// responseText returns the start of an error response's body (the SDK
// keeps it readable), for servers that do not send OpenAI's error JSON.
func responseText(res *http.Response) string {
	if res == nil || res.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	return strings.TrimSpace(string(b))
}

func (p *Provider) baseURL() string {
	if p.cfg.BaseURL == "" {
		return strings.TrimSuffix(defaultBaseURL, "/")
	}
	return p.cfg.BaseURL
}

func (p *Provider) networkHint() string {
	if p.cfg.BaseURL != "" {
		return "is the server at OPENAI_BASE_URL running and reachable?"
	}
	return ""
}
