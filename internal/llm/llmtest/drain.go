package llmtest

import (
	"iter"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
)

// Outcome is everything one Provider.Stream call produced: its deltas,
// then either the final response or an error.
type Outcome struct {
	Deltas   []llm.Event
	Response *llm.Response
	Err      error
}

// Drain consumes a provider's stream, failing t where it breaks the
// llm.Provider contract: anything after an error or after EventDone, an
// EventDone without a response, or an end with neither.
func Drain(t testing.TB, seq iter.Seq2[llm.Event, error]) Outcome {
	t.Helper()
	var r Outcome
	for ev, err := range seq {
		switch {
		case r.Err != nil || r.Response != nil:
			t.Fatalf("item after the end of the stream: %+v, %v", ev, err)
		case err != nil:
			r.Err = err
		case ev.Type == llm.EventDone:
			if ev.Response == nil {
				t.Fatal("EventDone without a response")
			}
			r.Response = ev.Response
		default:
			r.Deltas = append(r.Deltas, ev)
		}
	}
	if r.Err == nil && r.Response == nil {
		t.Fatal("stream ended without EventDone or an error")
	}
	return r
}
