package llm

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCloseToolCalls(t *testing.T) {
	t.Parallel()
	call := func(id string) Part {
		return Part{Type: PartToolCall, ToolCall: &ToolCall{ID: id, Name: "Bash", Input: json.RawMessage(`{}`)}}
	}
	result := func(id, content string, isErr bool) Part {
		return Part{Type: PartToolResult, ToolResult: &ToolResult{CallID: id, Name: "Bash", Content: content, IsError: isErr}}
	}
	interrupted := func(id string) Part { return result(id, InterruptedToolResult, true) }
	asst := func(parts ...Part) Message { return Message{Role: RoleAssistant, Parts: parts} }
	user := func(parts ...Part) Message { return Message{Role: RoleUser, Parts: parts} }

	for _, tc := range []struct {
		name     string
		in, want []Message
	}{
		{"no tool calls", []Message{UserText("hi"), asst(Text("hello"))}, nil},
		{"every call answered", []Message{UserText("hi"), asst(call("a"), call("b")), user(result("b", "2", false), result("a", "1", false))}, nil},
		// A process killed while the tool ran, then resumed: the
		// call was logged, its result never was.
		{"killed mid-tool, resumed",
			[]Message{UserText("hi"), asst(Text("Working."), call("a")), UserText("go on")},
			[]Message{UserText("hi"), asst(Text("Working."), call("a")), user(interrupted("a"), Text("go on"))}},
		{"one of two answered",
			[]Message{UserText("hi"), asst(call("a"), call("b")), user(result("a", "1", false))},
			[]Message{UserText("hi"), asst(call("a"), call("b")), user(interrupted("b"), result("a", "1", false))}},
		{"nothing after the call",
			[]Message{UserText("hi"), asst(call("a"))},
			[]Message{UserText("hi"), asst(call("a")), user(interrupted("a"))}},
		{"two assistants in a row",
			[]Message{UserText("hi"), asst(call("a")), asst(Text("again")), UserText("go on")},
			[]Message{UserText("hi"), asst(call("a")), user(interrupted("a")), asst(Text("again")), UserText("go on")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.in)
			got := CloseToolCalls(tc.in)
			want := tc.want
			if want == nil {
				want = tc.in
				if len(got) > 0 && &got[0] != &tc.in[0] {
					t.Error("nothing was missing, but the slice was copied")
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if after, _ := json.Marshal(tc.in); string(after) != string(before) {
				t.Errorf("the input was modified:\n%s\n%s", before, after)
			}
		})
	}
}

// The common case, every call answered, on a long session: what each
// model call pays for the check.
func BenchmarkCloseToolCallsAnswered(b *testing.B) {
	var msgs []Message
	for i := range 100 {
		id := string(rune('a'+i%26)) + string(rune('0'+i%10))
		msgs = append(msgs,
			Message{Role: RoleAssistant, Parts: []Part{Text("x"), {Type: PartToolCall, ToolCall: &ToolCall{ID: id, Name: "Bash"}}}},
			Message{Role: RoleUser, Parts: []Part{{Type: PartToolResult, ToolResult: &ToolResult{CallID: id, Content: "ok"}}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := CloseToolCalls(msgs); len(got) != len(msgs) {
			b.Fatal(len(got))
		}
	}
}
