package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The window comes from the configuration, else the provider, else the
// catalogue, else the default with a notice that is given only once.
func TestWindowResolver(t *testing.T) {
	t.Parallel()
	says := func(n int64, err error) func(context.Context) (int64, error) {
		return func(context.Context) (int64, error) { return n, err }
	}
	cases := []struct {
		name   string
		r      *WindowResolver
		want   int64
		source WindowSource
	}{
		{"config wins", &WindowResolver{Model: "local", Configured: map[string]int64{"local": 4096}, Ask: says(32768, nil)}, 4096, WindowConfig},
		{"provider", &WindowResolver{Model: "local", Ask: says(32768, nil)}, 32768, WindowProvider},
		{"provider silent, catalogue", &WindowResolver{Model: "gpt-4o-2024-08-06", Ask: says(0, nil)}, 128_000, WindowCatalogue},
		{"provider failed, catalogue", &WindowResolver{Model: "claude-sonnet-4-5", Ask: says(0, errors.New("down"))}, 200_000, WindowCatalogue},
		{"unknown", &WindowResolver{Model: "mystery"}, DefaultContextWindow, WindowDefault},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.r.Resolve(t.Context())
			if w.Tokens != tc.want || w.Source != tc.source {
				t.Fatalf("Resolve = %+v, want %d from %s", w, tc.want, tc.source)
			}
			if (w.Notice != "") != (tc.source == WindowDefault) {
				t.Errorf("notice %q: want one only for the default", w.Notice)
			}
			if again := tc.r.Resolve(t.Context()); again.Tokens != w.Tokens || again.Notice != "" {
				t.Errorf("second Resolve = %+v: want the same window and no notice", again)
			}
		})
	}
}

// Providers' "does not fit" errors become KindContextLength; other bad
// requests and other kinds stay what they were.
func TestMarkContextLength(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		e    Error
		code string
		want ErrorKind
	}{
		{"anthropic", Error{Kind: KindBadRequest, Status: 400, Message: "prompt is too long: 215000 tokens > 200000 maximum"}, "invalid_request_error", KindContextLength},
		{"openai code", Error{Kind: KindBadRequest, Status: 400, Message: "Please reduce the length of the messages."}, "context_length_exceeded", KindContextLength},
		{"vllm", Error{Kind: KindBadRequest, Status: 400, Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"}, "", KindContextLength},
		{"other 400", Error{Kind: KindBadRequest, Status: 400, Message: "messages.0.content: field required"}, "invalid_request_error", KindBadRequest},
		{"not a bad request", Error{Kind: KindServer, Status: 500, Message: "prompt is too long"}, "", KindServer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := MarkContextLength(&tc.e, tc.code).Kind; got != tc.want {
				t.Errorf("kind = %s, want %s", got, tc.want)
			}
		})
	}
}

// AppendHistory applies a compaction summary: it replaces what came
// before except its Kept latest messages, which follow it.
func TestAppendHistory(t *testing.T) {
	t.Parallel()
	m := func(s string) Message { return UserText(s) }
	sum := func(s string, kept int) Message {
		x := UserText(s)
		x.Compaction = &Compaction{Kept: kept}
		return x
	}
	text := func(h []Message) string {
		var out []string
		for _, x := range h {
			out = append(out, x.TextContent())
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		name string
		base []Message
		add  []Message
		want string
	}{
		{"plain", []Message{m("a")}, []Message{m("b")}, "a,b"},
		{"summary keeps two", []Message{m("a"), m("b"), m("c")}, []Message{sum("S", 2), m("d")}, "S,b,c,d"},
		{"summary keeps none", []Message{m("a")}, []Message{sum("S", 0)}, "S"},
		{"kept larger than history", []Message{m("a")}, []Message{sum("S", 5)}, "S,a"},
		{"second summary", []Message{m("a"), m("b")}, []Message{sum("S1", 1), m("c"), sum("S2", 1), m("d")}, "S2,c,d"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := append([]Message(nil), tc.base...)
			if got := text(AppendHistory(base, tc.add...)); got != tc.want {
				t.Errorf("history %s, want %s", got, tc.want)
			}
			if text(base) != text(tc.base) {
				t.Errorf("the history passed in was modified")
			}
		})
	}
}
