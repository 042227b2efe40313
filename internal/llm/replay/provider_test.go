package replay

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
)

func mustParse(t testing.TB, doc string) *Scenario {
	t.Helper()
	s, err := Parse([]byte(doc), "test.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

// scenarioYAML wraps frames (YAML list items, indented by two spaces) in a
// valid scenario with id "t".
func scenarioYAML(tools, frames string) string {
	return `schemaVersion: evalops.maestro.scripted-scenario.v1
id: t
description: provider test
metadata:
  recordedAt: "2026-01-02T03:04:05Z"
  toolsExpected: [` + tools + `]
frames:
` + frames
}

// delta is a streamed delta as "text:…" or "thinking:…".
type delta string

type played struct {
	deltas []delta
	resp   *llm.Response
	err    error
}

func collect(seq iter.Seq2[llm.Event, error]) played {
	var p played
	for ev, err := range seq {
		if err != nil {
			p.err = err
			break
		}
		switch ev.Type {
		case llm.EventTextDelta:
			p.deltas = append(p.deltas, delta("text:"+ev.Delta))
		case llm.EventThinkingDelta:
			p.deltas = append(p.deltas, delta("thinking:"+ev.Delta))
		case llm.EventDone:
			if p.resp != nil {
				p.err = errors.New("two EventDone events")
			}
			p.resp = ev.Response
		}
	}
	return p
}

// history returns a request at frame k: a prompt, then k assistant
// messages each followed by a user message.
func history(k int) *llm.Request {
	msgs := []llm.Message{llm.UserText("go")}
	for range k {
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("earlier")}}, llm.UserText("next"))
	}
	return &llm.Request{Messages: msgs}
}

func TestProviderIdentity(t *testing.T) {
	t.Parallel()
	p := New(Demo())
	var _ llm.Provider = p
	if p.Name() != "replay" || p.Model() != "maestro-replay-v1" {
		t.Errorf("Name, Model = %q, %q", p.Name(), p.Model())
	}
	if p.Scenario().ID != "maestro-demo" {
		t.Errorf("Scenario().ID = %q", p.Scenario().ID)
	}
}

