package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
)

// windowTimeout bounds the requests that ask a server for a window.
const windowTimeout = 10 * time.Second

// ContextWindow is the model's window: configured (Config.ContextWindows),
// else what the server states (statedWindow), else the catalogue's, else
// llm.DefaultContextWindow with a one-time notice.
func (p *Provider) ContextWindow(ctx context.Context) llm.Window { return p.window.Resolve(ctx) }

// listingWindowFields are the fields OpenAI-compatible model listings use
// for a model's context length: context_length (OpenRouter),
// context_window (Groq), max_context_length (LM Studio's native listing),
// max_model_len (vLLM).
var listingWindowFields = []string{"context_length", "context_window", "max_context_length", "max_model_len"}

// statedWindow asks an OpenAI-compatible server for the model's window,
// first answer wins: its /v1/models entry (listingWindow); llama.cpp's
// server (an entry with meta), GET <root>/props; LM Studio's native GET
// <root>/api/v0/models/<id>; Ollama's POST <root>/api/show. 0 when none
// says. OpenAI's own API states no window (the catalogue has its
// models), so it is not asked.
func (p *Provider) statedWindow(ctx context.Context) (int64, error) {
	if p.cfg.BaseURL == "" {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, windowTimeout)
	defer cancel()
	var entry []byte
	pager := p.models.ListAutoPaging(ctx)
	for pager.Next() {
		if m := pager.Current(); m.ID == p.cfg.Model {
			entry = []byte(m.RawJSON())
			break
		}
	}
	if n := listingWindow(entry); n > 0 {
		return n, nil
	}
	root := strings.TrimSuffix(strings.TrimSuffix(p.cfg.BaseURL, "/"), "/v1")
	var errs []error
	for _, ask := range []func(context.Context, string, []byte) (int64, error){p.llamaCppWindow, p.lmStudioWindow, p.ollamaWindow} {
		n, err := ask(ctx, root, entry)
		if n > 0 {
			return n, nil
		}
		errs = append(errs, err)
	}
	return 0, errors.Join(errs...)
}

// listingWindow reads a model entry's context length.
func listingWindow(raw []byte) int64 {
	var entry map[string]json.RawMessage
	if json.Unmarshal(raw, &entry) != nil {
		return 0
	}
	return firstWindow(entry, listingWindowFields...)
}

// firstWindow is the first of fields in obj that holds a positive number.
func firstWindow(obj map[string]json.RawMessage, fields ...string) int64 {
	for _, f := range fields {
		var n int64
		if v, ok := obj[f]; ok && json.Unmarshal(v, &n) == nil && n > 0 {
			return n
		}
	}
	return 0
}

// llamaCppWindow asks llama.cpp's server, whose listing entries carry a
// meta object, for the window it runs the model with: GET <root>/props,
// default_generation_settings.n_ctx; else the entry's meta.n_ctx_train
// (the length the model was trained for).
func (p *Provider) llamaCppWindow(ctx context.Context, root string, raw []byte) (int64, error) {
	var entry struct {
		Meta map[string]json.RawMessage `json:"meta"`
	}
	if json.Unmarshal(raw, &entry) != nil || entry.Meta == nil {
		return 0, nil
	}
	var props struct {
		Settings map[string]json.RawMessage `json:"default_generation_settings"`
	}
	found, err := p.askJSON(ctx, http.MethodGet, root+"/props?model="+url.QueryEscape(p.cfg.Model), nil, &props)
	if err != nil {
		return 0, err
	}
	if n := firstWindow(props.Settings, "n_ctx"); found && n > 0 {
		return n, nil
	}
	return firstWindow(entry.Meta, "n_ctx_train"), nil
}

// lmStudioWindow asks LM Studio's native API for the model's window: GET
// <root>/api/v0/models/<id>, loaded_context_length when the model is
// loaded, else max_context_length.
func (p *Provider) lmStudioWindow(ctx context.Context, root string, _ []byte) (int64, error) {
	var info map[string]json.RawMessage
	found, err := p.askJSON(ctx, http.MethodGet, root+"/api/v0/models/"+url.PathEscape(p.cfg.Model), nil, &info)
	if err != nil || !found {
		return 0, err
	}
	return firstWindow(info, "loaded_context_length", "max_context_length"), nil
}

// ollamaWindow asks Ollama's native API for the model's window: the
// num_ctx it runs the model with when its parameters set one, else the
// model's trained context length (model_info "<arch>.context_length").
func (p *Provider) ollamaWindow(ctx context.Context, root string, _ []byte) (int64, error) {
	var info struct {
		Parameters string                     `json:"parameters"`
		ModelInfo  map[string]json.RawMessage `json:"model_info"`
	}
	found, err := p.askJSON(ctx, http.MethodPost, root+"/api/show", map[string]string{"model": p.cfg.Model}, &info)
	if err != nil || !found {
		return 0, err
	}
	for line := range strings.Lines(info.Parameters) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "num_ctx" {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil && n > 0 {
				return n, nil
			}
		}
	}
	for k, v := range info.ModelInfo {
		var n int64
		if strings.HasSuffix(k, ".context_length") && json.Unmarshal(v, &n) == nil && n > 0 {
			return n, nil
		}
	}
	return 0, nil
}

// askJSON sends a request for a server's model information (body, when
// not nil, as JSON) and decodes a 200 answer into out. It reports false,
// without an error, when the server answers another status: a server
// that does not have the route says nothing.
func (p *Provider) askJSON(ctx context.Context, method, u string, body, out any) (bool, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return false, fmt.Errorf("encode the request to %s: %w", u, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return false, fmt.Errorf("ask %s for the model's info: %w", u, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := p.http.Do(req)
	if err != nil {
		return false, fmt.Errorf("ask %s for the model's info: %w", u, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, nil
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 8<<20)).Decode(out); err != nil {
		return false, fmt.Errorf("read %s: %w", u, err)
	}
	return true, nil
}
