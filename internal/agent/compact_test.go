package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/anthropic"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/llm/openai"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// oldInput is a first prompt large enough to matter in a small window.
var oldInput = "OLD-TASK " + strings.Repeat("context that only the first request carries. ", 400)

// fakeProvider returns a provider of the given wire format on srv.
func fakeProvider(t *testing.T, format string, srv *llmtest.Server, model string) llm.Provider {
	t.Helper()
	var (
		p   llm.Provider
		err error
	)
	switch format {
	case "anthropic":
		p, err = anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), Model: model})
	case "openai":
		p, err = openai.New(openai.Config{BaseURL: srv.URL() + "/v1", Model: model, API: openai.APIChat})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func echoSet() *tool.Set {
	set := tool.NewSet()
	set.Add(echoTool("Echo", true, func(_ context.Context, in echoIn) (tool.Result, error) {
		return tool.Result{Content: "echoed " + in.Text}, nil
	}))
	return set
}

// requestText is what a recorded model request sent, as text.
func requestText(r llmtest.Request) string { return string(r.Body) }

// A request that would pass 85 % of the window (stated by the server's
// model listing) is preceded by a compaction: the older turns are
// summarised by the model, the compaction event says so, and the next
// request carries the summary and the kept turns, not the old prompt.
func TestCompactsAtThreshold(t *testing.T) {
	t.Parallel()
	const window = 10_000
	srv := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "Echo", Input: `{"text":"hi"}`}}, InputTokens: 8_800, OutputTokens: 20},
		llmtest.Turn{Text: []string{"SUMMARY: the user asked for OLD-TASK; Echo was called."}, InputTokens: 3_000, OutputTokens: 15},
		llmtest.Turn{Text: []string{"done"}, InputTokens: 1_200, OutputTokens: 2},
	)
	srv.Models = []string{"local-x"}
	srv.ContextWindows = map[string]int64{"local-x": window}
	rec := &recorder{}
	var usages []ContextUsage
	a := New(Config{Provider: fakeProvider(t, "openai", srv, "local-x"), Tools: echoSet(), OnContext: func(u ContextUsage) { usages = append(usages, u) }})
	res, err := a.Run(t.Context(), nil, llm.UserText(oldInput), rec)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	comps := of[protocol.Compaction](rec)
	if len(comps) != 1 || res.Compactions != 1 {
		t.Fatalf("compaction events %d, Result.Compactions %d; want 1\n%v", len(comps), res.Compactions, rec.types())
	}
	c := comps[0]
	if !c.Auto || c.TokensBefore < window*85/100 || !strings.Contains(c.Summary, "SUMMARY") || c.FirstKeptEntryIndex != 1 || c.Timestamp == "" {
		t.Errorf("compaction = %+v; want auto, tokens_before ≥ 85%% of %d, the model's summary, first kept index 1", c, window)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model requests %d, want 3", len(reqs))
	}
	if sum := requestText(reqs[1]); !strings.Contains(sum, "OLD-TASK") || strings.Contains(sum, `"tools"`) {
		t.Errorf("the summarising request should read the old turns and offer no tools: %.300s", sum)
	}
	next := requestText(reqs[2])
	if strings.Contains(next, "OLD-TASK context") || !strings.Contains(next, "SUMMARY") || !strings.Contains(next, "echoed hi") {
		t.Errorf("the request after compaction should carry the summary and the kept tool result, not the old prompt: %.500s", next)
	}
	if n := int64(len(next)) / 4; n >= window {
		t.Errorf("the request after compaction is about %d tokens, not below the window %d", n, window)
	}
	if len(usages) == 0 || usages[0].Window != window {
		t.Errorf("OnContext usages %+v: want the window the listing states (%d)", usages, window)
	}
	hist := llm.AppendHistory(nil, res.Messages...)
	if len(hist) != 4 || hist[0].Compaction == nil || hist[0].Compaction.Kept != 2 || hist[3].TextContent() != "done" {
		t.Errorf("history after the run = %+v; want [summary, tool call, tool result, answer]", hist)
	}
	for _, s := range of[protocol.Status](rec) {
		if strings.Contains(s.Message, "Compaction failed") {
			t.Errorf("unexpected status %q", s.Message)
		}
	}
}

