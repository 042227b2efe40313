package providers

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/protocol"
)

func TestSelectPrecedence(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Models = []string{"qwen3", "llama3.2"}
	cases := []struct {
		name       string
		opts       Options
		env        map[string]string
		want       string // provider/model
		wantSource string
		wantNotice string
		wantErr    string
	}{
		{name: "nothing configured runs the demo", want: "replay/maestro-replay-v1", wantSource: "default", wantNotice: "No model configured"},
		{name: "anthropic key", env: map[string]string{"ANTHROPIC_API_KEY": "k"}, want: "anthropic/" + DefaultAnthropicModel, wantSource: "env"},
		{name: "anthropic token", env: map[string]string{"ANTHROPIC_AUTH_TOKEN": "t"}, want: "anthropic/" + DefaultAnthropicModel, wantSource: "env"},
		{name: "openai key", env: map[string]string{"OPENAI_API_KEY": "k"}, want: "openai/" + DefaultOpenAIModel, wantSource: "env"},
		{name: "anthropic before openai", env: map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, want: "anthropic/" + DefaultAnthropicModel},
		{name: "local server picks its first model", env: map[string]string{"OPENAI_BASE_URL": srv.URL() + "/v1"}, want: "openai/qwen3", wantNotice: "first one"},
		{name: "MAESTRO_MODEL beats credentials", env: map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "MAESTRO_MODEL": "openai/gpt-4.1"}, want: "openai/gpt-4.1"},
		{name: "flag beats MAESTRO_MODEL", opts: Options{Model: "anthropic/claude-haiku-4-5"}, env: map[string]string{"ANTHROPIC_API_KEY": "k", "MAESTRO_MODEL": "openai/gpt-4.1"}, want: "anthropic/claude-haiku-4-5", wantSource: "flag"},
		{name: "env beats config", opts: Options{Config: config.Config{Model: "openai/gpt-4o"}}, env: map[string]string{"ANTHROPIC_API_KEY": "k"}, want: "anthropic/" + DefaultAnthropicModel},
		{name: "config model", opts: Options{Config: config.Config{Model: "openai/gpt-4o", Providers: config.Providers{OpenAI: config.Provider{APIKey: "k"}}}}, want: "openai/gpt-4o", wantSource: "config"},
		{name: "config credentials", opts: Options{Config: config.Config{Providers: config.Providers{Anthropic: config.Provider{APIKey: "k"}}}}, want: "anthropic/" + DefaultAnthropicModel, wantSource: "config"},
		{name: "bare model id inferred", opts: Options{Model: "gpt-4o-mini"}, env: map[string]string{"OPENAI_API_KEY": "k"}, want: "openai/gpt-4o-mini"},
		{name: "replay/demo", opts: Options{Model: "replay/demo"}, want: "replay/maestro-replay-v1"},
		{name: "bare unknown model", opts: Options{Model: "mystery-7b"}, wantErr: "give it as provider/model"},
		{name: "unknown provider", opts: Options{Model: "acme/m"}, wantErr: `unknown provider "acme"`},
		{name: "empty model", opts: Options{Model: "openai/"}, wantErr: "is empty"},
		{name: "replay and model", opts: Options{Model: "openai/gpt-5", Replay: "x.json"}, wantErr: "cannot be used together"},
		{name: "missing key names the variable", opts: Options{Model: "anthropic/claude-sonnet-4-5"}, wantErr: "ANTHROPIC_API_KEY"},
		{name: "missing openai config names the variables", opts: Options{Model: "openai/gpt-5"}, wantErr: "OPENAI_API_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.Getenv = func(k string) string { return tc.env[k] }
			c, err := Select(t.Context(), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Provider.Name() + "/" + c.Provider.Model(); got != tc.want {
				t.Errorf("provider = %s, want %s", got, tc.want)
			}
			if tc.wantSource != "" && c.Source != tc.wantSource {
				t.Errorf("source = %s, want %s", c.Source, tc.wantSource)
			}
			if !strings.Contains(c.Notice, tc.wantNotice) || (tc.wantNotice == "" && c.Notice != "") {
				t.Errorf("notice = %q, want containing %q", c.Notice, tc.wantNotice)
			}
			wantExec := protocol.ExecutorLive
			if c.Provider.Name() == "replay" {
				wantExec = protocol.ExecutorReplay
			}
			if c.Executor != wantExec {
				t.Errorf("executor = %s, want %s", c.Executor, wantExec)
			}
		})
	}
}

type listing struct{ models []string }

func (listing) Name() string  { return "anthropic" }
func (listing) Model() string { return "claude-9" }
func (listing) Stream(context.Context, *llm.Request) iter.Seq2[llm.Event, error] {
	return func(func(llm.Event, error) bool) {}
}
func (l listing) ListModels(context.Context) ([]string, error) { return l.models, nil }

func TestExplainUnknownModel(t *testing.T) {
	t.Parallel()
	notFound := &llm.Error{Kind: llm.KindModelNotFound, Message: "model: claude-9"}
	got := ExplainUnknownModel(t.Context(), listing{models: []string{"b", "a"}}, notFound)
	if got.Error() != `unknown model "claude-9" for anthropic; available: a, b` {
		t.Errorf("got %q", got)
	}
	// Without a list from the server, the catalogue answers.
	got = ExplainUnknownModel(t.Context(), listing{}, notFound)
	if !strings.Contains(got.Error(), "claude-sonnet-4-5") {
		t.Errorf("got %q", got)
	}
	other := errors.New("boom")
	if ExplainUnknownModel(t.Context(), listing{}, other) != other {
		t.Error("other errors must pass through unchanged")
	}
}

// TestWithoutModel strips each model variable and sets MAESTRO_HOME,
// keeping the rest in order; in the result Select falls back to the
// bundled demo.
func TestWithoutModel(t *testing.T) {
	t.Parallel()
	for _, k := range modelEnv() {
		t.Run(k, func(t *testing.T) {
			t.Parallel()
			environ := []string{"PATH=/usr/bin", k + "=anthropic/claude-sonnet-4-5", "MAESTRO_HOME=/old", "HOME=/root"}
			got := WithoutModel(environ, "/new")
			want := []string{"PATH=/usr/bin", "HOME=/root", "MAESTRO_HOME=/new"}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("WithoutModel = %q, want %q", got, want)
			}
			env := map[string]string{}
			for _, kv := range got {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			c, err := Select(t.Context(), Options{Getenv: func(k string) string { return env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			if c.Source != "default" || c.Replay != DemoScenario {
				t.Fatalf("Select chose %s from %s, want the demo by default", c.Provider.Name(), c.Source)
			}
		})
	}
}

// config.yaml models: keyed as --model writes the model, provider/ prefix
// included, named no model: the run assumed 128,000 tokens, silently.
func TestConfiguredWindowTakesTheProviderPrefix(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	cfg := config.Config{Models: map[string]config.Model{
		"openai/fake": {ContextWindow: 4000}, "anthropic/claude-x": {ContextWindow: 5000}, "bare": {ContextWindow: 6000},
	}}
	env := map[string]string{"OPENAI_BASE_URL": srv.URL() + "/v1", "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": srv.URL()}
	for model, want := range map[string]int64{"openai/fake": 4000, "anthropic/claude-x": 5000, "openai/bare": 6000, "anthropic/bare": 6000} {
		c, err := Select(t.Context(), Options{Model: model, Config: cfg, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		w := c.Provider.(llm.ContextWindower).ContextWindow(t.Context())
		if w.Tokens != want || w.Source != llm.WindowConfig {
			t.Errorf("%s: window %+v, want %d from the configuration", model, w, want)
		}
	}
}
