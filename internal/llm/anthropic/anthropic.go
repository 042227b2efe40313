// Package anthropic is the llm.Provider for the Anthropic Messages API (and
// Anthropic-compatible servers), built on the official anthropic-sdk-go.
//
// The SDK is configured explicitly: credentials and base URL come only from
// Config, the SDK's own environment and profile lookup is switched off, and
// its retries are disabled because llm.WithRetry retries above it. Streams
// are accumulated here rather than by the SDK, so that quirks of compatible
// servers (a tool_use block whose start event already carries the input
// that the deltas then repeat) do not corrupt tool calls.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"os"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/maestro-run/maestro/internal/llm"
)

// ProviderName is the provider id.
const ProviderName = "anthropic"

// DefaultMaxTokens caps a response when neither the request nor the
// Config says otherwise.
const DefaultMaxTokens = 8192

// authHint tells the user how to fix missing or rejected credentials.
const authHint = "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) to a valid key"

// Config configures a Provider.
type Config struct {
	// APIKey is sent as x-api-key. It wins over AuthToken when both are set.
	APIKey string
	// AuthToken is sent as "Authorization: Bearer …" (gateways, proxies).
	AuthToken string
	// BaseURL replaces https://api.anthropic.com (without /v1).
	BaseURL string
	// Model is the model id requests are sent to.
	Model string
	// MaxTokens is the default response cap when a request sets none;
	// 0 means DefaultMaxTokens.
	MaxTokens int
	// HTTPClient, when set, sends the requests.
	HTTPClient *http.Client
	// ContextWindows maps model ids to configured context windows
	// (config.yaml models:); the catalogue covers the others.
	ContextWindows map[string]int64
}

// ConfigFromEnv returns a Config for model from ANTHROPIC_API_KEY,
// ANTHROPIC_AUTH_TOKEN and ANTHROPIC_BASE_URL.
func ConfigFromEnv(model string) Config {
	return Config{
		APIKey:    os.Getenv("ANTHROPIC_API_KEY"),
		AuthToken: os.Getenv("ANTHROPIC_AUTH_TOKEN"),
		BaseURL:   os.Getenv("ANTHROPIC_BASE_URL"),
		Model:     model,
	}
}

// Provider streams model calls to the Anthropic Messages API. It is safe
// for concurrent use.
type Provider struct {
	client    sdk.Client
	model     string
	maxTokens int
	window    *llm.WindowResolver
}

// New returns a Provider for cfg. It fails when no credential is set or no
// model is named.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" && cfg.AuthToken == "" {
		return nil, &llm.Error{
			Kind: llm.KindAuth, Provider: ProviderName,
			Message: "no Anthropic credentials: neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set",
			Hint:    authHint,
		}
	}
	if cfg.Model == "" {
		return nil, errors.New("anthropic: no model given")
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = llm.DefaultHTTPClient()
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	} else {
		opts = append(opts, option.WithAuthToken(cfg.AuthToken))
	}
	maxTokens := cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Provider{
		client: sdk.NewClient(opts...), model: cfg.Model, maxTokens: maxTokens,
		window: &llm.WindowResolver{Model: cfg.Model, Configured: cfg.ContextWindows},
	}, nil
}

// Name returns "anthropic".
func (p *Provider) Name() string { return ProviderName }

// Model returns the model id requests are sent to.
func (p *Provider) Model() string { return p.model }

// ContextWindow is the model's window: configured, else the catalogue's,
// else llm.DefaultContextWindow with a one-time notice.
func (p *Provider) ContextWindow(ctx context.Context) llm.Window { return p.window.Resolve(ctx) }

// ListModels returns the ids of the models the API offers.
func (p *Provider) ListModels(ctx context.Context) ([]string, error) {
	var ids []string
	pager := p.client.Models.ListAutoPaging(ctx, sdk.ModelListParams{})
	for pager.Next() {
		ids = append(ids, pager.Current().ID)
	}
	if err := pager.Err(); err != nil {
		return nil, fmt.Errorf("list anthropic models: %w", p.classify(ctx, err, false, false))
	}
	return ids, nil
}

// Stream performs one model call; see llm.Provider.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		// Cancelling the derived context aborts the HTTP request when the
		// consumer stops early.
		callCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream := p.client.Messages.NewStreaming(callCtx, params)
		defer stream.Close()

		var acc accumulator
		yielded := false
		for stream.Next() {
			delta, err := acc.add(stream.Current())
			if err != nil {
				yield(llm.Event{}, &llm.Error{Kind: llm.KindStream, Provider: ProviderName, Message: err.Error(), Err: err})
				return
			}
			if delta.Type == 0 {
				continue
			}
			yielded = true
			if !yield(delta, nil) {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.Event{}, p.classify(ctx, err, acc.started, yielded))
			return
		}
		if !acc.stopped {
			if ctx.Err() != nil {
				yield(llm.Event{}, p.classify(ctx, ctx.Err(), acc.started, yielded))
				return
			}
			msg := "stream ended before message_stop"
			if !acc.started {
				msg = "stream ended without any event"
			}
			yield(llm.Event{}, &llm.Error{Kind: llm.KindStream, Provider: ProviderName, Message: msg})
			return
		}
		resp, err := acc.response(p.model)
		if err != nil {
			yield(llm.Event{}, &llm.Error{Kind: llm.KindStream, Provider: ProviderName, Message: err.Error(), Err: err})
			return
		}
		yield(llm.Event{Type: llm.EventDone, Response: resp}, nil)
	}
}
