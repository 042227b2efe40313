package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/maestro-run/maestro/internal/llm"
)

// block is one content block being accumulated.
type block struct {
	typ       string // text, thinking, tool_use, or another API block type
	text      strings.Builder
	thinking  strings.Builder
	signature strings.Builder
	id, name  string
	// startInput is the input carried by content_block_start; deltaInput
	// the concatenated input_json_delta fragments, which win when present.
	startInput string
	deltaInput strings.Builder
	gotDelta   bool
}

// accumulator builds the final response from stream events. It tolerates
// compatible servers that deviate from the API: blocks addressed before
// their start event, and tool_use starts that carry the whole input while
// the deltas repeat it.
type accumulator struct {
	started, stopped bool
	model            string
	blocks           []*block
	byIndex          map[int64]*block
	usage            llm.Usage
	stopReason       sdk.StopReason
}

// blockAt returns the block at index, creating one of type typ when the
// stream addresses an index it has not started.
func (a *accumulator) blockAt(index int64, typ string) *block {
	if b, ok := a.byIndex[index]; ok {
		return b
	}
	if a.byIndex == nil {
		a.byIndex = map[int64]*block{}
	}
	b := &block{typ: typ}
	a.byIndex[index] = b
	a.blocks = append(a.blocks, b)
	return b
}

// add applies one event and returns the delta event to show, if any
// (Type 0 otherwise).
func (a *accumulator) add(ev sdk.MessageStreamEventUnion) (llm.Event, error) {
	switch ev.Type {
	case "message_start":
		a.started = true
		a.model = ev.Message.Model
		u := ev.Message.Usage
		a.usage = llm.Usage{
			InputTokens:      u.InputTokens,
			OutputTokens:     u.OutputTokens,
			CacheReadTokens:  u.CacheReadInputTokens,
			CacheWriteTokens: u.CacheCreationInputTokens,
		}
	case "content_block_start":
		a.started = true
		cb := ev.ContentBlock
		b := a.blockAt(ev.Index, cb.Type)
		b.typ = cb.Type
		switch cb.Type {
		case "text":
			b.text.WriteString(cb.Text)
		case "thinking":
			b.thinking.WriteString(cb.Thinking)
			b.signature.WriteString(cb.Signature)
		case "tool_use":
			b.id, b.name = cb.ID, cb.Name
			b.startInput = cb.JSON.Input.Raw()
		}
	case "content_block_delta":
		a.started = true
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			a.blockAt(ev.Index, "text").text.WriteString(d.Text)
			if d.Text != "" {
				return llm.Event{Type: llm.EventTextDelta, Delta: d.Text}, nil
			}
		case "thinking_delta":
			a.blockAt(ev.Index, "thinking").thinking.WriteString(d.Thinking)
			if d.Thinking != "" {
				return llm.Event{Type: llm.EventThinkingDelta, Delta: d.Thinking}, nil
			}
		case "signature_delta":
			a.blockAt(ev.Index, "thinking").signature.WriteString(d.Signature)
		case "input_json_delta":
			b := a.blockAt(ev.Index, "tool_use")
			b.gotDelta = true
			b.deltaInput.WriteString(d.PartialJSON)
		}
	case "message_delta":
		a.stopReason = ev.Delta.StopReason
		u := ev.Usage
		// Every count here is a cumulative total; input counts are only
		// present on some servers and keep message_start's otherwise.
		a.usage.OutputTokens = u.OutputTokens
		if u.JSON.InputTokens.Valid() {
			a.usage.InputTokens = u.InputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			a.usage.CacheReadTokens = u.CacheReadInputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			a.usage.CacheWriteTokens = u.CacheCreationInputTokens
		}
	case "message_stop":
		a.stopped = true
	}
	return llm.Event{}, nil
}

// toolInput returns a tool_use block's final input: the streamed deltas
// when there were any, else the start event's input, "{}" when empty.
func (b *block) toolInput() json.RawMessage {
	raw := b.startInput
	if b.gotDelta {
		raw = b.deltaInput.String()
	}
	raw = strings.TrimSpace(raw)
	if raw == "" || raw == "null" {
		raw = "{}"
	}
	return json.RawMessage(raw)
}

// stopReason maps the API's stop reason. Apart from a token limit, the
// presence of tool calls decides between tool_use and end_turn, so that a
// compatible server reporting end_turn with tool calls (or tool_use without
// any) cannot stall the agent loop.
func stopReason(r sdk.StopReason, hasTools bool) llm.StopReason {
	switch {
	case r == sdk.StopReasonMaxTokens || r == "model_context_window_exceeded":
		return llm.StopMaxTokens
	case hasTools:
		return llm.StopToolUse
	default:
		// end_turn, stop_sequence, refusal, pause_turn, or missing.
		return llm.StopEndTurn
	}
}

// response returns the complete response of a finished stream.
func (a *accumulator) response(defaultModel string) (*llm.Response, error) {
	msg := llm.Message{Role: llm.RoleAssistant}
	truncated := a.stopReason == sdk.StopReasonMaxTokens
	hasTools := false
	for _, b := range a.blocks {
		switch b.typ {
		case "thinking":
			if b.thinking.Len() > 0 || b.signature.Len() > 0 {
				msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartThinking, Text: b.thinking.String(), Signature: b.signature.String()})
			}
		case "text":
			if b.text.Len() > 0 {
				msg.Parts = append(msg.Parts, llm.Text(b.text.String()))
			}
		case "tool_use":
			input := b.toolInput()
			if !json.Valid(input) {
				if truncated {
					// The response was cut at max_tokens inside the call.
					continue
				}
				return nil, fmt.Errorf("tool call %s (%s): input is not valid JSON: %.200s", b.id, b.name, input)
			}
			hasTools = true
			msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: b.id, Name: b.name, Input: input}})
		}
	}
	model := a.model
	if model == "" {
		model = defaultModel
	}
	return &llm.Response{
		Message:    msg,
		Usage:      a.usage,
		StopReason: stopReason(a.stopReason, hasTools),
		Model:      model,
	}, nil
}
