package openai

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/maestro-run/maestro/internal/llm"
)

// streamResponses performs one Responses API call.
func (p *Provider) streamResponses(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		params, err := p.responsesParams(req)
		// Items finished so far, in case a compatible server's terminal
		// response leaves its output out.
		var done []indexedItem
		var final *responses.Response
		read := func(stream *ssestream.Stream[responses.ResponseStreamEventUnion]) bool {
			for stream.Next() {
				ev := stream.Current()
				switch ev.Type {
				case "response.output_text.delta":
					if ev.Delta != "" && !yield(llm.Event{Type: llm.EventTextDelta, Delta: ev.Delta}, nil) {
						return false
					}
				case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
					if ev.Delta != "" && !yield(llm.Event{Type: llm.EventThinkingDelta, Delta: ev.Delta}, nil) {
						return false
					}
				case "response.reasoning_summary_part.added":
					// Separate successive summary parts as the final message does.
					if ev.SummaryIndex > 0 && !yield(llm.Event{Type: llm.EventThinkingDelta, Delta: "\n\n"}, nil) {
						return false
					}
				case "response.output_item.done":
					done = append(done, indexedItem{ev.OutputIndex, ev.Item})
				case "response.completed", "response.incomplete":
					r := ev.Response
					final = &r
					return true
				case "response.failed":
					e := ev.Response.Error
					msg := e.Message
					if msg == "" {
						msg = "the response failed"
					}
					yield(llm.Event{}, p.eventError("", string(e.Code), msg))
					return false
				case "error":
					yield(llm.Event{}, p.eventError("", ev.Code, ev.Message))
					return false
				}
			}
			return true
		}
		finish := func() (*llm.Response, error) {
			if final == nil {
				return nil, p.incomplete("response.completed")
			}
			return p.responsesResult(final, done), nil
		}
		streamCall(ctx, p, yield, params, err, p.responses.NewStreaming, read, finish)
	}
}

type indexedItem struct {
	index int64
	item  responses.ResponseOutputItemUnion
}

// responsesResult maps the terminal response to the neutral one.
func (p *Provider) responsesResult(r *responses.Response, done []indexedItem) *llm.Response {
	output := r.Output
	if len(output) == 0 && len(done) > 0 {
		slices.SortStableFunc(done, func(a, b indexedItem) int { return int(a.index - b.index) })
		for _, d := range done {
			output = append(output, d.item)
		}
	}
	msg := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{}}
	for _, item := range output {
		switch item.Type {
		case "reasoning":
			var texts []string
			for _, s := range item.Summary {
				texts = append(texts, s.Text)
			}
			if len(texts) == 0 {
				// Compatible servers may send the raw reasoning instead.
				for _, c := range item.AsReasoning().Content {
					texts = append(texts, c.Text)
				}
			}
			if text := strings.Join(texts, "\n\n"); text != "" {
				msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartThinking, Text: text})
			}
		case "message":
			var text strings.Builder
			for _, c := range item.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
				case "refusal":
					text.WriteString(c.Refusal)
				}
			}
			if text.Len() > 0 {
				msg.Parts = append(msg.Parts, llm.Text(text.String()))
			}
		case "function_call":
			fc := item.AsFunctionCall()
			msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: fc.CallID, Name: fc.Name, Input: toolInput(fc.Arguments)}})
		}
	}
	stop := llm.StopEndTurn
	switch {
	case len(msg.ToolCalls()) > 0:
		stop = llm.StopToolUse
	case r.Status == "incomplete" && r.IncompleteDetails.Reason == "max_output_tokens":
		stop = llm.StopMaxTokens
	}
	cached := r.Usage.InputTokensDetails.CachedTokens
	model := r.Model
	if model == "" {
		model = p.cfg.Model
	}
	return &llm.Response{
		Message: msg,
		Usage: llm.Usage{
			InputTokens:     r.Usage.InputTokens - cached,
			OutputTokens:    r.Usage.OutputTokens,
			CacheReadTokens: cached,
		},
		StopReason: stop,
		Model:      model,
	}
}

// responsesParams maps req to a Responses request. Nothing is stored on
// the server: every call carries the whole conversation.
func (p *Provider) responsesParams(req *llm.Request) (responses.ResponseNewParams, error) {
	input, err := responsesInput(req.Messages)
	if err != nil {
		return responses.ResponseNewParams{}, err
	}
	params := responses.ResponseNewParams{
		Model: p.cfg.Model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Store: sdk.Bool(false),
	}
	if req.System != "" {
		params.Instructions = sdk.String(req.System)
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name:        t.Name,
			Description: param.NewOpt(t.Description),
			Parameters:  schema,
			Strict:      sdk.Bool(false),
		}})
	}
	if n := p.maxTokens(req); n > 0 {
		params.MaxOutputTokens = sdk.Int(n)
	}
	if effort := reasoningEffort(req.Thinking); effort != "" {
		params.Reasoning = shared.ReasoningParam{Effort: effort, Summary: shared.ReasoningSummaryAuto}
	}
	return params, nil
}

// responsesInput maps the conversation to input items: user messages
// (input_text, input_image), function_call_output items for tool results
// (before the rest of their user message), assistant output_text messages
// and function_call items in the order of their parts. Thinking is not
// sent back.
func responsesInput(msgs []llm.Message) (responses.ResponseInputParam, error) {
	var out responses.ResponseInputParam
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			var content responses.ResponseInputMessageContentListParam
			for _, part := range m.Parts {
				switch part.Type {
				case llm.PartToolResult:
					if part.ToolResult == nil {
						return nil, fmt.Errorf("message %d: tool_result part without a result", i)
					}
					out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
						CallID: param.NewOpt(part.ToolResult.CallID),
						Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(toolResultText(part.ToolResult))},
					}})
				case llm.PartText:
					content = append(content, responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: part.Text}})
				case llm.PartImage:
					if part.Image == nil {
						return nil, fmt.Errorf("message %d: image part without an image", i)
					}
					content = append(content, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
						ImageURL: param.NewOpt(dataURL(part.Image)),
						Detail:   responses.ResponseInputImageDetailAuto,
					}})
				case llm.PartThinking:
				default:
					return nil, fmt.Errorf("message %d: a user message cannot hold a %s part", i, part.Type)
				}
			}
			if len(content) > 0 {
				out = append(out, responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
					Role:    responses.EasyInputMessageRoleUser,
					Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: content},
				}})
			}
		case llm.RoleAssistant:
			var text strings.Builder
			flush := func() {
				if text.Len() == 0 {
					return
				}
				out = append(out, responses.ResponseInputItemUnionParam{OfOutputMessage: &responses.ResponseOutputMessageParam{
					Content: []responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{Text: text.String()}}},
				}})
				text.Reset()
			}
			for _, part := range m.Parts {
				switch part.Type {
				case llm.PartText:
					text.WriteString(part.Text)
				case llm.PartToolCall:
					if part.ToolCall == nil {
						return nil, fmt.Errorf("message %d: tool_call part without a call", i)
					}
					flush()
					out = append(out, responses.ResponseInputItemParamOfFunctionCall(toolArguments(part.ToolCall.Input), part.ToolCall.ID, part.ToolCall.Name))
				case llm.PartThinking:
				default:
					return nil, fmt.Errorf("message %d: an assistant message cannot hold a %s part", i, part.Type)
				}
			}
			flush()
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}
