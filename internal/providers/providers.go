// Package providers chooses and builds the model provider for a run:
//
//  1. --replay FILE, or --model provider/model (flag);
//  2. MAESTRO_MODEL, then credentials in the environment
//     (ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN → anthropic;
//     OPENAI_API_KEY or OPENAI_BASE_URL → openai);
//  3. ~/.maestro/config.yaml (model, then provider credentials);
//  4. the bundled replay demo, with a notice saying how to configure a
//     real model.
package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/anthropic"
	"github.com/maestro-run/maestro/internal/llm/openai"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/telemetry"
)

// Default models when only credentials are configured.
const (
	DefaultAnthropicModel = "claude-sonnet-4-5"
	DefaultOpenAIModel    = "gpt-5"
)

// DemoScenario names the bundled replay scenario.
const DemoScenario = "builtin:demo"

// names lists the provider names accepted in provider/model: the ones
// config.yaml, pieces and --model are checked against.
var names = config.ModelProviders

// Options are the inputs of Select.
type Options struct {
	// Model is the --model flag: provider/model.
	Model string
	// Replay is the --replay flag: a scenario file.
	Replay string
	// Config is the user's configuration file.
	Config config.Config
	// Getenv reads the environment; default os.Getenv.
	Getenv func(string) string
	// HTTPClient is used by the HTTP providers (nil = default).
	HTTPClient *http.Client
}

// Choice is the selected provider.
type Choice struct {
	Provider llm.Provider
	// Executor is protocol.ExecutorLive or protocol.ExecutorReplay.
	Executor protocol.ExecutorType
	// Replay is the scenario of a replay choice (a path or DemoScenario).
	Replay string
	// Source says where the choice came from: flag, env, config or default.
	Source string
	// Notice, when set, is a one-line message for the user.
	Notice string
}

// Notice shown when no model is configured.
const demoNotice = "No model configured: running the bundled replay demo (scripted model turns, real tools). " +
	"To use a real model set ANTHROPIC_API_KEY or OPENAI_API_KEY (OPENAI_BASE_URL for a local server such as Ollama), " +
	"or pass --model provider/model."

// modelEnv lists the environment variables that Select and the providers
// it builds read.
func modelEnv() []string {
	return []string{"MAESTRO_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
		"OPENAI_API_KEY", "OPENAI_BASE_URL", "MAESTRO_OPENAI_API"}
}

// WithoutModel returns environ (KEY=value entries, as from os.Environ)
// without the variables that configure a model, and with MAESTRO_HOME set
// to home (where a fresh directory holds no config.yaml): the environment
// of a machine with no model configured, in which Select picks the
// bundled replay demo. Tests and benchmarks start maestro with it.
func WithoutModel(environ []string, home string) []string {
	drop := append(modelEnv(), "MAESTRO_HOME")
	var env []string
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(drop, k) {
			env = append(env, kv)
		}
	}
	return append(env, "MAESTRO_HOME="+home)
}

// Select chooses the provider per the package's precedence rules.
func Select(ctx context.Context, o Options) (*Choice, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Replay != "" {
		if o.Model != "" {
			return nil, errors.New("--replay and --model cannot be used together: replay sessions run a scripted model")
		}
		return replayChoice(o.Replay, "flag")
	}
	if o.Model != "" {
		return o.fromModel(ctx, o.Model, "flag")
	}
	if m := o.Getenv("MAESTRO_MODEL"); m != "" {
		return o.fromModel(ctx, m, "env")
	}
	if o.Getenv("ANTHROPIC_API_KEY") != "" || o.Getenv("ANTHROPIC_AUTH_TOKEN") != "" {
		return o.build(ctx, "anthropic", "", "env")
	}
	if o.Getenv("OPENAI_API_KEY") != "" || o.Getenv("OPENAI_BASE_URL") != "" {
		return o.build(ctx, "openai", "", "env")
	}
	if o.Config.Model != "" {
		return o.fromModel(ctx, o.Config.Model, "config")
	}
	if p := o.Config.Providers.Anthropic; p.APIKey != "" {
		return o.build(ctx, "anthropic", "", "config")
	}
	if p := o.Config.Providers.OpenAI; p.APIKey != "" || p.BaseURL != "" {
		return o.build(ctx, "openai", "", "config")
	}
	c, err := replayChoice(DemoScenario, "default")
	if err != nil {
		return nil, err
	}
	c.Notice = demoNotice
	return c, nil
}

// fromModel handles a provider/model string.
func (o Options) fromModel(ctx context.Context, spec, source string) (*Choice, error) {
	provider, model, ok := strings.Cut(spec, "/")
	if !ok {
		// A bare model id: infer the provider from the catalogue.
		if m, found := llm.LookupModel(spec); found {
			return o.build(ctx, m.Provider, spec, source)
		}
		return nil, fmt.Errorf("model %q: give it as provider/model, with provider one of %s (for example anthropic/%s or openai/%s)",
			spec, strings.Join(names, ", "), DefaultAnthropicModel, DefaultOpenAIModel)
	}
	if !slices.Contains(names, provider) {
		return nil, fmt.Errorf("model %q: unknown provider %q; available providers: %s", spec, provider, strings.Join(names, ", "))
	}
	if model == "" {
		return nil, fmt.Errorf("model %q: the model after %q is empty", spec, provider+"/")
	}
	if provider == "replay" {
		if model == "demo" {
			model = DemoScenario
		}
		return replayChoice(model, source)
	}
	return o.build(ctx, provider, model, source)
}

