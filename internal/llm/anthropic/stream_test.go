package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// rawSSE serves one fixed event stream: each element is "name data".
func rawSSE(t *testing.T, events ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			name, data, _ := strings.Cut(ev, " ")
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const (
	evStart = `message_start {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-compat","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`
	evStop  = `message_stop {"type":"message_stop"}`
)

func evDelta(stop string, usage string) string {
	return `message_delta {"type":"message_delta","delta":{"stop_reason":"` + stop + `"},"usage":` + usage + `}`
}

func evToolStart(index int, id, input string) string {
	return fmt.Sprintf(`content_block_start {"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":"Read","input":%s}}`, index, id, input)
}

func evJSON(index int, partial string) string {
	b, _ := json.Marshal(partial)
	return fmt.Sprintf(`content_block_delta {"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, b)
}

func evText(index int, text string) string {
	b, _ := json.Marshal(text)
	return fmt.Sprintf(`content_block_delta {"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, index, b)
}

func TestAccumulationQuirks(t *testing.T) {
	t.Parallel()
	usage := `{"output_tokens":7}`
	tests := []struct {
		name   string
		events []string
		want   *llm.Response
	}{
		{
			name: "populated start input and repeating deltas: deltas win",
			events: []string{evStart, evToolStart(0, "t1", `{"path":"a.go"}`), evJSON(0, `{"path":`), evJSON(0, `"a.go"}`),
				`content_block_stop {"type":"content_block_stop","index":0}`, evDelta("tool_use", usage), evStop},
			want: &llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "t1", Name: "Read", Input: json.RawMessage(`{"path":"a.go"}`)}}}},
				Usage:   llm.Usage{InputTokens: 10, OutputTokens: 7}, StopReason: llm.StopToolUse, Model: "claude-compat",
			},
		},
		{
			name:   "populated start input without deltas",
			events: []string{evStart, evToolStart(0, "t1", `{"path":"b.go"}`), evDelta("tool_use", usage), evStop},
			want: &llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "t1", Name: "Read", Input: json.RawMessage(`{"path":"b.go"}`)}}}},
				Usage:   llm.Usage{InputTokens: 10, OutputTokens: 7}, StopReason: llm.StopToolUse, Model: "claude-compat",
			},
		},
		{
			name:   "empty input; end_turn with a tool call becomes tool_use",
			events: []string{evStart, evToolStart(0, "t1", `{}`), evJSON(0, ""), evDelta("end_turn", usage), evStop},
			want: &llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "t1", Name: "Read", Input: json.RawMessage(`{}`)}}}},
				Usage:   llm.Usage{InputTokens: 10, OutputTokens: 7}, StopReason: llm.StopToolUse, Model: "claude-compat",
			},
		},
		{
			name: "deltas without a block start; cumulative usage in message_delta; stop_sequence",
			events: []string{evStart, evText(0, "Hel"), evText(0, "lo"),
				evDelta("stop_sequence", `{"input_tokens":11,"cache_read_input_tokens":4,"cache_creation_input_tokens":2,"output_tokens":3}`), evStop},
			want: &llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("Hello")}},
				Usage:   llm.Usage{InputTokens: 11, OutputTokens: 3, CacheReadTokens: 4, CacheWriteTokens: 2}, StopReason: llm.StopEndTurn, Model: "claude-compat",
			},
		},
		{
			name: "max_tokens inside a tool call drops the unfinished call",
			events: []string{evStart, `content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, evText(0, "Let me"),
				evToolStart(1, "t1", `{}`), evJSON(1, `{"path":"lo`), evDelta("max_tokens", usage), evStop},
			want: &llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("Let me")}},
				Usage:   llm.Usage{InputTokens: 10, OutputTokens: 7}, StopReason: llm.StopMaxTokens, Model: "claude-compat",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, rawSSE(t, tt.events...))
			r := llmtest.Drain(t, p.Stream(callCtx(t), userRequest("hi")))
			if r.Err != nil {
				t.Fatalf("stream: %v", r.Err)
			}
			if diff := cmp.Diff(tt.want, r.Response); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMalformedStreams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		events []string
		want   string
	}{
		{"no message_stop", []string{evStart, evText(0, "hi"), evDelta("end_turn", `{"output_tokens":1}`)}, "before message_stop"},
		{"no events", nil, "without any event"},
		{"invalid tool input", []string{evStart, evToolStart(0, "t1", `{}`), evJSON(0, `{"path":`), evDelta("tool_use", `{"output_tokens":1}`), evStop}, "not valid JSON"},
		{"undecodable event", []string{evStart, `content_block_delta {"type":`}, "stream broke"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, rawSSE(t, tt.events...))
			r := llmtest.Drain(t, p.Stream(callCtx(t), userRequest("hi")))
			e, ok := r.Err.(*llm.Error)
			if !ok || e.Kind != llm.KindStream || !strings.Contains(e.Message, tt.want) {
				t.Errorf("err = %v, want a stream error containing %q", r.Err, tt.want)
			}
		})
	}
}

func TestStopReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		hasTools bool
		want     llm.StopReason
	}{
		{"end_turn", false, llm.StopEndTurn},
		{"stop_sequence", false, llm.StopEndTurn},
		{"tool_use", true, llm.StopToolUse},
		{"tool_use", false, llm.StopEndTurn},
		{"max_tokens", false, llm.StopMaxTokens},
		{"max_tokens", true, llm.StopMaxTokens},
		{"model_context_window_exceeded", false, llm.StopMaxTokens},
		{"refusal", false, llm.StopEndTurn},
		{"", true, llm.StopToolUse},
	}
	for _, tt := range tests {
		if got := stopReason(sdk.StopReason(tt.in), tt.hasTools); got != tt.want {
			t.Errorf("stopReason(%q, %v) = %q, want %q", tt.in, tt.hasTools, got, tt.want)
		}
	}
}
