package agent

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// script is a test provider answering model call k with turns[k].
type script struct {
	model string
	turns []func(ctx context.Context, req *llm.Request, yield func(llm.Event, error) bool)
	mu    sync.Mutex
	reqs  []*llm.Request
}

func (s *script) Name() string  { return "test" }
func (s *script) Model() string { return s.model }
func (s *script) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		s.mu.Lock()
		k := len(s.reqs)
		s.reqs = append(s.reqs, req)
		s.mu.Unlock()
		if k >= len(s.turns) {
			yield(llm.Event{}, &llm.Error{Kind: llm.KindScript, Message: "script exhausted"})
			return
		}
		s.turns[k](ctx, req, yield)
	}
}

// say answers with text chunks and optional tool calls.
func say(usage llm.Usage, chunks []string, calls ...llm.ToolCall) func(context.Context, *llm.Request, func(llm.Event, error) bool) {
	return func(_ context.Context, _ *llm.Request, yield func(llm.Event, error) bool) {
		msg := llm.Message{Role: llm.RoleAssistant}
		for _, c := range chunks {
			if !yield(llm.Event{Type: llm.EventTextDelta, Delta: c}, nil) {
				return
			}
		}
		if len(chunks) > 0 {
			msg.Parts = append(msg.Parts, llm.Text(strings.Join(chunks, "")))
		}
		stop := llm.StopEndTurn
		for _, c := range calls {
			msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartToolCall, ToolCall: &c})
			stop = llm.StopToolUse
		}
		yield(llm.Event{Type: llm.EventDone, Response: &llm.Response{Message: msg, Usage: usage, StopReason: stop}}, nil)
	}
}

func call(id, name, input string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}
}

// recorder is a Sink keeping everything.
type recorder struct {
	mu     sync.Mutex
	events []protocol.Message
	msgs   []llm.Message
}

func (r *recorder) Event(m protocol.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, m)
}

func (r *recorder) Message(m llm.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.MessageType())
	}
	return out
}

func of[T protocol.Message](r *recorder) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, e := range r.events {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

type echoIn struct {
	Text string `json:"text"`
}

func echoTool(name string, readOnly bool, fn func(ctx context.Context, in echoIn) (tool.Result, error)) tool.Tool {
	return tool.New(name, "test tool", readOnly, func(ctx context.Context, in echoIn, c tool.Call) (tool.Result, error) {
		c.Emit("out:" + in.Text)
		return fn(ctx, in)
	})
}

func ok(_ context.Context, in echoIn) (tool.Result, error) {
	return tool.Result{Content: "ok " + in.Text}, nil
}

func TestTextOnlyTurn(t *testing.T) {
	t.Parallel()
	p := &script{model: "claude-sonnet-4-5", turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		say(llm.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 2000, CacheWriteTokens: 10}, []string{"Hel", "lo"}),
	}}
	rec := &recorder{}
	res, err := New(Config{Provider: p}).Run(t.Context(), nil, llm.UserText("hi"), rec)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"response_start", "response_chunk", "response_chunk", "response_end"}, rec.types()); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	end := of[protocol.ResponseEnd](rec)[0]
	want := protocol.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 2000, CacheWriteTokens: 10, TotalTokens: 3110,
		TotalCostUSD: (1000*3 + 100*15 + 2000*0.3 + 10*3.75) / 1e6, ModelID: "claude-sonnet-4-5", Provider: "test"}
	if diff := cmp.Diff(want, end.Usage, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if end.TTFTMS == nil {
		t.Error("ttft_ms missing although chunks were streamed")
	}
	if res.Final != "Hello" || res.Iterations != 1 || !res.CostKnown {
		t.Errorf("result = %+v", res)
	}
	if len(rec.msgs) != 2 || rec.msgs[0].Role != llm.RoleUser || rec.msgs[1].TextContent() != "Hello" {
		t.Errorf("messages = %+v", rec.msgs)
	}
	if start := of[protocol.ResponseStart](rec)[0]; !strings.HasPrefix(start.ResponseID, "resp_") || len(strings.Split(start.ResponseID, "_")[2]) != 6 {
		t.Errorf("response id %q not resp_<ms>_<6 base36>", start.ResponseID)
	}
}