func TestPlayback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		tools      string
		frames     string
		wantDeltas []delta
		wantParts  []llm.Part
		wantUsage  llm.Usage
		wantStop   llm.StopReason
	}{
		{
			name: "text is one delta",
			frames: `  - index: 0
    statements:
      - {kind: text, text: "Hello, world."}
`,
			wantDeltas: []delta{"text:Hello, world."},
			wantParts:  []llm.Part{llm.Text("Hello, world.")},
			wantStop:   llm.StopEndTurn,
		},
		{
			name: "chunks are the deltas, adjacent text merges into one part",
			frames: `  - index: 0
    statements:
      - {kind: text, chunks: ["Hel", "lo"]}
      - {kind: usage, output_tokens: 3}
      - {kind: text, text: " there", chunks: [" the", "", "re"]}
`,
			wantDeltas: []delta{"text:Hel", "text:lo", "text: the", "text:re"},
			wantParts:  []llm.Part{llm.Text("Hello there")},
			wantUsage:  llm.Usage{OutputTokens: 3},
			wantStop:   llm.StopEndTurn,
		},
		{
			name: "thinking then text, usage statements add up",
			frames: `  - index: 0
    statements:
      - {kind: thinking, text: "Let me see."}
      - {kind: usage, input_tokens: 10, cache_read_tokens: 4}
      - {kind: text, text: "Seen."}
      - {kind: usage, input_tokens: 1, output_tokens: 7, cache_write_tokens: 2}
`,
			wantDeltas: []delta{"thinking:Let me see.", "text:Seen."},
			wantParts:  []llm.Part{{Type: llm.PartThinking, Text: "Let me see."}, llm.Text("Seen.")},
			wantUsage:  llm.Usage{InputTokens: 11, OutputTokens: 7, CacheReadTokens: 4, CacheWriteTokens: 2},
			wantStop:   llm.StopEndTurn,
		},
		{
			name:  "tool calls get default ids and {} input, stop tool_use",
			tools: "Read, Bash",
			frames: `  - index: 0
    statements:
      - {kind: text, text: "Looking."}
      - {kind: tool_call, tool: Read}
      - {kind: tool_call, tool: Bash, id: my-id, input: {command: "ls && wc -l x"}}
      - {kind: text, text: "More."}
`,
			wantDeltas: []delta{"text:Looking.", "text:More."},
			wantParts: []llm.Part{
				llm.Text("Looking."),
				{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "replay_t_000_001", Name: "Read", Input: json.RawMessage(`{}`)}},
				{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "my-id", Name: "Bash", Input: json.RawMessage(`{"command":"ls && wc -l x"}`)}},
				llm.Text("More."),
			},
			wantStop: llm.StopToolUse,
		},
		{
			name: "end complete is end_turn",
			frames: `  - index: 0
    statements:
      - {kind: text, text: "Done."}
      - {kind: end, reason: complete}
`,
			wantDeltas: []delta{"text:Done."},
			wantParts:  []llm.Part{llm.Text("Done.")},
			wantStop:   llm.StopEndTurn,
		},
		{
			name: "end aborted",
			frames: `  - index: 0
    statements:
      - {kind: end, reason: aborted}
`,
			wantParts: []llm.Part{},
			wantStop:  llm.StopAborted,
		},
		{
			name:  "end limit_exceeded is max_tokens even with tool calls",
			tools: "Read",
			frames: `  - index: 0
    statements:
      - {kind: tool_call, tool: Read, input: {path: a}}
      - {kind: end, reason: limit_exceeded}
`,
			wantParts: []llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "replay_t_000_000", Name: "Read", Input: json.RawMessage(`{"path":"a"}`)}}},
			wantStop:  llm.StopMaxTokens,
		},
		{
			name: "wait_for_user is end_turn",
			frames: `  - index: 0
    statements:
      - {kind: text, text: "Which file?"}
      - {kind: wait_for_user}
`,
			wantDeltas: []delta{"text:Which file?"},
			wantParts:  []llm.Part{llm.Text("Which file?")},
			wantStop:   llm.StopEndTurn,
		},
		{
			name: "zero delay plays straight through",
			frames: `  - index: 0
    statements:
      - {kind: delay, ms: 0}
      - {kind: text, text: "x"}
`,
			wantDeltas: []delta{"text:x"},
			wantParts:  []llm.Part{llm.Text("x")},
			wantStop:   llm.StopEndTurn,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := New(mustParse(t, scenarioYAML(tt.tools, tt.frames)))
			got := collect(p.Stream(t.Context(), history(0)))
			if got.err != nil {
				t.Fatalf("Stream error: %v", got.err)
			}
			if diff := cmp.Diff(tt.wantDeltas, got.deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			want := &llm.Response{
				Message:    llm.Message{Role: llm.RoleAssistant, Parts: tt.wantParts},
				Usage:      tt.wantUsage,
				StopReason: tt.wantStop,
				Model:      "maestro-replay-v1",
			}
			if diff := cmp.Diff(want, got.resp, cmpScenario...); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorStatements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		typ      string
		wantKind llm.ErrorKind
		wantMsg  string
	}{
		{"transient", "transient", llm.KindStream, "The upstream hiccupped. Try again."},
		{"fatal", "fatal", llm.KindScript, "The upstream hiccupped."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, scenarioYAML("", `  - index: 0
    statements:
      - {kind: text, chunks: ["par", "tial"]}
      - {kind: error, type: `+tt.typ+`, message: "The upstream hiccupped."}
`))
			got := collect(New(s).Stream(t.Context(), history(0)))
			if diff := cmp.Diff([]delta{"text:par", "text:tial"}, got.deltas); diff != "" {
				t.Errorf("deltas before the error (-want +got):\n%s", diff)
			}
			if got.resp != nil {
				t.Errorf("got a response %+v, want none", got.resp)
			}
			e, ok := errors.AsType[*llm.Error](got.err)
			if !ok {
				t.Fatalf("error = %v, want an *llm.Error", got.err)
			}
			if e.Kind != tt.wantKind || e.Message != tt.wantMsg || e.Provider != "replay" {
				t.Errorf("error = {Kind %q, Message %q, Provider %q}, want {%q, %q, replay}", e.Kind, e.Message, e.Provider, tt.wantKind, tt.wantMsg)
			}
			if got, want := e.Transient(), tt.typ == "transient"; got != want {
				t.Errorf("Transient() = %v, want %v", got, want)
			}
		})
	}
}

