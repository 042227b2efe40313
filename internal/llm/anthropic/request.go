package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/maestro-run/maestro/internal/llm"
)

// thinkingBudget returns the thinking budget in tokens for a level; 0 means
// thinking is disabled.
func thinkingBudget(level llm.ThinkingLevel) (int, error) {
	switch level {
	case "", llm.ThinkingOff:
		return 0, nil
	case llm.ThinkingMinimal:
		return 1024, nil
	case llm.ThinkingLow:
		return 2048, nil
	case llm.ThinkingMedium:
		return 8192, nil
	case llm.ThinkingHigh:
		return 16384, nil
	case llm.ThinkingUltra:
		return 32000, nil
	}
	return 0, fmt.Errorf("unknown thinking level %q (want off, minimal, low, medium, high or ultra)", level)
}

// params maps a neutral request to the SDK's request parameters.
func (p *Provider) params(req *llm.Request) (sdk.MessageNewParams, error) {
	badRequest := func(err error) error {
		return &llm.Error{Kind: llm.KindBadRequest, Provider: ProviderName, Message: err.Error(), Err: err}
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = p.maxTokens
	}
	budget, err := thinkingBudget(req.Thinking)
	if err != nil {
		return sdk.MessageNewParams{}, badRequest(err)
	}
	params := sdk.MessageNewParams{Model: sdk.Model(p.model)}
	if budget > 0 {
		// max_tokens counts the thinking too and must exceed the budget:
		// keep the requested room for the answer on top of it.
		if maxTokens <= budget {
			maxTokens += budget
		}
		params.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(budget))
	} else {
		params.Thinking = sdk.ThinkingConfigParamUnion{OfDisabled: &sdk.ThinkingConfigDisabledParam{}}
	}
	params.MaxTokens = int64(maxTokens)
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for i, m := range req.Messages {
		mp, err := messageParam(m)
		if err != nil {
			return sdk.MessageNewParams{}, badRequest(fmt.Errorf("message %d: %w", i, err))
		}
		if len(mp.Content) > 0 {
			params.Messages = append(params.Messages, mp)
		}
	}
	for _, t := range req.Tools {
		tp, err := toolParam(t)
		if err != nil {
			return sdk.MessageNewParams{}, badRequest(err)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	return params, nil
}

// messageParam maps one message. Parts the API would reject (empty text,
// thinking without a signature, which another provider may have produced)
// are left out.
func messageParam(m llm.Message) (sdk.MessageParam, error) {
	var mp sdk.MessageParam
	switch m.Role {
	case llm.RoleUser:
		mp.Role = sdk.MessageParamRoleUser
	case llm.RoleAssistant:
		mp.Role = sdk.MessageParamRoleAssistant
	default:
		return mp, fmt.Errorf("unknown role %q", m.Role)
	}
	for j, part := range m.Parts {
		switch part.Type {
		case llm.PartText:
			if part.Text != "" {
				mp.Content = append(mp.Content, sdk.NewTextBlock(part.Text))
			}
		case llm.PartThinking:
			if part.Signature != "" {
				mp.Content = append(mp.Content, sdk.NewThinkingBlock(part.Signature, part.Text))
			}
		case llm.PartImage:
			if part.Image == nil {
				return mp, fmt.Errorf("part %d: image part without image", j)
			}
			mp.Content = append(mp.Content, sdk.NewImageBlockBase64(part.Image.MediaType, base64.StdEncoding.EncodeToString(part.Image.Data)))
		case llm.PartToolCall:
			tc := part.ToolCall
			if tc == nil {
				return mp, fmt.Errorf("part %d: tool_call part without tool call", j)
			}
			input := tc.Input
			if len(input) == 0 || !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			mp.Content = append(mp.Content, sdk.NewToolUseBlock(tc.ID, input, tc.Name))
		case llm.PartToolResult:
			tr := part.ToolResult
			if tr == nil {
				return mp, fmt.Errorf("part %d: tool_result part without tool result", j)
			}
			block := sdk.ToolResultBlockParam{ToolUseID: tr.CallID}
			if tr.Content != "" {
				block.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: tr.Content}}}
			}
			if tr.IsError {
				block.IsError = param.NewOpt(true)
			}
			mp.Content = append(mp.Content, sdk.ContentBlockParamUnion{OfToolResult: &block})
		default:
			return mp, fmt.Errorf("part %d: unknown part type %q", j, part.Type)
		}
	}
	return mp, nil
}

// toolParam maps a tool spec; its JSON Schema is sent unchanged.
func toolParam(t llm.ToolSpec) (sdk.ToolParam, error) {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	if !json.Valid(schema) {
		return sdk.ToolParam{}, fmt.Errorf("tool %q: input schema is not valid JSON", t.Name)
	}
	tp := sdk.ToolParam{
		Name:        t.Name,
		InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
	}
	if t.Description != "" {
		tp.Description = param.NewOpt(t.Description)
	}
	return tp, nil
}
