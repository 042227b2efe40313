package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
)

// newBare returns a started runtime with no subscriptions.
func newBare(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	if cfg.Provider == nil {
		cfg.Provider = &capture{}
	}
	if cfg.Tools == nil {
		cfg.Tools = func(context.Context) (*toolSet, error) { return nil, nil }
	}
	cfg.Validate = prototest.Validator(t).ValidateServerFrame
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// newLossless returns a started runtime whose ring holds frames frames
// (0: the default) and the lossless subscription, from the oldest frame,
// of its local connection: the stdio writer's.
func newLossless(t *testing.T, frames int) (*Runtime, *Subscription) {
	t.Helper()
	rt := newBare(t, Config{BufferFrames: frames})
	c, _ := rt.Connect(ConnectOptions{ID: "local", Local: true})
	sub, err := c.Subscribe(SubscribeOptions{From: FromOldest, Lossless: true})
	if err != nil {
		t.Fatal(err)
	}
	return rt, sub
}

func status(i int) protocol.Status { return protocol.Status{Message: fmt.Sprintf("s%d", i)} }

// ready reads every frame available now.
func ready(t *testing.T, s *Subscription) []Frame {
	t.Helper()
	var out []Frame
	for {
		f, ok, err := s.TryNext()
		if err != nil {
			t.Fatalf("TryNext: %v", err)
		}
		if !ok {
			return out
		}
		out = append(out, f)
	}
}

// drain reads the status messages of every frame available now.
func drain(t *testing.T, s *Subscription) []string {
	t.Helper()
	var out []string
	for _, f := range ready(t, s) {
		out = append(out, f.Message.(protocol.Status).Message)
	}
	return out
}

// TestLosslessBackpressure: a lossless subscription that does not read
// stops publishers once the ring is full, instead of losing frames or
// growing memory; reading lets them go on, and every frame arrives in
// order.
func TestLosslessBackpressure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rt, sub := newLossless(t, 4)
		published := make(chan int, 100)
		go func() {
			for i := range 10 {
				rt.publish(status(i), "")
				published <- i
			}
			close(published)
		}()
		synctest.Wait()
		if n := len(published); n != 4 {
			t.Fatalf("%d frames published before the reader read anything, want 4 (the ring)", n)
		}
		var got []string
		for len(got) < 10 {
			f, err := sub.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, f.Message.(protocol.Status).Message)
			synctest.Wait()
			rt.logMu.Lock()
			n := rt.hub.Len()
			rt.logMu.Unlock()
			if n > 4 {
				t.Fatalf("ring holds %d frames, bound is 4", n)
			}
		}
		for i, s := range got {
			if s != fmt.Sprintf("s%d", i) {
				t.Fatalf("frames out of order: %v", got)
			}
		}
	})
}

// TestLossyLagAndResync: a lossy subscription that falls behind the ring,
// or beyond its MaxBacklog, gets ErrLagged; Resync returns a snapshot at
// the newest cursor and resumes from there.
func TestLossyLagAndResync(t *testing.T) {
	t.Parallel()
	rt := newBare(t, Config{BufferFrames: 4})
	c, _ := rt.Connect(ConnectOptions{ID: "local", Local: true})
	evicted, _ := c.Subscribe(SubscribeOptions{From: FromNow})
	backlog, _ := c.Subscribe(SubscribeOptions{From: FromNow, MaxBacklog: 2})
	for i := range 3 {
		rt.publish(status(i), "")
	}
	if _, _, err := backlog.TryNext(); !errors.Is(err, ErrLagged) {
		t.Errorf("3 unread frames with MaxBacklog 2: %v, want ErrLagged", err)
	}
	if got := drain(t, evicted); len(got) != 3 {
		t.Errorf("within the ring: %v", got)
	}
	for i := 3; i < 10; i++ {
		rt.publish(status(i), "")
	}
	if _, _, err := evicted.TryNext(); !errors.Is(err, ErrLagged) {
		t.Fatalf("after eviction: %v, want ErrLagged", err)
	}
	snap := evicted.Resync()
	if snap.Cursor != 10 || snap.State.LastStatus != "s9" {
		t.Errorf("resync snapshot cursor %d last_status %q, want 10 and s9", snap.Cursor, snap.State.LastStatus)
	}
	rt.publish(status(10), "")
	if got := drain(t, evicted); len(got) != 1 || got[0] != "s10" {
		t.Errorf("after resync: %v", got)
	}
}

