package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
)

// TestKeepProgressContinuesInterruptedMovement: with KeepProgress, a run
// interrupted in the middle of a movement (after a round of tool results)
// is resumed in that movement with its conversation, not briefed afresh;
// every saved state reaches StateSaved, and the replay script plays on
// from the right frame to the end.
func TestKeepProgressContinuesInterruptedMovement(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var saved []string
	keep := func(c *Config) {
		c.KeepProgress = true
		c.StateSaved = func(movement string, data []byte) error {
			var st State
			if err := json.Unmarshal(data, &st); err != nil || st.Movement != movement {
				t.Errorf("StateSaved(%q) got a document for movement %q, err %v", movement, st.Movement, err)
			}
			mu.Lock()
			saved = append(saved, string(data))
			mu.Unlock()
			return nil
		}
	}
	// Frame 1 (gather's second turn) is cut short, after Read's result.
	sink := &cancelOnFrame{n: 2, cancel: cancel}
	h := newHarness(t, "chain", keep, func(c *Config) { c.Sink = sink })
	out, err := h.engine().Start(ctx, h.piece("chain"), "List the fruit.", StartOptions{})
	if !errors.Is(err, agent.ErrCancelled) || out.Movement != "gather" {
		t.Fatalf("interrupted: %+v, %v", out, err)
	}
	st, err := LoadState(h.ws) // no RunDir: the run's files are in the workspace
	if err != nil {
		t.Fatal(err)
	}
	var roles []llm.Role
	for _, m := range st.Progress {
		roles = append(roles, m.Role)
	}
	if want := []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleUser}; !slices.Equal(roles, want) {
		t.Fatalf("saved progress roles = %v, want %v (the briefing, Read's call, its result)", roles, want)
	}
	mu.Lock()
	last := saved[len(saved)-1]
	mu.Unlock()
	if !strings.Contains(last, `"progress"`) || !strings.Contains(last, "apples") {
		t.Errorf("the last state StateSaved got lacks the movement's progress:\n%s", last)
	}

	resumed := resumeChain(t, h, 2, "resumed gather", "3\tplums", "Maestro was interrupted during this movement and has resumed it (interrupted)", "carry on with movement gather")
	if strings.Contains(resumed, "# Restart") {
		t.Errorf("resumed gather was briefed afresh:\n%s", resumed)
	}
	if got, _ := LoadState(h.ws); got != nil && len(got.Progress) != 0 {
		t.Errorf("progress kept after the run ended: %d messages", len(got.Progress))
	}
}

// resumeChain resumes h's interrupted run of piece chain to its success
// after three movements, checks that the text of the k-th model request
// (what) holds each of wants, and returns that text.
func resumeChain(t *testing.T, h *harness, k int, what string, wants ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	out, err := h.engine().Resume(ctx, "")
	if err != nil || out.Status != StatusSucceeded || out.Movements != 3 {
		t.Fatalf("resumed: %+v, %v", out, err)
	}
	got := text(h.prov.requests()[k])
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, got)
		}
	}
	return got
}