func TestToolLoopOrderAndSummary(t *testing.T) {
	t.Parallel()
	p := &script{model: "gpt-4o", turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		say(llm.Usage{}, []string{"working"}, call("c1", "write", `{"text":"a"}`), call("c2", "read", `{"text":"b"}`), call("c3", "fail", `{"text":"c"}`)),
		say(llm.Usage{}, []string{"done"}),
	}}
	tools := tool.NewSet(
		echoTool("write", false, ok),
		echoTool("read", true, ok),
		echoTool("fail", true, func(context.Context, echoIn) (tool.Result, error) { return tool.Errorf("boom"), nil }),
	)
	rec := &recorder{}
	res, err := New(Config{Provider: p, Tools: tools}).Run(t.Context(), nil, llm.UserText("go"), rec)
	if err != nil {
		t.Fatal(err)
	}
	// The second request carries the three results in call order.
	results := p.reqs[1].Messages[2].Parts
	var got []string
	for _, r := range results {
		got = append(got, r.ToolResult.CallID+"="+r.ToolResult.Content)
	}
	if diff := cmp.Diff([]string{"c1=ok a", "c2=ok b", "c3=boom"}, got); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
	// Each call: tool_call, tool_start, tool_output, tool_end (per call id, in order).
	perCall := map[string][]string{}
	for _, e := range rec.events {
		switch v := e.(type) {
		case protocol.ToolCall:
			perCall[v.CallID] = append(perCall[v.CallID], "call")
		case protocol.ToolStart:
			perCall[v.CallID] = append(perCall[v.CallID], "start")
		case protocol.ToolOutput:
			perCall[v.CallID] = append(perCall[v.CallID], "output")
		case protocol.ToolEnd:
			perCall[v.CallID] = append(perCall[v.CallID], "end")
		}
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		if diff := cmp.Diff([]string{"call", "start", "output", "end"}, perCall[id]); diff != "" {
			t.Errorf("%s events (-want +got):\n%s", id, diff)
		}
	}
	ends := of[protocol.ResponseEnd](rec)
	wantSummary := protocol.ToolsSummary{ToolsUsed: []string{"fail", "read", "write"}, CallsSucceeded: 2, CallsFailed: 1}
	if diff := cmp.Diff(wantSummary, ends[1].ToolsSummary); diff != "" {
		t.Errorf("tools_summary (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(protocol.ToolsSummary{ToolsUsed: []string{}}, ends[0].ToolsSummary); diff != "" {
		t.Errorf("first tools_summary (-want +got):\n%s", diff)
	}
	if res.Final != "done" || res.Iterations != 2 {
		t.Errorf("result = %+v", res)
	}
	// Pricing of gpt-4o is known: no status warning.
	if len(of[protocol.Status](rec)) != 0 {
		t.Errorf("unexpected status events: %v", of[protocol.Status](rec))
	}
}

func TestReadOnlyCallsRunConcurrently(t *testing.T) {
	t.Parallel()
	const n = 3
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	blocking := func(ctx context.Context, in echoIn) (tool.Result, error) {
		arrived.Done()
		select {
		case <-release:
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
		return tool.Result{Content: in.Text}, nil
	}
	var calls []llm.ToolCall
	for i := range n {
		calls = append(calls, call(string(rune('a'+i)), "look", `{"text":"x"}`))
	}
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){say(llm.Usage{}, nil, calls...), say(llm.Usage{}, []string{"ok"})}}
	go func() { arrived.Wait(); close(release) }()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := New(Config{Provider: p, Tools: tool.NewSet(echoTool("look", true, blocking))}).Run(ctx, nil, llm.UserText("go"), &recorder{}); err != nil {
		t.Fatalf("read-only calls did not run concurrently: %v", err)
	}
}

func TestMutatingCallsRunInOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	active := 0
	w := func(_ context.Context, in echoIn) (tool.Result, error) {
		mu.Lock()
		active++
		if active > 1 {
			t.Error("two mutating calls overlapped")
		}
		order = append(order, in.Text)
		mu.Unlock()
		mu.Lock()
		active--
		mu.Unlock()
		return tool.Result{Content: "ok"}, nil
	}
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		say(llm.Usage{}, nil, call("1", "w", `{"text":"1"}`), call("2", "w", `{"text":"2"}`), call("3", "w", `{"text":"3"}`)),
		say(llm.Usage{}, []string{"ok"}),
	}}
	if _, err := New(Config{Provider: p, Tools: tool.NewSet(echoTool("w", false, w))}).Run(t.Context(), nil, llm.UserText("go"), &recorder{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestApproval(t *testing.T) {
	t.Parallel()
	for _, approved := range []bool{true, false} {
		p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
			say(llm.Usage{}, nil, call("c1", "w", `{"text":"x"}`), call("c2", "r", `{"text":"y"}`)),
			say(llm.Usage{}, []string{"ok"}),
		}}
		var asked []string
		approve := func(_ context.Context, req ApprovalRequest) (Approval, error) {
			asked = append(asked, req.Tool)
			return Approval{Approved: approved, Reason: "no thanks", RequestID: "req_" + req.CallID}, nil
		}
		ran := false
		w := func(context.Context, echoIn) (tool.Result, error) {
			ran = true
			return tool.Result{Content: "written"}, nil
		}
		rec := &recorder{}
		_, err := New(Config{Provider: p, Tools: tool.NewSet(echoTool("w", false, w), echoTool("r", true, ok)), Approve: approve}).
			Run(t.Context(), nil, llm.UserText("go"), rec)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"w"}, asked); diff != "" {
			t.Errorf("approved=%v: asked (-want +got):\n%s", approved, diff)
		}
		if ran != approved {
			t.Errorf("approved=%v: tool ran = %v", approved, ran)
		}
		calls := of[protocol.ToolCall](rec)
		if !calls[0].RequiresApproval || calls[1].RequiresApproval {
			t.Errorf("requires_approval flags wrong: %+v", calls)
		}
		end := of[protocol.ToolEnd](rec)[0]
		if end.Success != approved || end.ApprovalRequestID != "req_c1" {
			t.Errorf("approved=%v: tool_end = %+v", approved, end)
		}
		if !approved {
			got := p.reqs[1].Messages[2].Parts[0].ToolResult
			if !got.IsError || !strings.Contains(got.Content, "no thanks") {
				t.Errorf("denied result = %+v", got)
			}
		}
	}
}

func TestToolFailureRetryAndAbort(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		decisions []RetryAction
		wantErr   error
		wantRuns  int
		wantOK    bool
	}{
		{"retry then success", []RetryAction{RetryRetry}, nil, 2, true},
		{"skip", []RetryAction{RetrySkip}, nil, 1, false},
		{"abort", []RetryAction{RetryAbort}, ErrAborted, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runs := 0
			flaky := func(context.Context, echoIn) (tool.Result, error) {
				runs++
				if runs == 1 {
					return tool.Errorf("first attempt fails"), nil
				}
				return tool.Result{Content: "fine"}, nil
			}
			var got []ToolFailure
			decide := func(_ context.Context, f ToolFailure) (RetryAction, error) {
				got = append(got, f)
				return tc.decisions[len(got)-1], nil
			}
			p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
				say(llm.Usage{}, nil, call("c1", "flaky", `{"text":"x"}`)), say(llm.Usage{}, []string{"ok"}),
			}}
			rec := &recorder{}
			_, err := New(Config{Provider: p, Tools: tool.NewSet(echoTool("flaky", false, flaky)), OnToolFailure: decide}).
				Run(t.Context(), nil, llm.UserText("go"), rec)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if runs != tc.wantRuns || got[0].Attempt != 1 || got[0].Error != "first attempt fails" {
				t.Errorf("runs=%d failures=%+v", runs, got)
			}
			if end := of[protocol.ToolEnd](rec); len(end) != 1 || end[0].Success != tc.wantOK {
				t.Errorf("tool_end = %+v", end)
			}
		})
	}
}

func TestCancelMidTool(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	slow := func(ctx context.Context, _ echoIn) (tool.Result, error) {
		close(started)
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		say(llm.Usage{}, nil, call("c1", "slow", `{"text":"x"}`), call("c2", "slow", `{"text":"y"}`)),
	}}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	rec := &recorder{}
	res, err := New(Config{Provider: p, Tools: tool.NewSet(echoTool("slow", false, slow))}).Run(ctx, nil, llm.UserText("go"), rec)
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("err = %v, want ErrCancelled", err)
	}
	errs := of[protocol.Error](rec)
	if len(errs) != 1 || errs[0].ErrorType != protocol.ErrorCancelled || errs[0].Fatal {
		t.Errorf("error events = %+v", errs)
	}
	ends := of[protocol.ToolEnd](rec)
	if len(ends) != 2 || ends[0].Success || ends[1].Success {
		t.Errorf("tool_end events = %+v", ends)
	}
	// Each call, the one never run too, goes tool_call, tool_start, …,
	// tool_end (wire contract §8.8): c2's start was missing, and a client
	// saw an end of a call that had not started.
	var order []string
	rec.mu.Lock()
	events := slices.Clone(rec.events)
	rec.mu.Unlock()
	for _, m := range events {
		switch m := m.(type) {
		case protocol.ToolCall:
			order = append(order, "call "+m.CallID)
		case protocol.ToolStart:
			order = append(order, "start "+m.CallID)
		case protocol.ToolEnd:
			order = append(order, "end "+m.CallID)
		}
	}
	if want := []string{"call c1", "start c1", "end c1", "call c2", "start c2", "end c2"}; !slices.Equal(order, want) {
		t.Errorf("tool events %q, want %q", order, want)
	}
	// History stays valid: the last message answers both calls.
	last := res.Messages[len(res.Messages)-1]
	if len(last.Parts) != 2 || last.Parts[1].ToolResult.Content != abortedText {
		t.Errorf("last message = %+v", last)
	}
}

