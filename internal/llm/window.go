package llm

import (
	"context"
	"fmt"
	"sync"
)

// DefaultContextWindow is the context window assumed for a model whose
// window neither the configuration, the provider nor the catalogue states
// (a one-time notice says so).
const DefaultContextWindow = 128_000

// WindowSource says where a context window comes from.
type WindowSource string

// Window sources, in the order they are consulted.
const (
	// WindowConfig: config.yaml, models: {<id>: {context_window: N}}.
	WindowConfig WindowSource = "config"
	// WindowProvider: the server's own statement (an OpenAI-compatible
	// model listing's context length, Ollama's model info).
	WindowProvider WindowSource = "provider"
	// WindowCatalogue: Maestro's model catalogue (LookupModel).
	WindowCatalogue WindowSource = "catalogue"
	// WindowDefault: DefaultContextWindow.
	WindowDefault WindowSource = "default"
)

// Window is a model's context window.
type Window struct {
	// Tokens is the window; 0 when unknown.
	Tokens int64
	Source WindowSource
	// Notice, when set, is a one-time message for the user (the window
	// is assumed).
	Notice string
}

// ContextWindower is implemented by providers that know the context
// window of their model (the live providers; a replay provider does not).
type ContextWindower interface {
	ContextWindow(ctx context.Context) Window
}

// WindowResolver finds a model's context window once and remembers it:
// the configured window, else what the provider states (Ask), else the
// catalogue's, else DefaultContextWindow with a notice that only the first
// Resolve returns. Providers hold one; it is safe for concurrent use.
type WindowResolver struct {
	// Model is the model id.
	Model string
	// Configured maps model ids to configured windows.
	Configured map[string]int64
	// Ask, when set, asks the provider; 0 (or an error) when it does not say.
	Ask func(ctx context.Context) (int64, error)

	mu       sync.Mutex
	resolved bool
	window   Window
}

// Resolve returns the window (see WindowResolver).
func (r *WindowResolver) Resolve(ctx context.Context) Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resolved {
		w := r.window
		w.Notice = ""
		return w
	}
	w := r.find(ctx)
	if ctx.Err() != nil && w.Source == WindowDefault {
		// Cancelled while asking: try again next time.
		return w
	}
	r.resolved, r.window = true, w
	return w
}

func (r *WindowResolver) find(ctx context.Context) Window {
	if n := r.Configured[r.Model]; n > 0 {
		return Window{Tokens: n, Source: WindowConfig}
	}
	if r.Ask != nil {
		if n, err := r.Ask(ctx); err == nil && n > 0 {
			return Window{Tokens: n, Source: WindowProvider}
		}
	}
	if m, ok := LookupModel(r.Model); ok {
		return Window{Tokens: m.ContextWindow, Source: WindowCatalogue}
	}
	return Window{Tokens: DefaultContextWindow, Source: WindowDefault, Notice: fmt.Sprintf(
		"Context window of model %s unknown: assuming %d tokens (set models: {%q: {context_window: N}} in config.yaml)",
		r.Model, DefaultContextWindow, r.Model)}
}

// ContextWindowOf returns the context window of p's model: what p says
// when it is a ContextWindower, else the catalogue's, else 0 (unknown).
func ContextWindowOf(ctx context.Context, p Provider) Window {
	if cw, ok := p.(ContextWindower); ok {
		return cw.ContextWindow(ctx)
	}
	if m, ok := LookupModel(p.Model()); ok {
		return Window{Tokens: m.ContextWindow, Source: WindowCatalogue}
	}
	return Window{}
}