// When the provider rejects a request as too long (each format's real
// error), the loop compacts and sends it again: no error event, no
// failure, the contract's status then the compaction.
func TestCompactsWhenProviderSaysTooLong(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ format, model string }{
		{"anthropic", "claude-sonnet-4-5"},
		{"openai", "local-y"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t,
				llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "Echo", Input: `{"text":"a"}`}}, InputTokens: 50, OutputTokens: 5},
				llmtest.Turn{ContextExceeded: true},
				llmtest.Turn{Text: []string{"SUMMARY of OLD-TASK"}, InputTokens: 40, OutputTokens: 5},
				llmtest.Turn{Text: []string{"done"}, InputTokens: 30, OutputTokens: 1},
			)
			rec := &recorder{}
			res, err := New(Config{Provider: fakeProvider(t, tc.format, srv, tc.model), Tools: echoSet()}).Run(t.Context(), nil, llm.UserText(oldInput), rec)
			if err != nil {
				t.Fatalf("run: %v\n%v", err, rec.types())
			}
			if errs := of[protocol.Error](rec); len(errs) != 0 {
				t.Errorf("error events %+v, want none", errs)
			}
			if res.Final != "done" || res.Compactions != 1 || res.Iterations != 2 {
				t.Errorf("final %q, compactions %d, iterations %d; want done, 1, 2", res.Final, res.Compactions, res.Iterations)
			}
			types := strings.Join(rec.types(), ",")
			if !strings.Contains(types, "status,compaction,status,response_start") {
				t.Errorf("events %s: want status, compaction, status before the retried call", types)
			}
			if st := of[protocol.Status](rec); len(st) == 0 || !strings.Contains(st[len(st)-2].Message, "Prompt exceeded the context window") {
				t.Errorf("statuses %+v: want the contract's compaction status", st)
			}
			reqs := srv.Requests()
			if last := requestText(reqs[len(reqs)-1]); strings.Contains(last, "OLD-TASK context") || !strings.Contains(last, "SUMMARY of OLD-TASK") {
				t.Errorf("the retried request should carry the summary instead of the old prompt: %.400s", last)
			}
		})
	}
}

// A too-long request with nothing older to summarise stays a failure,
// reported as before (error event, the provider's error).
func TestTooLongWithNothingToCompact(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.Turn{ContextExceeded: true})
	rec := &recorder{}
	_, err := New(Config{Provider: fakeProvider(t, "anthropic", srv, "claude-sonnet-4-5")}).Run(t.Context(), nil, llm.UserText(oldInput), rec)
	if llm.KindOf(err) != llm.KindContextLength || !errors.Is(err, errNothingToCompact) {
		t.Fatalf("err = %v; want the context-length failure and why compaction could not help", err)
	}
	if errs := of[protocol.Error](rec); len(errs) != 1 || !strings.Contains(errs[0].Message, "prompt is too long") {
		t.Errorf("error events %+v: want the provider's message", errs)
	}
}

// keepFrom keeps the recent turns that fit the budget, starting at an
// assistant message (tool calls and results together), always at least
// the last one, and never everything.
func TestKeepFrom(t *testing.T) {
	t.Parallel()
	u := func(n int) llm.Message { return llm.UserText(strings.Repeat("u", n)) }
	as := func(n int) llm.Message {
		return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text(strings.Repeat("a", n))}}
	}
	cases := []struct {
		name   string
		msgs   []llm.Message
		budget int64
		want   int
	}{
		{"only the prompt", []llm.Message{u(10)}, 1000, -1},
		{"all fits but the first stays older", []llm.Message{u(10), as(10), u(10), as(10), u(10)}, 1000, 1},
		{"budget keeps the last turn", []llm.Message{u(10), as(400), u(400), as(40), u(40)}, 40, 3},
		{"last turn alone is over budget", []llm.Message{u(10), as(10), u(4000)}, 10, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := keepFrom(tc.msgs, tc.budget); got != tc.want {
				t.Errorf("keepFrom = %d, want %d", got, tc.want)
			}
		})
	}
}

