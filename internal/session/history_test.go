package session

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
)

func call(id string) llm.Part {
	return llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: "Bash", Input: json.RawMessage(`{}`)}}
}

func result(id, content string, isErr bool) llm.Part {
	return llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: id, Name: "Bash", Content: content, IsError: isErr}}
}

// TestResumeAfterKillDuringTool: a process killed while a tool call ran
// leaves an assistant tool call without a result at the end of the log.
// Resuming gives the model an error result for it, so the next request is
// a valid conversation (before, every request of the resumed session was
// refused by the model API). Calls answered in the log keep their result,
// and a log already holding a prompt after the unanswered call (resumed
// before the fix) gets the result in front of that prompt.
func TestResumeAfterKillDuringTool(t *testing.T) {
	t.Parallel()
	asst := func(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleAssistant, Parts: parts} }
	user := func(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleUser, Parts: parts} }
	aborted := func(id string) llm.Part { return result(id, unfinishedText, true) }
	tests := []struct {
		name      string
		log, want []llm.Message
	}{
		{
			name: "killed during the last call",
			log:  []llm.Message{llm.UserText("go"), asst(llm.Text("running"), call("a"), call("b"))},
			want: []llm.Message{llm.UserText("go"), asst(llm.Text("running"), call("a"), call("b")), user(aborted("a"), aborted("b"))},
		},
		{
			name: "one of two calls answered",
			log:  []llm.Message{llm.UserText("go"), asst(call("a"), call("b")), user(result("a", "ok", false))},
			want: []llm.Message{llm.UserText("go"), asst(call("a"), call("b")), user(aborted("b"), result("a", "ok", false))},
		},
		{
			name: "a prompt followed the unanswered call",
			log:  []llm.Message{llm.UserText("go"), asst(call("a")), llm.UserText("again"), asst(llm.Text("hi"), call("c"))},
			want: []llm.Message{llm.UserText("go"), asst(call("a")), user(aborted("a"), llm.Text("again")), asst(llm.Text("hi"), call("c")), user(aborted("c"))},
		},
		{
			name: "every call answered",
			log:  []llm.Message{llm.UserText("go"), asst(call("a")), user(result("a", "ok", false)), asst(llm.Text("done"))},
			want: []llm.Message{llm.UserText("go"), asst(call("a")), user(result("a", "ok", false)), asst(llm.Text("done"))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := NewStore(t.TempDir())
			s, err := store.Create(Meta{})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tt.log {
				s.Message(m)
			}
			if d := cmp.Diff(tt.log, s.History()); d != "" {
				t.Errorf("live history changed (-want +got):\n%s", d)
			}
			var log bytes.Buffer
			if err := s.ExportTo(&log); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := store.Open(s.ID())
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if d := cmp.Diff(tt.want, s2.History()); d != "" {
				t.Errorf("resumed history (-want +got):\n%s", d)
			}
			// A drained session restored elsewhere is read the same way.
			s3, err := NewStore(t.TempDir()).Import(Meta{}, &log, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer s3.Close()
			if d := cmp.Diff(tt.want, s3.History()); d != "" {
				t.Errorf("imported history (-want +got):\n%s", d)
			}
		})
	}
}

// BenchmarkOpenToolHistory opens (resumes) a session whose log holds
// 2,000 tool round trips: what resuming costs, closeToolCalls included.
func BenchmarkOpenToolHistory(b *testing.B) {
	store := NewStore(b.TempDir())
	s, err := store.Create(Meta{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 2000 {
		id := "call_" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		s.Message(llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("working"), call(id)}})
		s.Message(llm.Message{Role: llm.RoleUser, Parts: []llm.Part{result(id, "ok", false)}})
	}
	id := s.ID()
	s.Close()
	for b.Loop() {
		s, err := store.Open(id)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkCloseToolCalls is closeToolCalls alone on the history of
// BenchmarkOpenToolHistory (every call answered: nothing to add).
func BenchmarkCloseToolCalls(b *testing.B) {
	var h []llm.Message
	for i := range 2000 {
		id := "call_" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		h = append(h, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("working"), call(id)}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{result(id, "ok", false)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		closeToolCalls(h)
	}
}