// TestReplayFromCursor: FromCursor replays what is buffered after the
// cursor; a cursor older than the buffer (or negative) is a replay gap.
func TestReplayFromCursor(t *testing.T) {
	t.Parallel()
	rt := newBare(t, Config{BufferFrames: 4})
	c, _ := rt.Connect(ConnectOptions{ID: "local", Local: true})
	for i := range 6 { // cursors 1..6; 1 and 2 are evicted
		rt.publish(status(i), "")
	}
	tests := []struct {
		cursor int64
		want   []string
		gap    bool
	}{
		{-1, nil, true},
		{1, nil, true},
		{2, []string{"s2", "s3", "s4", "s5"}, false},
		{4, []string{"s4", "s5"}, false},
		{6, nil, false},
		{99, nil, false},
	}
	for _, tt := range tests {
		s, err := c.Subscribe(SubscribeOptions{From: FromCursor, Cursor: tt.cursor})
		if tt.gap {
			if !errors.Is(err, ErrReplayGap) {
				t.Errorf("cursor %d: %v, want ErrReplayGap", tt.cursor, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cursor %d: %v", tt.cursor, err)
		}
		if got := drain(t, s); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("cursor %d: replay %v, want %v", tt.cursor, got, tt.want)
		}
		s.Close()
	}
}

// TestFilters: private frames reach only their connection; opt-outs apply
// per connection or per subscription; hello_ok is never filtered;
// raw_agent_event only reaches connections that negotiated it.
func TestFilters(t *testing.T) {
	t.Parallel()
	rt := newBare(t, Config{})
	a, _ := rt.Connect(ConnectOptions{ID: "a", OptOutNotifications: []protocol.Notification{protocol.NotifyStatus}})
	b, _ := rt.Connect(ConnectOptions{ID: "b", Role: protocol.RoleViewer, Capabilities: &protocol.Capabilities{RawAgentEvents: ptr(true)}})
	sa, _ := a.Subscribe(SubscribeOptions{From: FromNow})
	sb, _ := b.Subscribe(SubscribeOptions{From: FromNow})
	sbOpt, _ := b.Subscribe(SubscribeOptions{From: FromNow, OptOut: []protocol.Notification{protocol.NotifyStatus}})
	rt.publish(protocol.Status{Message: "hi"}, "")
	rt.publish(protocol.HelloOK{ProtocolVersion: protocol.Version}, "a")
	rt.publish(protocol.RawAgentEvent{EventType: "message", Event: raw(`{}`)}, "")
	rt.publish(protocol.ToolStart{CallID: "c"}, "")
	types := func(s *Subscription) []string {
		var out []string
		for _, f := range ready(t, s) {
			out = append(out, f.Message.MessageType())
		}
		return out
	}
	for _, tt := range []struct {
		name string
		s    *Subscription
		want string
	}{
		{"a (opted out of status)", sa, "[hello_ok tool_start]"},
		{"b (raw events)", sb, "[status raw_agent_event tool_start]"},
		{"b, subscription opted out of status", sbOpt, "[raw_agent_event tool_start]"},
	} {
		if got := fmt.Sprint(types(tt.s)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestCloseEndsSubscriptions: after Close a subscription reads what was
// buffered, then io.EOF.
func TestCloseEndsSubscriptions(t *testing.T) {
	t.Parallel()
	rt, s := newLossless(t, 0)
	rt.publish(status(0), "")
	rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := s.Next(ctx)
	if err != nil || f.Message.(protocol.Status).Message != "s0" {
		t.Fatalf("Next = %v, %v", f.Message, err)
	}
	if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the buffer: %v, want io.EOF", err)
	}
}

// TestReducerBuffers: streamed text, tool output and command output are
// assembled in the snapshot; command output keeps its last 32,768
// characters.
func TestReducerBuffers(t *testing.T) {
	t.Parallel()
	st := newState()
	for _, m := range []protocol.Message{
		protocol.ResponseStart{ResponseID: "r"},
		protocol.ResponseChunk{ResponseID: "r", Content: "Hel"},
		protocol.ResponseChunk{ResponseID: "r", Content: "hm", IsThinking: true},
		protocol.ResponseChunk{ResponseID: "r", Content: "lo"},
		protocol.ResponseChunk{ResponseID: "other", Content: "ignored"},
		protocol.ToolCall{CallID: "c", Tool: "Bash", Args: raw(`{}`)},
		protocol.ToolStart{CallID: "c"},
		protocol.ToolOutput{CallID: "c", Content: "a"},
		protocol.ToolOutput{CallID: "c", Content: "b"},
		protocol.UtilityCommandStarted{CommandID: "u", Command: "yes", ShellMode: protocol.ShellModeShell, TerminalMode: protocol.TerminalPipe},
	} {
		st.apply(m)
	}
	for range 100 {
		st.apply(protocol.UtilityCommandOutput{CommandID: "u", Stream: protocol.StreamStdout, Content: strings.Repeat("é", 3000)})
	}
	st.apply(protocol.UtilityCommandOutput{CommandID: "u", Stream: protocol.StreamStdout, Content: "END"})
	s := st.snapshot("")
	if c := s.CurrentResponse; c == nil || c.Text != "Hello" || c.Thinking != "hm" {
		t.Errorf("current_response = %+v", c)
	}
	if len(s.ActiveTools) != 1 || s.ActiveTools[0].Output != "ab" || s.ActiveTools[0].Tool != "Bash" {
		t.Errorf("active_tools = %+v", s.ActiveTools)
	}
	out := s.ActiveUtilityCommands[0].Output
	if n := utf8.RuneCountInString(out); n != protocol.MaxActiveCommandOutput || !strings.HasSuffix(out, "éEND") {
		t.Errorf("command output: %d characters, suffix %q", n, out[len(out)-8:])
	}
	st.apply(protocol.ResponseEnd{ResponseID: "r", DurationMS: 5})
	st.apply(protocol.ToolEnd{CallID: "c"})
	s = st.snapshot("")
	if s.CurrentResponse != nil || s.IsResponding || len(s.ActiveTools) != 0 || len(s.TrackedTools) != 0 || *s.LastResponseDurationMS != 5 {
		t.Errorf("after the ends: %+v", s)
	}
}

// BenchmarkPublish publishes one status per iteration to N lossy
// subscriptions (SSE streams without transport), each read on its own
// goroutine, and waits until every one has it: ns/op is the publish path
// (encode, validate, reduce, buffer) plus the fan-out to N readers.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			rt, err := New(Config{Provider: &capture{}, Tools: func(context.Context) (*toolSet, error) { return nil, nil }})
			if err != nil {
				b.Fatal(err)
			}
			c, _ := rt.Connect(ConnectOptions{ID: "bench", Passive: true})
			got := make(chan struct{}, n)
			done := make(chan struct{}, n)
			for range n {
				s, err := c.Subscribe(SubscribeOptions{From: FromNow})
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer func() { done <- struct{}{} }()
					for {
						if _, err := s.Next(context.Background()); err != nil {
							return
						}
						got <- struct{}{}
					}
				}()
			}
			m := protocol.Status{Message: "working"}
			b.ResetTimer()
			for range b.N {
				rt.publish(m, "")
				for range n {
					<-got
				}
			}
			b.StopTimer()
			rt.Close()
			for range n {
				<-done
			}
		})
	}
}