func TestCancelMidStream(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		func(ctx context.Context, _ *llm.Request, yield func(llm.Event, error) bool) {
			if !yield(llm.Event{Type: llm.EventTextDelta, Delta: "partial"}, nil) {
				return
			}
			cancel()
			<-ctx.Done()
			yield(llm.Event{}, &llm.Error{Kind: llm.KindCancelled, Err: ctx.Err()})
		},
	}}
	rec := &recorder{}
	res, err := New(Config{Provider: p}).Run(ctx, nil, llm.UserText("go"), rec)
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("err = %v", err)
	}
	if diff := cmp.Diff([]string{"response_start", "response_chunk", "response_end", "error"}, rec.types()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if res.Messages[len(res.Messages)-1].TextContent() != "partial" {
		t.Errorf("partial text not kept in history: %+v", res.Messages)
	}
}

func TestProviderErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  *llm.Error
		want protocol.ErrorType
	}{
		{&llm.Error{Kind: llm.KindStream, Message: "cut"}, protocol.ErrorTransient},
		{&llm.Error{Kind: llm.KindRateLimit, Status: 429, Message: "slow down"}, protocol.ErrorTransient},
		{&llm.Error{Kind: llm.KindAuth, Status: 401, Message: "bad key", Hint: "set X"}, protocol.ErrorFatal},
	}
	for _, tc := range cases {
		p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
			func(_ context.Context, _ *llm.Request, yield func(llm.Event, error) bool) { yield(llm.Event{}, tc.err) },
		}}
		rec := &recorder{}
		_, err := New(Config{Provider: p}).Run(t.Context(), nil, llm.UserText("go"), rec)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v", tc.err.Kind, err)
		}
		errs := of[protocol.Error](rec)
		if len(errs) != 1 || errs[0].ErrorType != tc.want || errs[0].Fatal || !strings.Contains(errs[0].Message, tc.err.Message) {
			t.Errorf("%s: error events = %+v", tc.err.Kind, errs)
		}
	}
}

func TestUnknownToolAndMaxIterations(t *testing.T) {
	t.Parallel()
	loop := say(llm.Usage{}, nil, call("c", "nope", `{}`))
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){loop, loop, loop}}
	rec := &recorder{}
	_, err := New(Config{Provider: p, Tools: tool.NewSet(echoTool("real", true, ok)), MaxIterations: 2}).Run(t.Context(), nil, llm.UserText("go"), rec)
	if !errors.Is(err, ErrMaxIterations) {
		t.Fatalf("err = %v", err)
	}
	got := p.reqs[1].Messages[2].Parts[0].ToolResult
	if !got.IsError || !strings.Contains(got.Content, `unknown tool "nope"`) || !strings.Contains(got.Content, "real") {
		t.Errorf("unknown tool result = %+v", got)
	}
}

func TestUnknownPricingFlagged(t *testing.T) {
	t.Parallel()
	p := &script{model: "llama3.2", turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		say(llm.Usage{InputTokens: 5, OutputTokens: 5}, []string{"a"}, call("c", "r", `{"text":""}`)), say(llm.Usage{InputTokens: 5}, []string{"b"}),
	}}
	rec := &recorder{}
	res, err := New(Config{Provider: p, Tools: tool.NewSet(echoTool("r", true, ok))}).Run(t.Context(), nil, llm.UserText("go"), rec)
	if err != nil {
		t.Fatal(err)
	}
	st := of[protocol.Status](rec)
	if len(st) != 1 || !strings.Contains(st[0].Message, "Pricing unknown for model llama3.2") {
		t.Errorf("status = %+v", st)
	}
	if res.CostKnown || res.CostUSD != 0 {
		t.Errorf("cost = %v known=%v", res.CostUSD, res.CostKnown)
	}
}

func TestStopTurnTool(t *testing.T) {
	t.Parallel()
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){say(llm.Usage{}, nil, call("c", "done", `{"text":""}`))}}
	stopper := echoTool("done", false, func(context.Context, echoIn) (tool.Result, error) {
		return tool.Result{Content: "bye", StopTurn: true}, nil
	})
	res, err := New(Config{Provider: p, Tools: tool.NewSet(stopper)}).Run(t.Context(), nil, llm.UserText("go"), &recorder{})
	if err != nil || !res.StoppedByTool || res.Iterations != 1 {
		t.Fatalf("res=%+v err=%v", res, err)
	}
}

