package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// TestRunPrompt: a local client's prompt returns once its run has ended,
// with the agent's result, every frame of the run already published; when
// the client's context ends first the run is interrupted as by an
// interrupt message, and RunPrompt still returns only once it has ended.
func TestRunPrompt(t *testing.T) {
	t.Parallel()
	t.Run("returns the result once the run has ended", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, Config{Provider: scenario(t, "Write", writeFrames), ApprovalMode: protocol.ApprovalAuto}, ConnectOptions{})
		res, err := h.conn.RunPrompt(context.Background(), protocol.Prompt{Content: "go"})
		if err != nil {
			t.Fatalf("RunPrompt: %v", err)
		}
		if res.Iterations != 2 || res.Tools.CallsSucceeded != 1 || res.Final != "done" {
			t.Errorf("result = %+v, want 2 model calls, 1 tool call, final text done", res)
		}
		if st := h.rt.Snapshot().State; st.IsResponding {
			t.Error("the runtime still responds after RunPrompt returned")
		}
		h.waitType("response_end", 2)
	})
	t.Run("its context ending interrupts the run", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, Config{Provider: scenario(t, "Write", writeFrames)}, ConnectOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			h.waitType("server_request", 1) // the run waits for an approval
			cancel()
		}()
		_, err := h.conn.RunPrompt(ctx, protocol.Prompt{Content: "go"})
		if !errors.Is(err, agent.ErrCancelled) {
			t.Fatalf("RunPrompt error = %v, want agent.ErrCancelled", err)
		}
		h.waitType("server_request_resolved", 1)
		resolved := ofType[protocol.ServerRequestResolved](h)
		if len(resolved) != 1 || resolved[0].Resolution != protocol.ResolutionCancelled || resolved[0].Reason != reasonsInterrupt.requests {
			t.Errorf("resolutions = %+v, want the approval cancelled as by an interrupt", resolved)
		}
	})
	t.Run("a second prompt while one runs is refused", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, Config{Provider: scenario(t, "Write", writeFrames)}, ConnectOptions{})
		if err := h.handle(protocol.Prompt{Content: "first"}); err != nil {
			t.Fatal(err)
		}
		h.waitType("server_request", 1)
		if _, err := h.conn.RunPrompt(context.Background(), protocol.Prompt{Content: "second"}); err == nil || err.Error() != msgBusy {
			t.Errorf("second prompt: %v, want %q", err, msgBusy)
		}
	})
}

// TestRelease: Close releases what the runtime was built over once, after
// the runtime has stopped, and returns its error.
func TestRelease(t *testing.T) {
	t.Parallel()
	calls := 0
	saved := errors.New("save the log: disk full")
	rt, err := New(Config{Provider: &capture{}, Tools: func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil }, Release: func() error { calls++; return saved }})
	if err != nil {
		t.Fatal(err)
	}
	rt.Start()
	if err := rt.Close(); !errors.Is(err, saved) {
		t.Errorf("Close = %v, want the release's error", err)
	}
	if err := rt.Close(); err != nil || calls != 1 {
		t.Errorf("second Close = %v after %d release(s), want nil after 1", err, calls)
	}
}

// TestTurnRuntimeNeedsNoProvider: a runtime whose prompts all run through
// Turn (an agent CLI) has no llm.Provider; ready names what runs them.
func TestTurnRuntimeNeedsNoProvider(t *testing.T) {
	t.Parallel()
	turn := func(_ context.Context, tn *Turn, m protocol.Prompt) error {
		tn.Publish(protocol.Status{Message: "ran " + m.Content})
		return nil
	}
	h := newHarness(t, Config{ProviderName: "fake-cli", Model: "default", Turn: turn}, ConnectOptions{})
	h.waitType("ready", 1)
	ready := ofType[protocol.Ready](h)[0]
	if ready.Provider != "fake-cli" || ready.Model != "default" {
		t.Errorf("ready names %s/%s, want fake-cli/default", ready.Provider, ready.Model)
	}
	if _, err := h.conn.RunPrompt(context.Background(), protocol.Prompt{Content: "x"}); err != nil {
		t.Fatal(err)
	}
	h.waitType("status", 1)
	if st := ofType[protocol.Status](h); len(st) != 1 || st[0].Message != "ran x" {
		t.Errorf("statuses = %+v", st)
	}
	if _, err := New(Config{ProviderName: "x", Turn: turn}); err != nil {
		t.Errorf("a turn runtime without tools: %v", err)
	}
	for _, cfg := range []Config{{}, {ProviderName: "x"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a runtime with neither a provider nor a turn", cfg)
		}
	}
}
