package engine

import (
	"context"
	"fmt"
	"iter"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
)

// atFrame places a movement's conversation at its position in the run for
// a replay provider.
//
// A replay provider plays frame k, where k is the number of assistant
// messages in the request (docs/replay.md). The engine starts every
// movement with a fresh conversation, so on its own the provider would
// play frame 0 again at every movement. A piece run on replay instead
// numbers frames across the whole run: frame k is the run's k-th model
// turn, whichever movement makes it. atFrame does this by putting base
// empty assistant messages in front of the request's messages; the replay
// provider only counts them and reads tool results from the last user
// message, so nothing else changes. Other providers are returned as they
// are.
func atFrame(p llm.Provider, base int) llm.Provider {
	if base <= 0 || p.Name() != replay.ProviderName {
		return p
	}
	return framed{Provider: p, base: base}
}

type framed struct {
	llm.Provider
	base int
}

func (f framed) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	r := *req
	msgs := make([]llm.Message, f.base, f.base+len(req.Messages))
	for i := range msgs {
		msgs[i] = llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{}}
	}
	r.Messages = append(msgs, req.Messages...)
	return f.Provider.Stream(ctx, &r)
}

// isReplay reports whether p plays a scripted scenario.
func isReplay(p llm.Provider) bool { return p.Name() == replay.ProviderName }

// replaySubtasks gives the subtasks of a run on a replay scenario that
// names their scripts (its subtasks, docs/replay.md) their models:
// subtask n plays the scenario's n-th. Nil when p is not such a replay.
// A wrapped replay counts (maestro run wraps its model in llm.WithRetry).
func replaySubtasks(p llm.Provider) func(SubtaskRecord) (llm.Provider, error) {
	for {
		w, ok := p.(interface{ Unwrap() llm.Provider })
		if !ok {
			break
		}
		p = w.Unwrap()
	}
	rp, ok := p.(*replay.Provider)
	if !ok || len(rp.Scenario().Subtasks) == 0 {
		return nil
	}
	subs := rp.Scenario().Subtasks
	return func(s SubtaskRecord) (llm.Provider, error) {
		if s.ID < 1 || s.ID > len(subs) {
			return nil, fmt.Errorf("the replay scenario %s scripts %d subtasks, not subtask %d", rp.Scenario().ID, len(subs), s.ID)
		}
		return replay.New(subs[s.ID-1]), nil
	}
}
