package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/maestro-run/maestro/internal/llm"
)

// streamChat performs one Chat Completions call.
func (p *Provider) streamChat(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		params, err := p.chatParams(req)
		acc := chatAccumulator{model: p.cfg.Model}
		read := func(stream *ssestream.Stream[sdk.ChatCompletionChunk]) bool {
			for stream.Next() {
				text, thinking := acc.add(stream.Current())
				if thinking != "" && !yield(llm.Event{Type: llm.EventThinkingDelta, Delta: thinking}, nil) {
					return false
				}
				if text != "" && !yield(llm.Event{Type: llm.EventTextDelta, Delta: text}, nil) {
					return false
				}
			}
			return true
		}
		finish := func() (*llm.Response, error) {
			if acc.finish == "" {
				// The SDK ends quietly at EOF, with or without [DONE]; a
				// finish_reason is what proves the answer is complete.
				return nil, p.incomplete("a finish_reason")
			}
			return acc.response(), nil
		}
		streamCall(ctx, p, yield, params, err, p.chat.NewStreaming, read, finish)
	}
}

// streamCall is the frame of one streaming call, the same for Chat
// Completions and Responses: given the call's parameters (or the error
// building them), it opens the stream, lets read consume its events and
// then yields the outcome: a transport error, else what finish makes of
// what read gathered (the final response, or what the stream lacked).
// read returns false once it has ended the call itself (the consumer
// stopped, or it yielded an error). The request is cancelled and the
// stream closed on return.
func streamCall[P, T any](ctx context.Context, p *Provider, yield func(llm.Event, error) bool, params P, err error,
	open func(context.Context, P, ...option.RequestOption) *ssestream.Stream[T],
	read func(*ssestream.Stream[T]) bool, finish func() (*llm.Response, error)) {
	if err != nil {
		yield(llm.Event{}, badRequest(err))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := open(ctx, params)
	defer stream.Close()
	if err := stream.Err(); err != nil {
		yield(llm.Event{}, p.requestError(ctx, err))
		return
	}
	if !read(stream) {
		return
	}
	if err := stream.Err(); err != nil {
		yield(llm.Event{}, p.streamError(ctx, err))
		return
	}
	resp, err := finish()
	if err != nil {
		yield(llm.Event{}, err)
		return
	}
	yield(llm.Event{Type: llm.EventDone, Response: resp}, nil)
}

// chatParams maps req to a Chat Completions request.
func (p *Provider) chatParams(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	msgs, err := chatMessages(req.System, req.Messages)
	if err != nil {
		return sdk.ChatCompletionNewParams{}, err
	}
	params := sdk.ChatCompletionNewParams{
		Model:         p.cfg.Model,
		Messages:      msgs,
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: param.NewOpt(t.Description),
			Parameters:  schema,
		}))
	}
	if n := p.maxTokens(req); n > 0 {
		params.MaxCompletionTokens = sdk.Int(n)
	}
	params.ReasoningEffort = reasoningEffort(req.Thinking)
	return params, nil
}

// chatMessages maps the conversation to Chat Completions messages. Tool
// results become "tool" messages placed before any other content of their
// user message, so they directly follow the assistant's tool calls.
// Thinking is not sent back (compatible servers reject reasoning_content
// in requests).
func chatMessages(system string, msgs []llm.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var out []sdk.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, sdk.SystemMessage(system))
	}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			var parts []sdk.ChatCompletionContentPartUnionParam
			onlyText := true
			for _, part := range m.Parts {
				switch part.Type {
				case llm.PartToolResult:
					if part.ToolResult == nil {
						return nil, fmt.Errorf("message %d: tool_result part without a result", i)
					}
					out = append(out, sdk.ToolMessage(toolResultText(part.ToolResult), part.ToolResult.CallID))
				case llm.PartText:
					parts = append(parts, sdk.TextContentPart(part.Text))
				case llm.PartImage:
					if part.Image == nil {
						return nil, fmt.Errorf("message %d: image part without an image", i)
					}
					onlyText = false
					parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: dataURL(part.Image)}))
				case llm.PartThinking:
				default:
					return nil, fmt.Errorf("message %d: a user message cannot hold a %s part", i, part.Type)
				}
			}
			switch {
			case len(parts) == 0:
			case onlyText:
				var text strings.Builder
				for _, p := range parts {
					text.WriteString(p.OfText.Text)
				}
				out = append(out, sdk.UserMessage(text.String()))
			default:
				out = append(out, sdk.UserMessage(parts))
			}
		case llm.RoleAssistant:
			var asst sdk.ChatCompletionAssistantMessageParam
			var text strings.Builder
			for _, part := range m.Parts {
				switch part.Type {
				case llm.PartText:
					text.WriteString(part.Text)
				case llm.PartToolCall:
					if part.ToolCall == nil {
						return nil, fmt.Errorf("message %d: tool_call part without a call", i)
					}
					asst.ToolCalls = append(asst.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
						OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
							ID: part.ToolCall.ID,
							Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
								Name:      part.ToolCall.Name,
								Arguments: toolArguments(part.ToolCall.Input),
							},
						},
					})
				case llm.PartThinking:
				default:
					return nil, fmt.Errorf("message %d: an assistant message cannot hold a %s part", i, part.Type)
				}
			}
			if text.Len() > 0 {
				asst.Content.OfString = param.NewOpt(text.String())
			}
			if text.Len() == 0 && len(asst.ToolCalls) == 0 {
				continue
			}
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: &asst})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

// chatAccumulator builds the final message from the chunks themselves. It
// tolerates what compatible servers do: a whole tool call in one chunk
// together with finish_reason, missing or -1 indexes, several calls under
// one index with distinct ids, finish_reason "stop" after tool calls.
type chatAccumulator struct {
	model    string
	text     strings.Builder
	thinking strings.Builder
	calls    []*chatCall
	slots    map[int]int
	finish   string
	usage    llm.Usage
}

