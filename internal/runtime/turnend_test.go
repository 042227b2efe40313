package runtime

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
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

// busyWatch checks, as each frame containing mark is published (when a
// client reading it could send its next prompt), that a prompt would not
// be refused as busy.
type busyWatch struct {
	h    *harness
	mark string
	mu   sync.Mutex
	busy []string
}

// validate is the harness's Config.Validate.
func (w *busyWatch) validate(t testing.TB) func([]byte) error {
	v := prototest.Validator(t)
	return func(data []byte) error {
		if strings.Contains(string(data), w.mark) {
			w.h.rt.mu.Lock()
			refused := w.h.rt.run != nil && !w.h.rt.run.finished
			w.h.rt.mu.Unlock()
			if refused {
				w.mu.Lock()
				w.busy = append(w.busy, string(data))
				w.mu.Unlock()
			}
		}
		return v.ValidateServerFrame(data)
	}
}

// run sends two prompts of content, each after the frame of type last,
// and reports the frames published while a prompt would have been
// refused.
func (w *busyWatch) run(t *testing.T, cfg Config, content, last string) {
	t.Helper()
	cfg.Validate = w.validate(t)
	w.h = newHarness(t, cfg, ConnectOptions{})
	for i := 1; i <= 2; i++ {
		if err := w.h.handle(protocol.Prompt{Content: content}); err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		w.h.waitType(last, i)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.busy {
		t.Errorf("published while a prompt would be refused as busy: %s", f)
	}
}

// TestPromptAfterFailedCall: the error of a failed model call ends the
// turn (docs/protocol.md), so a prompt sent on reading it runs. The error
// went out while the run was still on: a client that answered it at once
// was now and then (about one in two thousand) refused as busy.
func TestPromptAfterFailedCall(t *testing.T) {
	t.Parallel()
	w := &busyWatch{mark: "bad key"}
	w.run(t, Config{Provider: failing{}}, "hi", "error")
	want := []string{"response_start", "response_end", "error"}
	if got := w.h.types(); !slicesHasSuffix(got, want) {
		t.Errorf("frames %v, want them to end with %v", got, want)
	}
}

// TestPromptAfterTurnEnd: a turn run without the agent (an agent CLI's,
// maestro headless --agent) ends with the CLI's response_end, or with
// the error it returned; a prompt sent on reading either runs. Both went
// out while the run was on: 16 of 40 prompts sent on reading the
// response_end of a fake CLI's turn were refused as busy.
func TestPromptAfterTurnEnd(t *testing.T) {
	t.Parallel()
	for _, last := range []string{"response_end", "error"} {
		t.Run(last, func(t *testing.T) {
			t.Parallel()
			w := &busyWatch{mark: `"type":"` + last + `"`}
			turn := func(_ context.Context, tn *Turn, _ protocol.Prompt) error {
				tn.Publish(protocol.ResponseStart{ResponseID: "resp_1"})
				tn.Publish(protocol.ResponseEnd{ResponseID: "resp_1", ToolsSummary: protocol.ToolsSummary{ToolsUsed: []string{}}})
				if last == "error" {
					return errors.New("auth_expired: bad key") // published by the runtime
				}
				return nil
			}
			w.run(t, Config{Provider: &capture{}, Turn: turn}, "hi", last)
		})
	}
}

// TestPromptAfterCLIFailure: an agent CLI that fails on start (a bad key,
// said on stderr, exit 1) ends its turn with the error classified from
// its exit, and a prompt sent on reading it runs (1 in 60 was refused as
// busy).
func TestPromptAfterCLIFailure(t *testing.T) {
	t.Parallel()
	cfg, _ := cliConfig(t, loadDef(t, "fake-agent"), testdataPath(t, "user-adapter/fake-agent"), protocol.ApprovalPrompt)
	w := &busyWatch{mark: "auth_expired"}
	w.run(t, cfg, "fail-auth", "error")
}

func slicesHasSuffix(s, suffix []string) bool {
	return len(s) >= len(suffix) && strings.Join(s[len(s)-len(suffix):], ",") == strings.Join(suffix, ",")
}
