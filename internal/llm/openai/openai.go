// Package openai is Maestro's OpenAI provider. It speaks the Responses API
// to OpenAI itself and Chat Completions to OpenAI-compatible servers
// (Ollama, vLLM, LM Studio, …), both through the official openai-go SDK,
// and maps them to the neutral llm types.
//
// The final message of a call is always built from the whole stream — the
// accumulated chunks for Chat Completions, the response.completed response
// for Responses — never from the SDK's "just finished" helpers, which
// compatible servers do not trigger reliably (openai/openai-go#417). Deltas
// are yielded only for live display.
package openai

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/maestro-run/maestro/internal/llm"
)

// The APIs a Provider can speak.
const (
	// APIChat is Chat Completions (/chat/completions), the lowest common
	// denominator of OpenAI-compatible servers.
	APIChat = "chat"
	// APIResponses is the Responses API (/responses), OpenAI's own.
	APIResponses = "responses"
)

// providerName is what Name returns and what errors carry.
const providerName = "openai"

// defaultBaseURL is OpenAI's API.
const defaultBaseURL = "https://api.openai.com/v1/"

// authHint tells the user how to fix a missing or rejected key.
const authHint = "set OPENAI_API_KEY to a valid key (local servers: set OPENAI_BASE_URL and no key)"

// Config configures a Provider.
type Config struct {
	// APIKey is sent as a bearer token. It may be empty when BaseURL points
	// at a local server; then no Authorization header is sent at all.
	APIKey string
	// BaseURL is the API root, for example http://localhost:11434/v1 for
	// Ollama. Empty means OpenAI (https://api.openai.com/v1).
	BaseURL string
	// Model is the model id requests are sent to.
	Model string
	// API is APIChat, APIResponses, or "" to choose: Responses for OpenAI
	// (BaseURL empty or on api.openai.com), Chat Completions otherwise.
	API string
	// Organization, when set, is sent as the OpenAI-Organization header.
	Organization string
	// MaxTokens caps responses when a Request does not; 0 leaves the
	// server's default.
	MaxTokens int
	// HTTPClient, when set, sends the requests (tests, proxies). The
	// default is a client whose transport gives up when no response
	// headers arrive within 10 minutes.
	HTTPClient *http.Client
	// ContextWindows maps model ids to configured context windows
	// (config.yaml models:); they win over what the server states.
	ContextWindows map[string]int64
}

// ConfigFromEnv returns the configuration for model from the environment:
// OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_ORG_ID and MAESTRO_OPENAI_API
// ("chat" or "responses"; empty chooses by base URL).
func ConfigFromEnv(model string) Config {
	return configFromEnv(model, os.Getenv)
}

func configFromEnv(model string, getenv func(string) string) Config {
	return Config{
		APIKey:       strings.TrimSpace(getenv("OPENAI_API_KEY")),
		BaseURL:      strings.TrimSpace(getenv("OPENAI_BASE_URL")),
		Model:        model,
		API:          strings.ToLower(strings.TrimSpace(getenv("MAESTRO_OPENAI_API"))),
		Organization: strings.TrimSpace(getenv("OPENAI_ORG_ID")),
	}
}

// Provider is an llm.Provider and llm.ModelLister for OpenAI and
// OpenAI-compatible servers.
type Provider struct {
	cfg       Config
	api       string
	chat      sdk.ChatCompletionService
	responses responses.ResponseService
	models    sdk.ModelService
	http      *http.Client
	window    *llm.WindowResolver
}

// New returns a provider for cfg. A key is required unless BaseURL is set
// (local servers usually need none).
func New(cfg Config) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: no model configured")
	}
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		return nil, &llm.Error{
			Kind:     llm.KindAuth,
			Provider: providerName,
			Message:  "no API key configured",
			Hint:     "set OPENAI_API_KEY, or OPENAI_BASE_URL for a local OpenAI-compatible server (no key needed)",
		}
	}
	api, err := resolveAPI(cfg.API, cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an absolute http(s) URL", cfg.BaseURL)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = llm.DefaultHTTPClient()
	}
	// The services are built from explicit options only: openai.NewClient
	// would add DefaultClientOptions, which read OPENAI_API_KEY,
	// OPENAI_BASE_URL, OPENAI_ORG_ID, OPENAI_PROJECT_ID,
	// OPENAI_CUSTOM_HEADERS, … from the environment and could put back a
	// key the configuration deliberately left out. Without WithAPIKey the
	// SDK sends no Authorization header.
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(base),
		option.WithMaxRetries(0), // llm.WithRetry owns retries
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.Organization != "" {
		opts = append(opts, option.WithOrganization(cfg.Organization))
	}
	p := &Provider{
		cfg:       cfg,
		api:       api,
		chat:      sdk.NewChatCompletionService(opts...),
		responses: responses.NewResponseService(opts...),
		models:    sdk.NewModelService(opts...),
		http:      hc,
	}
	p.window = &llm.WindowResolver{Model: cfg.Model, Configured: cfg.ContextWindows, Ask: p.statedWindow}
	return p, nil
}

// resolveAPI validates api and resolves "" from the base URL.
func resolveAPI(api, baseURL string) (string, error) {
	switch api {
	case APIChat, APIResponses:
		return api, nil
	case "":
		if baseURL == "" {
			return APIResponses, nil
		}
		if u, err := url.Parse(baseURL); err == nil && strings.EqualFold(u.Hostname(), "api.openai.com") {
			return APIResponses, nil
		}
		return APIChat, nil
	default:
		return "", fmt.Errorf("openai: API %q is neither %q nor %q (MAESTRO_OPENAI_API)", api, APIChat, APIResponses)
	}
}

// Name returns "openai".
func (p *Provider) Name() string { return providerName }

// Model returns the configured model id.
func (p *Provider) Model() string { return p.cfg.Model }

// API returns the API in use, APIChat or APIResponses.
func (p *Provider) API() string { return p.api }

// Stream performs one model call on the configured API.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	if p.api == APIChat {
		return p.streamChat(ctx, req)
	}
	return p.streamResponses(ctx, req)
}

// ListModels returns the ids of the models the server offers.
func (p *Provider) ListModels(ctx context.Context) ([]string, error) {
	pager := p.models.ListAutoPaging(ctx)
	var ids []string
	for pager.Next() {
		ids = append(ids, pager.Current().ID)
	}
	if err := pager.Err(); err != nil {
		return nil, p.requestError(ctx, err)
	}
	return ids, nil
}

// maxTokens is the request's cap, else the configured one.
func (p *Provider) maxTokens(req *llm.Request) int64 {
	if req.MaxTokens > 0 {
		return int64(req.MaxTokens)
	}
	return int64(p.cfg.MaxTokens)
}
