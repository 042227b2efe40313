package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
// for a model's context length: context_length (OpenRouter, LM Studio's
// and llama.cpp's servers), context_window (Groq), max_context_length (LM
// Studio's native listing), max_model_len (vLLM).
var listingWindowFields = []string{"context_length", "context_window", "max_context_length", "max_model_len"}

// statedWindow asks an OpenAI-compatible server for the model's window:
// its model listing, else Ollama's model info (POST <root>/api/show). 0
// when it says nothing. OpenAI's own API states no window (the catalogue
// has its models), so it is not asked.
func (p *Provider) statedWindow(ctx context.Context) (int64, error) {
	if p.cfg.BaseURL == "" {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, windowTimeout)
	defer cancel()
	pager := p.models.ListAutoPaging(ctx)
	for pager.Next() {
		m := pager.Current()
		if m.ID != p.cfg.Model {
			continue
		}
		if n := listingWindow([]byte(m.RawJSON())); n > 0 {
			return n, nil
		}
		break
	}
	return p.ollamaWindow(ctx)
}

// listingWindow reads a model entry's context length.
func listingWindow(raw []byte) int64 {
	var entry map[string]json.RawMessage
	if json.Unmarshal(raw, &entry) != nil {
		return 0
	}
	for _, f := range listingWindowFields {
		var n int64
		if v, ok := entry[f]; ok && json.Unmarshal(v, &n) == nil && n > 0 {
			return n
		}
	}
	return 0
}

// ollamaWindow asks Ollama's native API for the model's window: the
// num_ctx it runs the model with when its parameters set one, else the
// model's trained context length (model_info "<arch>.context_length").
func (p *Provider) ollamaWindow(ctx context.Context) (int64, error) {
	root := strings.TrimSuffix(strings.TrimSuffix(p.cfg.BaseURL, "/"), "/v1")
	body, err := json.Marshal(map[string]string{"model": p.cfg.Model})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, root+"/api/show", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("ask %s for the model's info: %w", root, err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := p.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("ask %s for the model's info: %w", root, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, nil
	}
	var info struct {
		Parameters string                     `json:"parameters"`
		ModelInfo  map[string]json.RawMessage `json:"model_info"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 8<<20)).Decode(&info); err != nil {
		return 0, fmt.Errorf("read %s/api/show: %w", root, err)
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