// A long transcript is cut into chunks at message boundaries, and a part
// longer than half a chunk is shortened from the middle.
func TestTranscriptChunks(t *testing.T) {
	t.Parallel()
	var msgs []llm.Message
	for i := range 10 {
		msgs = append(msgs, llm.UserText(fmt.Sprintf("message %d %s", i, strings.Repeat("x", 100))))
	}
	msgs = append(msgs, llm.UserText("huge "+strings.Repeat("y", 5000)+" end"))
	chunks := transcript(msgs, 400)
	if len(chunks) < 4 {
		t.Fatalf("%d chunks, want the transcript cut in several", len(chunks))
	}
	last := chunks[len(chunks)-1]
	if !strings.Contains(last, "bytes left out") || !strings.HasSuffix(strings.TrimSpace(last), "end") || len(last) > 400 {
		t.Errorf("the huge part should be shortened, keeping its start and end: %d bytes", len(last))
	}
	if !strings.HasPrefix(chunks[0], "User: message 0") {
		t.Errorf("first chunk %q", chunks[0])
	}
}

// An unknown model's window is the default, with a notice given once per
// provider (not at every run).
func TestDefaultWindowNoticeOnce(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{"one"}}, llmtest.Turn{Text: []string{"two"}})
	p := fakeProvider(t, "openai", srv, "mystery-model")
	var notices []string
	for range 2 {
		rec := &recorder{}
		if _, err := New(Config{Provider: p}).Run(t.Context(), nil, llm.UserText("hi"), rec); err != nil {
			t.Fatal(err)
		}
		for _, s := range of[protocol.Status](rec) {
			notices = append(notices, s.Message)
		}
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "assuming 128000 tokens") || !strings.Contains(notices[0], "context_window") {
		t.Errorf("statuses over two runs %q: want one notice of the assumed window", notices)
	}
}

// A session that keeps growing is compacted again: the second summary
// reads the first one and the turns after it, and the run ends normally.
func TestCompactsAgainAsTheSessionGrows(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("a large tool result line\n", 1_600) // about 10,000 tokens
	set := tool.NewSet()
	set.Add(echoTool("Big", true, func(context.Context, echoIn) (tool.Result, error) { return tool.Result{Content: big}, nil }))
	srv := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "Big", Input: `{"text":"1"}`}}, InputTokens: 500, OutputTokens: 5},
		llmtest.Turn{Text: []string{"SUMMARY"}, InputTokens: 100, OutputTokens: 5},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "Big", Input: `{"text":"2"}`}}, InputTokens: 11_000, OutputTokens: 5},
		llmtest.Turn{Text: []string{"SUMMARY 2"}, InputTokens: 100, OutputTokens: 5},
		llmtest.Turn{Text: []string{"done"}, InputTokens: 11_000, OutputTokens: 2},
	)
	rec := &recorder{}
	res, err := New(Config{Provider: fakeProvider(t, "openai", srv, "local-z"), Tools: set, ContextWindow: 12_000}).Run(t.Context(), nil, llm.UserText(oldInput), rec)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Compactions != 2 || res.Final != "done" || srv.Remaining() != 0 {
		t.Errorf("compactions %d, final %q, unserved turns %d; want 2 (one per new tool result), done, 0", res.Compactions, res.Final, srv.Remaining())
	}
	if second := requestText(srv.Requests()[3]); !strings.Contains(second, "[Earlier summary] SUMMARY") {
		t.Errorf("the second summarising request should read the first summary: %.300s", second)
	}
}

// Before a call, a conversation that is only the last summary and the
// recent turns is not summarised again (that would only summarise the
// summary); when the provider rejects the request, it is.
func TestSummaryAloneIsNotRecompactedBeforeACall(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{"SUMMARY AGAIN"}})
	summary := llm.UserText("SUMMARY")
	summary.Compaction = &llm.Compaction{Kept: 2}
	msgs := []llm.Message{summary,
		{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "c1", Name: "Echo", Input: []byte(`{}`)}}}},
		{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c1", Content: "r"}}}},
	}
	rec := &recorder{}
	r := &run{a: New(Config{Provider: fakeProvider(t, "openai", srv, "local-s")}), sink: rec, window: 1000}
	if err := r.compact(t.Context(), &msgs, 0, false); !errors.Is(err, errNothingToCompact) || len(srv.Requests()) != 0 || len(rec.events) != 0 {
		t.Fatalf("before a call: err %v, %d model requests, events %v; want errNothingToCompact and nothing sent", err, len(srv.Requests()), rec.types())
	}
	if err := r.compact(t.Context(), &msgs, 0, true); err != nil || len(msgs) != 3 || !strings.Contains(msgs[0].TextContent(), "SUMMARY AGAIN") {
		t.Fatalf("after a rejection: err %v, history %+v; want the summary summarised again", err, msgs)
	}
}