type chatCall struct {
	id, name string
	args     strings.Builder
}

// add folds chunk in and returns its text and thinking deltas.
func (a *chatAccumulator) add(chunk sdk.ChatCompletionChunk) (text, thinking string) {
	if chunk.Model != "" {
		a.model = chunk.Model
	}
	if chunk.JSON.Usage.Valid() {
		cached := chunk.Usage.PromptTokensDetails.CachedTokens
		a.usage = llm.Usage{
			InputTokens:     chunk.Usage.PromptTokens - cached,
			OutputTokens:    chunk.Usage.CompletionTokens,
			CacheReadTokens: cached,
		}
	}
	for _, choice := range chunk.Choices {
		if choice.Index != 0 {
			continue
		}
		d := choice.Delta
		thinking = reasoningDelta(d)
		text = d.Content
		a.thinking.WriteString(thinking)
		a.text.WriteString(text)
		for _, tc := range d.ToolCalls {
			c := a.call(tc)
			if tc.Function.Name != "" {
				c.name = tc.Function.Name
			}
			c.args.WriteString(tc.Function.Arguments)
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
	}
	return text, thinking
}

// call finds or creates the call a tool-call delta belongs to. Calls are
// kept in order of first appearance; slots maps wire indexes to them.
func (a *chatAccumulator) call(tc sdk.ChatCompletionChunkChoiceDeltaToolCall) *chatCall {
	idx := int(tc.Index)
	hasIdx := tc.JSON.Index.Valid() && idx >= 0
	pos := -1
	switch {
	case hasIdx:
		if p, ok := a.slots[idx]; ok {
			pos = p
		}
	case len(a.calls) > 0:
		pos = len(a.calls) - 1 // no index: continue the last call
	}
	if pos >= 0 && tc.ID != "" && a.calls[pos].id != "" && a.calls[pos].id != tc.ID {
		pos = -1 // a new call reusing the index
	}
	if pos < 0 {
		pos = len(a.calls)
		a.calls = append(a.calls, &chatCall{})
		if hasIdx {
			if a.slots == nil {
				a.slots = map[int]int{}
			}
			a.slots[idx] = pos
		}
	}
	c := a.calls[pos]
	if tc.ID != "" {
		c.id = tc.ID
	}
	return c
}

// response is the accumulated answer.
func (a *chatAccumulator) response() *llm.Response {
	msg := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{}}
	if a.thinking.Len() > 0 {
		msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartThinking, Text: a.thinking.String()})
	}
	if a.text.Len() > 0 {
		msg.Parts = append(msg.Parts, llm.Text(a.text.String()))
	}
	for i, c := range a.calls {
		if c.name == "" && c.args.Len() == 0 {
			continue // nothing but an id: not a call
		}
		id := c.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: c.name, Input: toolInput(c.args.String())}})
	}
	stop := llm.StopEndTurn
	switch {
	case len(msg.ToolCalls()) > 0:
		stop = llm.StopToolUse
	case a.finish == "length":
		stop = llm.StopMaxTokens
	}
	return &llm.Response{Message: msg, Usage: a.usage, StopReason: stop, Model: a.model}
}

// reasoningDelta returns the reasoning text of a delta. OpenAI does not
// stream reasoning on Chat Completions; compatible servers put it in
// reasoning_content (vLLM, DeepSeek, LM Studio) or reasoning (Ollama,
// OpenRouter).
func reasoningDelta(d sdk.ChatCompletionChunkChoiceDelta) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[key]
		if !ok || f.Raw() == "" || f.Raw() == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal([]byte(f.Raw()), &s); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// reasoningEffort maps a thinking level; "" (not sent) for none or off.
func reasoningEffort(level llm.ThinkingLevel) shared.ReasoningEffort {
	switch level {
	case llm.ThinkingMinimal:
		return shared.ReasoningEffortMinimal
	case llm.ThinkingLow:
		return shared.ReasoningEffortLow
	case llm.ThinkingMedium:
		return shared.ReasoningEffortMedium
	case llm.ThinkingHigh, llm.ThinkingUltra:
		return shared.ReasoningEffortHigh
	}
	return ""
}

// toolSchema decodes a tool's JSON schema; an empty schema is an object
// without properties.
func toolSchema(t llm.ToolSpec) (map[string]any, error) {
	if len(t.InputSchema) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
		return nil, fmt.Errorf("tool %s: input schema is not a JSON object: %w", t.Name, err)
	}
	return schema, nil
}

// toolInput turns streamed arguments into a ToolCall input. Arguments that
// are not valid JSON (a truncated or malformed call) are kept as a JSON
// string, so the message stays serialisable, the tool reports the bad
// input to the model, and toolArguments can send the original text back.
func toolInput(args string) json.RawMessage {
	switch {
	case strings.TrimSpace(args) == "":
		return json.RawMessage(`{}`)
	case json.Valid([]byte(args)):
		return json.RawMessage(args)
	default:
		b, _ := json.Marshal(args)
		return b
	}
}

// toolArguments is the inverse of toolInput.
func toolArguments(input json.RawMessage) string {
	if len(input) == 0 {
		return "{}"
	}
	if input[0] == '"' {
		var s string
		if json.Unmarshal(input, &s) == nil {
			return s
		}
	}
	return string(input)
}

// toolResultText is a result's content; failures are marked for models
// that have no is_error field to read.
func toolResultText(r *llm.ToolResult) string {
	if r.IsError {
		return "Error: " + r.Content
	}
	return r.Content
}

func dataURL(img *llm.Image) string {
	return "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}
