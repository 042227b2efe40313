package session

import (
	"slices"

	"github.com/maestro-run/maestro/internal/llm"
)

// unfinishedText is the result a resumed conversation gives a tool call
// whose result never reached the log: the process ended (killed, crashed,
// drained) while the call ran.
const unfinishedText = llm.AbortedToolResult

// closeToolCalls returns history with every tool call answered. Model
// APIs refuse a conversation in which an assistant's tool call is not
// answered by a tool result in the next message (Anthropic: "tool_use ids
// were found without tool_result blocks"; OpenAI: "must be followed by
// tool messages"), so a session whose process died during a tool call
// could never be resumed: every later request failed. A call without a
// result gets an error result: in front of the next user message's parts
// when there is one (tool results come first), else in a user message of
// its own. history itself is not modified; the log is not rewritten.
func closeToolCalls(history []llm.Message) []llm.Message {
	var out []llm.Message
	for i, m := range history {
		calls := m.ToolCalls()
		if m.Role != llm.RoleAssistant || len(calls) == 0 {
			continue
		}
		var next *llm.Message
		if i+1 < len(history) && history[i+1].Role == llm.RoleUser {
			next = &history[i+1]
		}
		var missing []llm.Part
		for _, c := range calls {
			if next == nil || !answers(*next, c.ID) {
				missing = append(missing, llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{
					CallID: c.ID, Name: c.Name, Content: unfinishedText, IsError: true,
				}})
			}
		}
		if len(missing) == 0 {
			continue
		}
		if out == nil {
			out = slices.Clone(history)
		}
		// Index in out: every earlier repair inserted at most one message.
		j := i + len(out) - len(history)
		if next == nil {
			out = slices.Insert(out, j+1, llm.Message{Role: llm.RoleUser, Parts: missing})
			continue
		}
		fixed := out[j+1]
		fixed.Parts = append(missing, fixed.Parts...)
		out[j+1] = fixed
	}
	if out == nil {
		return history
	}
	return out
}

// answers reports whether m holds a tool result for the call id.
func answers(m llm.Message, id string) bool {
	return slices.ContainsFunc(m.Parts, func(p llm.Part) bool {
		return p.Type == llm.PartToolResult && p.ToolResult != nil && p.ToolResult.CallID == id
	})
}