// A compaction before a call that fails is not tried again before every
// call: each attempt is a summarising call of up to half the window, and
// a model that could not summarise was asked again after every tool call
// (each failing the same way, each paid for). The loop tries again once
// the request has grown by a tenth of the window.
func TestFailedCompactionWaitsBeforeRetrying(t *testing.T) {
	t.Parallel()
	const window = 10_000
	echo := func(id string, input int64) llmtest.Turn {
		return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: id, Name: "Echo", Input: `{"text":"` + id + `"}`}}, InputTokens: input, OutputTokens: 5}
	}
	srv := llmtest.NewServer(t,
		echo("c1", 8_800),
		llmtest.Turn{Status: 400, ErrorMessage: "cannot summarise"}, // the first attempt fails
		echo("c2", 8_900), // 8,900 + a little: below 8,800 + 1,000, no attempt
		echo("c3", 9_900), // past it: compacted
		llmtest.Turn{Text: []string{"SUMMARY"}, InputTokens: 3_000, OutputTokens: 5},
		llmtest.Turn{Text: []string{"done"}, InputTokens: 1_000, OutputTokens: 2},
	)
	rec := &recorder{}
	res, err := New(Config{Provider: fakeProvider(t, "openai", srv, "local-f"), Tools: echoSet(), ContextWindow: window}).Run(t.Context(), nil, llm.UserText("task"), rec)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var summarising []int
	for i, r := range srv.Requests() {
		if strings.Contains(requestText(r), "You compact the conversation") {
			summarising = append(summarising, i)
		}
	}
	if fmt.Sprint(summarising) != "[1 4]" || res.Compactions != 1 || res.Final != "done" || srv.Remaining() != 0 {
		t.Errorf("summarising requests at %v, compactions %d, final %q, unserved turns %d; want [1 4] (after the first and the third tool call), 1, done, 0",
			summarising, res.Compactions, res.Final, srv.Remaining())
	}
	var failed []string
	for _, s := range of[protocol.Status](rec) {
		if strings.Contains(s.Message, "Compaction failed") {
			failed = append(failed, s.Message)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "next attempt at about 98") {
		t.Errorf("statuses %q; want one failure naming the next attempt (about 9,8xx tokens)", failed)
	}
}

// A compaction that fails near the window names a next attempt the
// conversation can reach: the window, not the size plus a tenth of it
// (10,5xx of a 10,000-token window, which no request gets to: it said
// "next attempt at about 10520 tokens"); past the window already, the
// provider's rejection.
func TestFailedCompactionNearTheWindow(t *testing.T) {
	t.Parallel()
	const window = 10_000
	for _, tc := range []struct {
		input int64
		want  string
	}{
		{9_500, "next attempt when a request would fill the context window (10000 tokens), or when the model rejects one as too long)"},
		{10_200, "(next attempt when the model rejects a request as too long)"},
	} {
		srv := llmtest.NewServer(t,
			llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "Echo", Input: `{"text":"c1"}`}}, InputTokens: tc.input, OutputTokens: 5},
			llmtest.Turn{Status: 400, ErrorMessage: "cannot summarise"},
			llmtest.Turn{Text: []string{"done"}, InputTokens: 9_600, OutputTokens: 2},
		)
		rec := &recorder{}
		a := New(Config{Provider: fakeProvider(t, "openai", srv, "local-w"), Tools: echoSet(), ContextWindow: window})
		if _, err := a.Run(t.Context(), nil, llm.UserText("task"), rec); err != nil {
			t.Fatalf("run: %v", err)
		}
		var failed []string
		for _, s := range of[protocol.Status](rec) {
			if strings.Contains(s.Message, "Compaction failed") {
				failed = append(failed, s.Message)
			}
		}
		if len(failed) != 1 || !strings.Contains(failed[0], tc.want) {
			t.Errorf("after %d tokens, statuses %q; want one failure saying %q", tc.input, failed, tc.want)
		}
	}
}