// TestFrameSelection checks that each call plays frame k = the number of
// assistant messages in the request, whatever the other messages are.
func TestFrameSelection(t *testing.T) {
	t.Parallel()
	s := mustParse(t, scenarioYAML("", `  - index: 0
    statements: [{kind: text, text: zero}]
  - index: 1
    statements: [{kind: text, text: one}]
  - index: 2
    statements: [{kind: text, text: two}]
`))
	p := New(s)
	for k, want := range []string{"zero", "one", "two"} {
		for attempt := range 2 { // a retry replays the same frame
			got := collect(p.Stream(t.Context(), history(k)))
			if got.err != nil {
				t.Fatalf("frame %d attempt %d: %v", k, attempt, got.err)
			}
			if text := got.resp.Message.TextContent(); text != want {
				t.Errorf("frame %d attempt %d played %q, want %q", k, attempt, text, want)
			}
		}
	}
	// A resumed session: a long history with tool results and several
	// user messages in a row still counts assistant messages only.
	req := &llm.Request{Messages: []llm.Message{
		llm.UserText("a"), llm.UserText("b"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("x")}},
		llm.UserText("c"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("y")}},
		llm.UserText("d"),
	}}
	if got := collect(p.Stream(t.Context(), req)); got.err != nil || got.resp.Message.TextContent() != "two" {
		t.Errorf("resumed history played %+v, %v; want frame 2", got.resp, got.err)
	}
}

func TestPastTheLastFrame(t *testing.T) {
	t.Parallel()
	s := mustParse(t, scenarioYAML("", `  - index: 0
    statements: [{kind: text, text: only}]
`))
	got := collect(New(s).Stream(t.Context(), history(1)))
	e, ok := errors.AsType[*llm.Error](got.err)
	if !ok || e.Kind != llm.KindScript {
		t.Fatalf("error = %v, want a script *llm.Error", got.err)
	}
	want := "scripted scenario t complete: the model was called for frame 1 but the scenario has 1 frames"
	if e.Message != want {
		t.Errorf("message = %q, want %q", e.Message, want)
	}
	if len(got.deltas) != 0 || got.resp != nil {
		t.Errorf("played something past the end: %v %+v", got.deltas, got.resp)
	}
}

// toolTurn is a request at frame 1 of a scenario whose frame 0 called
// tools: the assistant message, then the tool results.
func toolTurn(results ...llm.ToolResult) *llm.Request {
	user := llm.Message{Role: llm.RoleUser}
	for _, r := range results {
		user.Parts = append(user.Parts, llm.Part{Type: llm.PartToolResult, ToolResult: &r})
	}
	return &llm.Request{Messages: []llm.Message{
		llm.UserText("go"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("calling")}},
		user,
	}}
}

