package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// launch runs a Launch over the harness's configuration.
func (h *harness) launch(l Launch) (*Outcome, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), testTimeout)
	defer cancel()
	l.Config = h.cfg
	return l.Run(ctx)
}

// TestLaunchAskAnswerAndEnd: Launch starts a new run of the given piece
// (a classified event first, with the run's id), leaves a run that waits
// for the user waiting when Answer gives nothing (ErrNeedsAnswer), asks
// Answer only then and continues with its answer, and returns a run that
// has ended as it stands, without an error.
func TestLaunchAskAnswerAndEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "ask")
	out, err := h.launch(Launch{Task: "Paint the fence.", Piece: "ask", RunID: "run_launch"})
	if err != nil || out.Status != StatusWaitingHuman || out.RunID != "run_launch" {
		t.Fatalf("start: %+v, %v", out, err)
	}
	recs := h.rec.records
	if c, ok := recs[0].Event.(Classified); !ok || c.Piece != "ask" || !c.Override || recs[0].RunID != "run_launch" {
		t.Errorf("first run event = %+v, want classified ask (given) of run_launch", recs[0])
	}

	asked := 0
	none := func(context.Context) (string, error) { asked++; return "", nil }
	if _, err := h.launch(Launch{Task: "ignored: Answer is set", Answer: none}); !errors.Is(err, ErrNeedsAnswer) || asked != 1 {
		t.Errorf("no answer: %v after %d call(s), want ErrNeedsAnswer after 1", err, asked)
	}
	blue := func(context.Context) (string, error) { asked++; return "blue", nil }
	out, err = h.launch(Launch{Task: "ignored: Answer is set", Answer: blue})
	if err != nil || out.Status != StatusSucceeded || out.Result != "The fence is painted blue." || asked != 2 {
		t.Fatalf("answered: %+v, %v (Answer called %d times)", out, err, asked)
	}
	wantKinds := []EventKind{KindClassified, KindRunStarted, KindMovementStarted, KindWaiting, KindResumed, KindMovementStarted, KindComplete}
	if diff := cmp.Diff(wantKinds, h.rec.kinds()); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}

	out, err = h.launch(Launch{Answer: blue})
	if err != nil || out.Status != StatusSucceeded || asked != 2 {
		t.Errorf("a run that has ended: %+v, %v; Answer called %d times, want 2", out, err, asked)
	}
}

// TestLaunchFollowUpAndChoice: a new run after a finished one takes its
// piece and continues its replay script after its model turns, with the
// follow-up task; a piece that cannot be chosen is a *ClassifyError, and
// no run starts.
func TestLaunchFollowUpAndChoice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "chain")
	if _, err := h.launch(Launch{Task: "x", Piece: "nowhere"}); err == nil {
		t.Fatal("unknown piece: no error")
	} else if cerr := (*ClassifyError)(nil); !errors.As(err, &cerr) || !strings.Contains(err.Error(), `unknown piece "nowhere"`) {
		t.Errorf("unknown piece: %v, want a ClassifyError naming it", err)
	}
	if ok, err := HasState(h.ws); ok || err != nil {
		t.Errorf("a run started for an unknown piece: %v, %v", ok, err)
	}

	prev := &State{Piece: "chain", Task: "List the fruit.", Status: StatusSucceeded, Result: "Apples.", ModelTurns: 0}
	out, err := h.launch(Launch{Task: "Now in French.", Previous: prev})
	if err != nil || out.Status != StatusSucceeded || out.Piece != "chain" {
		t.Fatalf("follow-up: %+v, %v", out, err)
	}
	st, err := LoadState(h.ws)
	if err != nil {
		t.Fatal(err)
	}
	if st.Task != FollowUp(prev, "Now in French.") || !strings.Contains(st.Task, "Earlier result (succeeded):\nApples.") {
		t.Errorf("follow-up task = %q", st.Task)
	}
}

// TestLaunchReplayFallback: a replay run given no piece takes the fallback
// piece without asking a classifier, and its classified event says so
// ("fallback"), not that the piece was given.
func TestLaunchReplayFallback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "chain")
	lib, err := NewLibrary(t.Context(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.Library = lib
	_, _ = h.launch(Launch{Task: "List the fruit.", RunID: "run_fallback"}) // the run's end is not this test's concern
	recs := h.rec.records
	if len(recs) == 0 {
		t.Fatal("no run event")
	}
	c, ok := recs[0].Event.(Classified)
	if !ok || c.Piece != FallbackPiece || c.Override || !c.Fallback {
		t.Fatalf("first run event = %+v, want classified %s (fallback)", recs[0], FallbackPiece)
	}
	if d := c.Describe(); d != "piece general (fallback: a replay run is not classified)" {
		t.Errorf("described as %q", d)
	}
}