// With a low compact_at, the recent turns a compaction keeps fit well
// below the threshold: they were a quarter of the window whatever the
// threshold, so with compact_at 0.2 the request right after a compaction
// was over it, and every later call was preceded by another summarising
// call.
func TestKeptTurnsFitBelowALowThreshold(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{"SUMMARY"}})
	msgs := []llm.Message{llm.UserText("task")}
	for i := range 40 {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: "Echo", Input: []byte(`{}`)}}}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: id, Content: strings.Repeat("r", 400)}}}})
	}
	r := &run{a: New(Config{Provider: fakeProvider(t, "openai", srv, "local-k"), CompactAt: 0.2}), sink: &recorder{}, window: 10_000}
	before, ok := r.shouldCompact(msgs)
	if !ok {
		t.Fatalf("%d tokens do not reach 20%% of 10,000", before)
	}
	if err := r.compact(t.Context(), &msgs, before, false); err != nil {
		t.Fatal(err)
	}
	if after, again := r.shouldCompact(msgs); again {
		t.Errorf("right after compacting %d tokens, the next request (%d tokens, %d messages) is still over 20%% of the window", before, after, len(msgs))
	}
}

// When the window is unknown (128,000 assumed) and the provider rejects a
// request stating a smaller maximum, compaction's budgets follow the
// stated one: with the assumed window, a quarter of it kept every recent
// turn, so the request sent again after compacting was as large as the
// rejected one. llama.cpp's server words it its own way (it was not taken
// for a "too long" error at all: the run failed with no compaction).
func TestCompactionLearnsTheStatedMaximum(t *testing.T) {
	t.Parallel()
	for name, tooLong := range map[string]string{
		"openai":   "This model's maximum context length is 4096 tokens. However, your messages resulted in 5400 tokens.",
		"llamacpp": "request (5400 tokens) exceeds the available context size (4096 tokens), try increasing it",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			learnStatedMaximum(t, tooLong)
		})
	}
}

func learnStatedMaximum(t *testing.T, tooLong string) {
	result := strings.Repeat("a tool result line\n", 210) // about 1,000 tokens
	set := tool.NewSet()
	set.Add(echoTool("Big", true, func(context.Context, echoIn) (tool.Result, error) { return tool.Result{Content: result}, nil }))
	var turns []llmtest.Turn
	for i := range 5 {
		turns = append(turns, llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: fmt.Sprintf("c%d", i), Name: "Big", Input: `{"text":"x"}`}}})
	}
	turns = append(turns,
		llmtest.Turn{Status: 400, ErrorMessage: tooLong},
		// The older turns are two chunks of half the stated window: two
		// summarising calls.
		llmtest.Turn{Text: []string{"SUMMARY 1"}},
		llmtest.Turn{Text: []string{"SUMMARY 2"}},
		llmtest.Turn{Text: []string{"done"}},
	)
	srv := llmtest.NewServer(t, turns...)
	rec := &recorder{}
	res, err := New(Config{Provider: fakeProvider(t, "openai", srv, "proxied"), Tools: set}).Run(t.Context(), nil, llm.UserText("task"), rec)
	reqs := srv.Requests()
	if n := len(requestText(reqs[len(reqs)-1])) / 4; n >= 4096 {
		t.Errorf("the request sent again after compacting is about %d tokens, not below the stated maximum of 4096", n)
	}
	if err != nil || res.Compactions != 1 || res.Final != "done" || srv.Remaining() != 0 {
		t.Errorf("run: %v, compactions %d, final %q, unserved turns %d; want one compaction (two summarising calls), done, 0", err, res.Compactions, res.Final, srv.Remaining())
	}
}

func TestStatedMaximum(t *testing.T) {
	for msg, want := range map[string]int64{
		"prompt is too long: 210345 tokens > 200000 maximum":                                        200_000,
		"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens":    8192,
		"request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it": 8192,
		"input (9000 tokens) is larger than the max context size (8192 tokens). skipping":           8192,
		"prompt is too long": 0,
	} {
		if got := statedMaximum(&llm.Error{Kind: llm.KindContextLength, Message: msg}); got != want {
			t.Errorf("statedMaximum(%q) = %d, want %d", msg, got, want)
		}
	}
}
