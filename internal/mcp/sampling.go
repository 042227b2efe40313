package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/llm"
)

// DefaultSamplingMaxTokens caps a sampling answer when the server asks
// for no cap or a larger one.
const DefaultSamplingMaxTokens = 4096

// sample serves a server's sampling/createMessage with the session's
// model (docs/mcp.md, "Sampling"): only for a server whose configuration
// says allow_sampling, and only text; no tools are offered.
func (s *server) sample(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
	model := s.m.o.Model
	if model == nil {
		return nil, fmt.Errorf("MCP server %s: sampling: this session has no model", s.slug)
	}
	p := req.Params
	r := &llm.Request{System: p.SystemPrompt, MaxTokens: DefaultSamplingMaxTokens}
	if p.MaxTokens > 0 && p.MaxTokens < DefaultSamplingMaxTokens {
		r.MaxTokens = int(p.MaxTokens)
	}
	for _, m := range p.Messages {
		text, ok := m.Content.(*sdk.TextContent)
		if !ok {
			return nil, fmt.Errorf("MCP server %s: sampling: only text messages are served, not %T", s.slug, m.Content)
		}
		role := llm.RoleUser
		if m.Role == "assistant" {
			role = llm.RoleAssistant
		}
		r.Messages = append(r.Messages, llm.Message{Role: role, Parts: []llm.Part{llm.Text(text.Text)}})
	}
	if len(r.Messages) == 0 {
		return nil, fmt.Errorf("MCP server %s: sampling: no messages", s.slug)
	}
	s.m.report(fmt.Sprintf("MCP server %s asks the model for a completion (sampling).", s.slug))
	var resp *llm.Response
	for ev, err := range model.Stream(ctx, r) {
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: sampling: %w", s.slug, err)
		}
		if ev.Type == llm.EventDone {
			resp = ev.Response
		}
	}
	if resp == nil {
		return nil, errors.New("sampling: the model gave no answer")
	}
	var text strings.Builder
	for _, part := range resp.Message.Parts {
		if part.Type == llm.PartText {
			text.WriteString(part.Text)
		}
	}
	stop := "endTurn"
	if resp.StopReason == llm.StopMaxTokens {
		stop = "maxTokens"
	}
	return &sdk.CreateMessageResult{Role: "assistant", Content: &sdk.TextContent{Text: text.String()},
		Model: cmp.Or(resp.Model, model.Model()), StopReason: stop}, nil
}