func TestExpectedResult(t *testing.T) {
	t.Parallel()
	s := mustParse(t, scenarioYAML("Read, Bash", `  - index: 0
    statements:
      - {kind: tool_call, tool: Read, expectedResult: success}
      - {kind: tool_call, tool: Bash, id: b, expectedResult: error}
      - {kind: tool_call, tool: Read, id: c, expectedResult: any}
      - {kind: tool_call, tool: Read, id: d}
  - index: 1
    statements: [{kind: text, text: next}]
`))
	ok := func(id string) llm.ToolResult { return llm.ToolResult{CallID: id, Content: "fine"} }
	bad := func(id string) llm.ToolResult {
		return llm.ToolResult{CallID: id, Content: "Error: exit status 2\nno such file", IsError: true}
	}
	tests := []struct {
		name string
		req  *llm.Request
		want string // "" = frame 1 plays
	}{
		{"as expected", toolTurn(ok("replay_t_000_000"), bad("b"), bad("c"), bad("d")), ""},
		{"any and unset accept success too", toolTurn(ok("replay_t_000_000"), bad("b"), ok("c"), ok("d")), ""},
		{"success expected, error got", toolTurn(bad("replay_t_000_000"), bad("b"), ok("c"), ok("d")),
			"scripted scenario t cannot play frame 1: frame 0's Read call replay_t_000_000 was expected to end with success, but it ended with error: Error: exit status 2 no such file"},
		{"error expected, success got", toolTurn(ok("replay_t_000_000"), ok("b"), ok("c"), ok("d")),
			"scripted scenario t cannot play frame 1: frame 0's Bash call b was expected to end with error, but it ended with success: fine"},
		{"both wrong", toolTurn(bad("replay_t_000_000"), ok("b")),
			"scripted scenario t cannot play frame 1: frame 0's Read call replay_t_000_000 was expected to end with success, but it ended with error: Error: exit status 2 no such file; " +
				"frame 0's Bash call b was expected to end with error, but it ended with success: fine"},
		{"result missing", toolTurn(bad("b")),
			"scripted scenario t cannot play frame 1: frame 0's Read call replay_t_000_000 was expected to end with success, but the request carries no result for it"},
		{"no user message after the call", &llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant}}},
			"scripted scenario t cannot play frame 1: frame 0's Read call replay_t_000_000 was expected to end with success, but the request carries no result for it; " +
				"frame 0's Bash call b was expected to end with error, but the request carries no result for it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := collect(New(s).Stream(t.Context(), tt.req))
			if tt.want == "" {
				if got.err != nil || got.resp.Message.TextContent() != "next" {
					t.Fatalf("got %+v, %v; want frame 1 to play", got.resp, got.err)
				}
				return
			}
			e, ok := errors.AsType[*llm.Error](got.err)
			if !ok || e.Kind != llm.KindScript {
				t.Fatalf("error = %v, want a script *llm.Error", got.err)
			}
			if e.Message != tt.want {
				t.Errorf("message =\n%s\nwant\n%s", e.Message, tt.want)
			}
			if len(got.deltas) != 0 {
				t.Errorf("frame 1 started playing: %v", got.deltas)
			}
		})
	}
}

// TestExpectedResultSkippedAfterErrorFrame: a frame that failed with an
// error statement never made its tool calls, so the next frame does not
// check them.
func TestExpectedResultSkippedAfterErrorFrame(t *testing.T) {
	t.Parallel()
	s := mustParse(t, scenarioYAML("Read", `  - index: 0
    statements:
      - {kind: text, text: "trying"}
      - {kind: tool_call, tool: Read, expectedResult: success}
      - {kind: error, type: transient, message: "Cut."}
  - index: 1
    statements: [{kind: text, text: recovered}]
`))
	got := collect(New(s).Stream(t.Context(), history(1)))
	if got.err != nil || got.resp.Message.TextContent() != "recovered" {
		t.Fatalf("got %+v, %v; want frame 1 to play", got.resp, got.err)
	}
}

// TestStreamMsTiming: with streamMs, text streams one rune (or chunk) per
// delta with the time spread evenly; delays wait exactly their ms.
func TestStreamMsTiming(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := mustParse(t, scenarioYAML("", `  - index: 0
    statements:
      - {kind: text, text: "héé!", streamMs: 400}
      - {kind: delay, ms: 250}
      - {kind: text, chunks: ["ab", "cd"], streamMs: 100}
      - {kind: text, text: "end"}
`))
		start := time.Now()
		type stamp struct {
			D  string
			At time.Duration
		}
		var got []stamp
		var resp *llm.Response
		for ev, err := range New(s).Stream(t.Context(), history(0)) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == llm.EventDone {
				resp = ev.Response
				continue
			}
			got = append(got, stamp{ev.Delta, time.Since(start)})
		}
		ms := time.Millisecond
		want := []stamp{
			{"h", 100 * ms}, {"é", 200 * ms}, {"é", 300 * ms}, {"!", 400 * ms},
			{"ab", 700 * ms}, {"cd", 750 * ms},
			{"end", 750 * ms},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("deltas and times (-want +got):\n%s", diff)
		}
		if resp == nil || resp.Message.TextContent() != "héé!abcdend" {
			t.Errorf("response = %+v", resp)
		}
	})
}

