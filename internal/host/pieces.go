package host

import (
	"context"
	"fmt"
	"strings"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/providers"
)

// PieceModels resolves the models that pieces and movements name
// (engine.Config.Models, config classifier_model) as --model does, but
// refuses a provider that has no credentials, so that a piece never runs
// silently on a model it did not ask for. `maestro run` and queued jobs
// both use it.
func (h *Host) PieceModels() func(ctx context.Context, spec string) (llm.Provider, error) {
	return func(ctx context.Context, spec string) (llm.Provider, error) {
		provider, _, ok := strings.Cut(spec, "/")
		if m, found := llm.LookupModel(spec); !ok && found {
			provider = m.Provider
		}
		if hint := unconfigured(provider, h.getenv, h.cfg); hint != "" {
			return nil, fmt.Errorf("provider %s is not configured: %s", provider, hint)
		}
		c, err := providers.Select(ctx, providers.Options{Model: spec, Config: h.cfg, Getenv: h.getenv})
		if err != nil {
			return nil, err
		}
		return llm.WithRetry(c.Provider, llm.RetryPolicy{}), nil
	}
}

// unconfigured says how to configure provider when neither the
// environment nor the config file gives it credentials; "" when they do
// (or for a provider that needs none).
func unconfigured(provider string, getenv func(string) string, cfg config.Config) string {
	switch provider {
	case "anthropic":
		if getenv("ANTHROPIC_API_KEY") == "" && getenv("ANTHROPIC_AUTH_TOKEN") == "" && cfg.Providers.Anthropic.APIKey == "" {
			return "set ANTHROPIC_API_KEY, or providers.anthropic.api_key in config.yaml"
		}
	case "openai":
		if getenv("OPENAI_API_KEY") == "" && getenv("OPENAI_BASE_URL") == "" && cfg.Providers.OpenAI.APIKey == "" && cfg.Providers.OpenAI.BaseURL == "" {
			return "set OPENAI_API_KEY or OPENAI_BASE_URL, or providers.openai in config.yaml"
		}
	}
	return ""
}

// ClassifierModel is the provider of config classifier_model (resolved
// by models, PieceModels), for a run that classifies on a live model;
// nil means the run's model.
func (h *Host) ClassifierModel(ctx context.Context, models func(context.Context, string) (llm.Provider, error), live bool) (llm.Provider, error) {
	if h.cfg.ClassifierModel == "" || !live {
		return nil, nil
	}
	p, err := models(ctx, h.cfg.ClassifierModel)
	if err != nil {
		return nil, fmt.Errorf("config classifier_model %q: %w", h.cfg.ClassifierModel, err)
	}
	return p, nil
}
