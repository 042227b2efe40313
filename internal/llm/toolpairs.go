package llm

// InterruptedToolResult is the result CloseToolCalls gives a tool call
// that has none in the conversation.
const InterruptedToolResult = "The tool call did not complete: the run stopped (interrupted or crashed) before it returned, so its effect is unknown."

// CloseToolCalls returns msgs where every tool call of an assistant
// message is answered in the user message that follows it, as the
// providers' APIs require (Anthropic refuses a tool_use without its
// tool_result, OpenAI an assistant tool_calls message not followed by a
// tool message per call). A session whose process died while a tool ran
// (SIGKILL, a closed terminal, a crash) logged the call but no result;
// resuming it must not fail on every model call. A missing result is
// added, first in the next user message (a new one when none follows),
// as an error saying the call did not complete. msgs is returned as it
// is when nothing is missing, and is never modified.
func CloseToolCalls(msgs []Message) []Message {
	var out []Message // nil until a result is missing
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if out != nil {
			out = append(out, m)
		}
		if m.Role != RoleAssistant {
			continue
		}
		var next *Message
		if i+1 < len(msgs) && msgs[i+1].Role == RoleUser {
			next = &msgs[i+1]
		}
		missing := unanswered(m, next)
		if len(missing) == 0 {
			continue
		}
		if out == nil {
			out = append(make([]Message, 0, len(msgs)+1), msgs[:i+1]...)
		}
		parts := make([]Part, 0, len(missing))
		for _, c := range missing {
			parts = append(parts, Part{Type: PartToolResult, ToolResult: &ToolResult{CallID: c.ID, Name: c.Name, Content: InterruptedToolResult, IsError: true}})
		}
		if next == nil {
			out = append(out, Message{Role: RoleUser, Parts: parts})
			continue
		}
		answered := *next
		answered.Parts = append(parts, next.Parts...)
		out = append(out, answered)
		i++ // next is in out already
	}
	if out == nil {
		return msgs
	}
	return out
}

// unanswered lists the tool calls of m that next (nil: no user message
// follows) holds no result for.
func unanswered(m Message, next *Message) []ToolCall {
	var missing []ToolCall
	for _, p := range m.Parts {
		if p.Type != PartToolCall || p.ToolCall == nil {
			continue
		}
		found := false
		if next != nil {
			for _, q := range next.Parts {
				if q.Type == PartToolResult && q.ToolResult != nil && q.ToolResult.CallID == p.ToolCall.ID {
					found = true
					break
				}
			}
		}
		if !found {
			missing = append(missing, *p.ToolCall)
		}
	}
	return missing
}