func TestContextUsageReported(t *testing.T) {
	t.Parallel()
	p := &script{model: "claude-sonnet-4-5", turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		say(llm.Usage{InputTokens: 100_000, OutputTokens: 40_000}, []string{"x"}),
	}}
	var got []ContextUsage
	_, err := New(Config{Provider: p, OnContext: func(c ContextUsage) { got = append(got, c) }}).Run(t.Context(), nil, llm.UserText("go"), &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Window != 200_000 || got[0].Fraction() != 0.7 {
		t.Errorf("context usage = %+v", got)
	}
}

func TestHistoryPassedThrough(t *testing.T) {
	t.Parallel()
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){say(llm.Usage{}, []string{"again"})}}
	history := []llm.Message{llm.UserText("first"), {Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("reply")}}}
	_, err := New(Config{Provider: p, System: "sys"}).Run(t.Context(), history, llm.UserText("second"), &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	req := p.reqs[0]
	if req.System != "sys" || len(req.Messages) != 3 || req.Messages[2].TextContent() != "second" {
		t.Errorf("request = %+v", req)
	}
	if !slices.Equal([]string{history[0].TextContent()}, []string{req.Messages[0].TextContent()}) {
		t.Error("history not passed")
	}
}

// TestToolEndErrorCodes: every failed call's tool_end carries an
// error_code, and a call that streamed nothing sends its reason as its one
// tool_output (the wire contract's tool_end has no text field).
func TestToolEndErrorCodes(t *testing.T) {
	t.Parallel()
	quiet := func(name string, fn func(context.Context) (tool.Result, error)) tool.Tool {
		return tool.New(name, "test tool", false, func(ctx context.Context, _ echoIn, _ tool.Call) (tool.Result, error) { return fn(ctx) })
	}
	for _, tc := range []struct {
		name       string
		tool       tool.Tool
		call       string
		deny       bool
		wantCode   string
		wantOutput []string // the call's tool_output contents
	}{
		{"denied", quiet("w", func(context.Context) (tool.Result, error) { return tool.Result{Content: "ran"}, nil }), "w", true,
			tool.CodeDenied, []string{"Tool call denied: no thanks"}},
		{"unknown tool", quiet("w", nil), "nope", false, tool.CodeUnknownTool, []string{`unknown tool "nope"; available tools: w`}},
		{"coded failure", quiet("w", func(context.Context) (tool.Result, error) {
			return tool.Failf(tool.CodeTooLarge, "x is 9 bytes\nover the limit"), nil
		}), "w", false, tool.CodeTooLarge, []string{"x is 9 bytes\nover the limit"}},
		{"uncoded failure", quiet("w", func(context.Context) (tool.Result, error) { return tool.Errorf("boom"), nil }), "w", false,
			tool.CodeFailed, []string{"boom"}},
		{"infrastructure failure", quiet("w", func(context.Context) (tool.Result, error) { return tool.Result{}, errors.New("disk gone") }), "w", false,
			tool.CodeFailed, []string{"w failed: disk gone"}},
		{"streamed output is not repeated", echoTool("w", false, func(context.Context, echoIn) (tool.Result, error) {
			return tool.Errorf("out:x\nexit status 1"), nil
		}), "w", false, tool.CodeFailed, []string{"out:x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
				say(llm.Usage{}, nil, call("c1", tc.call, `{"text":"x"}`)),
				say(llm.Usage{}, []string{"ok"}),
			}}
			cfg := Config{Provider: p, Tools: tool.NewSet(tc.tool)}
			if tc.deny {
				cfg.Approve = func(context.Context, ApprovalRequest) (Approval, error) {
					return Approval{Reason: "no thanks"}, nil
				}
			}
			rec := &recorder{}
			if _, err := New(cfg).Run(t.Context(), nil, llm.UserText("go"), rec); err != nil {
				t.Fatal(err)
			}
			var outputs []string
			for _, o := range of[protocol.ToolOutput](rec) {
				outputs = append(outputs, o.Content)
			}
			if diff := cmp.Diff(tc.wantOutput, outputs); diff != "" {
				t.Errorf("tool_output contents (-want +got):\n%s", diff)
			}
			if ends := of[protocol.ToolEnd](rec); len(ends) != 1 || ends[0].Success || ends[0].ErrorCode != tc.wantCode {
				t.Errorf("tool_end = %+v, want one failure with error_code %q", ends, tc.wantCode)
			}
		})
	}
}