func replayChoice(scenario, source string) (*Choice, error) {
	var s *replay.Scenario
	if scenario == DemoScenario {
		s = replay.Demo()
	} else {
		var err error
		if s, err = replay.Load(scenario); err != nil {
			return nil, fmt.Errorf("load replay scenario: %w", err)
		}
	}
	return &Choice{Provider: replay.New(s), Executor: protocol.ExecutorReplay, Replay: scenario, Source: source}, nil
}

// build constructs a live provider; model "" means the provider default.
func (o Options) build(ctx context.Context, provider, model, source string) (*Choice, error) {
	c := &Choice{Executor: protocol.ExecutorLive, Source: source}
	switch provider {
	case "anthropic":
		if model == "" {
			model = DefaultAnthropicModel
		}
		cfg := anthropic.Config{
			APIKey:     first(o.Getenv("ANTHROPIC_API_KEY"), o.Config.Providers.Anthropic.APIKey),
			AuthToken:  o.Getenv("ANTHROPIC_AUTH_TOKEN"),
			BaseURL:    first(o.Getenv("ANTHROPIC_BASE_URL"), o.Config.Providers.Anthropic.BaseURL),
			Model:      model,
			HTTPClient: o.client(o.Config.Providers.Anthropic),
			// config.yaml models: {<id>: {context_window}}
			ContextWindows: o.Config.ContextWindows(provider),
		}
		p, err := anthropic.New(cfg)
		if err != nil {
			return nil, err
		}
		c.Provider = p
	case "openai":
		cfg := openai.Config{
			APIKey:     first(o.Getenv("OPENAI_API_KEY"), o.Config.Providers.OpenAI.APIKey),
			BaseURL:    first(o.Getenv("OPENAI_BASE_URL"), o.Config.Providers.OpenAI.BaseURL),
			API:        first(o.Getenv("MAESTRO_OPENAI_API"), o.Config.Providers.OpenAI.API),
			Model:      model,
			HTTPClient: o.client(o.Config.Providers.OpenAI),
			// config.yaml models: {<id>: {context_window}}
			ContextWindows: o.Config.ContextWindows(provider),
		}
		if cfg.Model == "" {
			if cfg.BaseURL == "" {
				cfg.Model = DefaultOpenAIModel
			} else {
				// A local server: use the first model it serves.
				m, err := firstServedModel(ctx, cfg)
				if err != nil {
					return nil, err
				}
				cfg.Model = m
				c.Notice = fmt.Sprintf("Using model %q, the first one %s serves (choose with --model openai/<model>).", m, cfg.BaseURL)
			}
		}
		p, err := openai.New(cfg)
		if err != nil {
			return nil, err
		}
		c.Provider = p
	default:
		return nil, fmt.Errorf("unknown provider %q; available providers: %s", provider, strings.Join(names, ", "))
	}
	return c, nil
}

func firstServedModel(ctx context.Context, cfg openai.Config) (string, error) {
	cfg.Model = "unset"
	p, err := openai.New(cfg)
	if err != nil {
		return "", err
	}
	models, err := p.ListModels(ctx)
	if err != nil {
		return "", fmt.Errorf("no model given and listing the models of %s failed (pass --model openai/<model>): %w", cfg.BaseURL, err)
	}
	if len(models) == 0 {
		return "", fmt.Errorf("no model given and %s serves none (pass --model openai/<model>)", cfg.BaseURL)
	}
	return models[0], nil
}

// ExplainUnknownModel turns a model-not-found failure into a message that
// lists the models the provider offers (or the catalogue's, when the
// provider cannot list them).
func ExplainUnknownModel(ctx context.Context, p llm.Provider, err error) error {
	if llm.KindOf(err) != llm.KindModelNotFound {
		return err
	}
	var available []string
	if l, ok := p.(llm.ModelLister); ok {
		if models, lerr := l.ListModels(ctx); lerr == nil {
			available = models
		}
	}
	if len(available) == 0 {
		available = llm.KnownModels(p.Name())
	}
	slices.Sort(available)
	return fmt.Errorf("unknown model %q for %s; available: %s", p.Model(), p.Name(), strings.Join(available, ", "))
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// client is the HTTP client of provider p: o.HTTPClient, with the join
// keys and trace context set on every request when p is marked
// managed_gateway (docs/events.md, "Model requests to a managed gateway").
func (o Options) client(p config.Provider) *http.Client {
	if !p.ManagedGateway {
		return o.HTTPClient
	}
	c := http.Client{CheckRedirect: llm.SameOriginRedirect}
	if o.HTTPClient != nil {
		c = *o.HTTPClient
	}
	c.Transport = telemetry.GatewayTransport(c.Transport, telemetry.JoinKeysFromEnv(o.Getenv))
	return &c
}