// TestCancelDuringDelay: cancelling the context during a long delay (or a
// slow stream) ends the call at once with a cancelled error.
func TestCancelDuringDelay(t *testing.T) {
	t.Parallel()
	for _, stmt := range []string{
		"{kind: delay, ms: 3600000}",
		"{kind: text, text: abc, streamMs: 3600000}",
	} {
		t.Run(stmt, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := mustParse(t, scenarioYAML("", `  - index: 0
    statements:
      - {kind: text, text: "before"}
      - `+stmt+`
      - {kind: text, text: "after"}
`))
				ctx, cancel := context.WithCancel(t.Context())
				start := time.Now()
				done := make(chan played)
				go func() { done <- collect(New(s).Stream(ctx, history(0))) }()
				synctest.Wait() // the stream is blocked in its wait
				cancel()
				got := <-done
				if elapsed := time.Since(start); elapsed != 0 {
					t.Errorf("returned after %v of (fake) time, want at once", elapsed)
				}
				if diff := cmp.Diff([]delta{"text:before"}, got.deltas); diff != "" {
					t.Errorf("deltas (-want +got):\n%s", diff)
				}
				if llm.KindOf(got.err) != llm.KindCancelled || !errors.Is(got.err, context.Canceled) {
					t.Errorf("error = %v, want a cancelled error wrapping context.Canceled", got.err)
				}
				if got.resp != nil {
					t.Errorf("got a response after cancel")
				}
			})
		})
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	got := collect(New(Demo()).Stream(ctx, history(0)))
	if llm.KindOf(got.err) != llm.KindCancelled || len(got.deltas) != 0 {
		t.Errorf("got %v, %v; want an immediate cancelled error", got.deltas, got.err)
	}
}

// TestStopIterationEarly: a consumer that stops ranging must not be
// yielded to again (range-over-func would panic).
func TestStopIterationEarly(t *testing.T) {
	t.Parallel()
	s := mustParse(t, scenarioYAML("", `  - index: 0
    statements:
      - {kind: text, chunks: [a, b, c]}
      - {kind: thinking, text: t}
`))
	n := 0
	for ev, err := range New(s).Stream(t.Context(), history(0)) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if ev.Delta == "b" {
			break
		}
	}
	if n != 2 {
		t.Errorf("saw %d events, want 2", n)
	}
}

// TestConcurrentStreams: the provider is stateless, so concurrent calls at
// different frames do not interfere.
func TestConcurrentStreams(t *testing.T) {
	t.Parallel()
	p := New(mustParse(t, scenarioYAML("Read", `  - index: 0
    statements: [{kind: tool_call, tool: Read}]
  - index: 1
    statements: [{kind: tool_call, tool: Read}]
  - index: 2
    statements: [{kind: text, text: done}]
`)))
	results := make(chan string, 3)
	for k := range 3 {
		go func() {
			got := collect(p.Stream(context.Background(), history(k)))
			if got.err != nil {
				results <- got.err.Error()
				return
			}
			results <- string(got.resp.StopReason)
		}()
	}
	var got []string
	for range 3 {
		got = append(got, <-results)
	}
	if n := strings.Count(strings.Join(got, ","), "tool_use"); n != 2 {
		t.Errorf("stop reasons %v: want two tool_use frames and one end_turn", got)
	}
}

func BenchmarkStreamDemoFrame(b *testing.B) {
	p := New(Demo())
	req := history(0)
	for b.Loop() {
		for _, err := range p.Stream(context.Background(), req) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
