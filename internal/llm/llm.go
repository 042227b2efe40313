// Package llm is Maestro's neutral model interface: messages, parts, tool
// specs, usage, and the streaming Provider that every backend implements
// (Anthropic Messages, OpenAI Chat Completions and Responses, scripted
// replay). Backends live in sub-packages; nothing here knows any SDK.
package llm

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Role is who authored a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// PartType discriminates a Part.
type PartType string

const (
	PartText       PartType = "text"
	PartThinking   PartType = "thinking"
	PartToolCall   PartType = "tool_call"
	PartToolResult PartType = "tool_result"
	PartImage      PartType = "image"
)

// Message is one conversation turn.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
	// Compaction, when set, marks a summary of the conversation before it
	// (a user message holding the summary's text): it replaces every
	// earlier message but the last Compaction.Kept, which follow it (see
	// AppendHistory).
	Compaction *Compaction `json:"compaction,omitempty"`
}

// Compaction describes a compaction summary.
type Compaction struct {
	// Kept is how many of the latest messages before the summary stay,
	// verbatim, after it.
	Kept int `json:"kept"`
	// TokensBefore and TokensAfter estimate the request before and after.
	TokensBefore int64 `json:"tokens_before"`
	TokensAfter  int64 `json:"tokens_after"`
}

// AppendHistory appends msgs to history as a conversation's consumers
// (session log, headless runtime, piece movements) must: a compaction
// summary replaces everything before it except its Kept latest messages,
// and comes first. history is not modified when a summary is applied.
func AppendHistory(history []Message, msgs ...Message) []Message {
	for _, m := range msgs {
		if m.Compaction == nil {
			history = append(history, m)
			continue
		}
		kept := history[len(history)-min(max(m.Compaction.Kept, 0), len(history)):]
		next := make([]Message, 0, 1+len(kept))
		history = append(append(next, m), kept...)
	}
	return history
}

// Part is one piece of a message. Exactly the fields of its Type are set.
type Part struct {
	Type PartType `json:"type"`
	// Text is the text of a text part or the thinking of a thinking part.
	Text string `json:"text,omitempty"`
	// Signature is the provider's opaque signature of a thinking part; it
	// must be sent back unchanged.
	Signature string `json:"signature,omitempty"`
	// ToolCall is set on tool_call parts (assistant messages).
	ToolCall *ToolCall `json:"tool_call,omitempty"`
	// ToolResult is set on tool_result parts (user messages).
	ToolResult *ToolResult `json:"tool_result,omitempty"`
	// Image is set on image parts.
	Image *Image `json:"image,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResult answers a ToolCall.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name,omitempty"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// Image is inline image data.
type Image struct {
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"`
}

// Text returns a text part.
func Text(s string) Part { return Part{Type: PartText, Text: s} }

// UserText returns a user message holding one text part.
func UserText(s string) Message { return Message{Role: RoleUser, Parts: []Part{Text(s)}} }

// TextContent concatenates the message's text parts.
func (m Message) TextContent() string {
	var s string
	for _, p := range m.Parts {
		if p.Type == PartText {
			s += p.Text
		}
	}
	return s
}

// ToolCalls returns the message's tool calls in order.
func (m Message) ToolCalls() []ToolCall {
	var calls []ToolCall
	for _, p := range m.Parts {
		if p.Type == PartToolCall && p.ToolCall != nil {
			calls = append(calls, *p.ToolCall)
		}
	}
	return calls
}

// ToolSpec describes a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ThinkingLevel is the requested reasoning effort: the protocol's
// thinking_level, defined once there.
type ThinkingLevel = protocol.ThinkingLevel

// The thinking levels, as the protocol names them.
const (
	ThinkingOff     = protocol.ThinkingOff
	ThinkingMinimal = protocol.ThinkingMinimal
	ThinkingLow     = protocol.ThinkingLow
	ThinkingMedium  = protocol.ThinkingMedium
	ThinkingHigh    = protocol.ThinkingHigh
	ThinkingUltra   = protocol.ThinkingUltra
)

// Request is one model call.
type Request struct {
	// System is the system prompt.
	System   string
	Messages []Message
	Tools    []ToolSpec
	// MaxTokens caps the response; 0 means the provider's default.
	MaxTokens int
	Thinking  ThinkingLevel
}

// Usage is the token accounting of one model call.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

// Total returns all tokens counted by u.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// ContextTokens is how much of the context window the call occupied: the
// prompt (fresh, cached and cache-written) plus the generated output.
func (u Usage) ContextTokens() int64 { return u.Total() }

// Add accumulates v into u.
func (u *Usage) Add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CacheReadTokens += v.CacheReadTokens
	u.CacheWriteTokens += v.CacheWriteTokens
}

// StopReason says why the model stopped.
type StopReason string

const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	StopAborted   StopReason = "aborted"
)

// Response is the complete result of one model call.
type Response struct {
	Message    Message
	Usage      Usage
	StopReason StopReason
	// Model is the model that answered, as the provider reports it.
	Model string
}

// EventType discriminates a streaming Event.
type EventType int

const (
	// EventTextDelta carries a piece of assistant text in Delta.
	EventTextDelta EventType = iota + 1
	// EventThinkingDelta carries a piece of thinking in Delta.
	EventThinkingDelta
	// EventDone is the last event; Response holds the complete result.
	EventDone
)

// Event is one item of a provider's stream. Partial events (deltas) are for
// live display only; the loop acts on the final EventDone response.
type Event struct {
	Type     EventType
	Delta    string
	Response *Response
}

// Provider is a model backend.
type Provider interface {
	// Name is the provider id ("anthropic", "openai", "replay", …).
	Name() string
	// Model is the model id requests are sent to.
	Model() string
	// Stream performs one model call. It yields deltas as they arrive and
	// ends with exactly one EventDone, or stops early with a non-nil error
	// (an *Error where the failure is classified). Stopping the iteration
	// early cancels the call.
	Stream(ctx context.Context, req *Request) iter.Seq2[Event, error]
}

// ModelLister is implemented by providers that can list their models (used
// to answer an unknown model with what is available).
type ModelLister interface {
	ListModels(ctx context.Context) ([]string, error)
}

// AbortedToolResult is the result a tool call cut short gets in the
// conversation (the contract's wording): an interrupt's (internal/agent),
// and a resumed log's for a call whose result never reached it
// (internal/session), so the model reads both the same way.
const AbortedToolResult = "Error: Operation aborted"
