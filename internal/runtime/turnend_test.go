package runtime

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
)

// failing is a provider whose every call fails as a rejected key does.
type failing struct{}

func (failing) Name() string  { return "failing" }
func (failing) Model() string { return "failing-1" }
func (failing) Stream(context.Context, *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		yield(llm.Event{}, &llm.Error{Kind: llm.KindAuth, Provider: "failing", Message: "bad key"})
	}
}

// TestPromptAfterFailedCall: the error of a failed model call ends the
// turn (docs/protocol.md), so a prompt sent on reading it runs. The error
// went out while the run was still on: a client that answered it at once
// was now and then (about one in two thousand) refused as busy. Each
// frame is checked as it is published, when the next prompt could come.
func TestPromptAfterFailedCall(t *testing.T) {
	t.Parallel()
	v := prototest.Validator(t)
	var h *harness
	busyAt := make(chan string, 4)
	cfg := Config{Provider: failing{}, Validate: func(data []byte) error {
		if strings.Contains(string(data), "bad key") {
			h.rt.mu.Lock()
			if h.rt.run != nil && !h.rt.run.finished {
				busyAt <- string(data)
			}
			h.rt.mu.Unlock()
		}
		return v.ValidateServerFrame(data)
	}}
	h = newHarness(t, cfg, ConnectOptions{})
	for i := 1; i <= 2; i++ {
		if err := h.handle(protocol.Prompt{Content: "hi"}); err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		h.waitType("error", i)
	}
	close(busyAt)
	for f := range busyAt {
		t.Errorf("published while a prompt would be refused as busy: %s", f)
	}
	want := []string{"response_start", "response_end", "error"}
	if got := h.types(); !slicesHasSuffix(got, want) {
		t.Errorf("frames %v, want them to end with %v", got, want)
	}
}

func slicesHasSuffix(s, suffix []string) bool {
	return len(s) >= len(suffix) && strings.Join(s[len(s)-len(suffix):], ",") == strings.Join(suffix, ",")
}
