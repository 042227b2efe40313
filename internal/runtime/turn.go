package runtime

import (
	"context"
	"errors"

	"github.com/maestro-run/maestro/internal/protocol"
)

// TurnFunc runs one prompt in place of the agent: an llm-free runtime such
// as the hosted runner's deterministic fixture agent (wire contract §17). It
// runs in the prompt's goroutine; ctx ends on interrupt or shutdown. An
// error it returns is published as a non-fatal error.
type TurnFunc func(ctx context.Context, t *Turn, m protocol.Prompt) error

// Turn is what a TurnFunc may do during its prompt.
type Turn struct {
	r   *Runtime
	run *activeRun
}

// Publish sends m to every subscription through the publish path.
func (t *Turn) Publish(m protocol.Message) { t.r.publish(m, "") }

// PublishLast publishes m once the run has ended, when the runtime takes
// a new prompt again: the wire has no "run over" message, so a client that
// sends its next prompt on seeing the turn's last message would otherwise
// race the run's end and be refused as busy.
func (t *Turn) PublishLast(m protocol.Message) {
	t.run.last = append(t.run.last, m)
}

// Approval raises an approval server request (request_id, tool, args and
// reason as given; call_id defaults to the request id) and waits for its
// resolution. It returns the resolution, its reason, and an error when the
// runtime cancelled the request or ctx ended.
func (t *Turn) Approval(ctx context.Context, req protocol.ServerRequest) (protocol.Resolution, string, error) {
	req.RequestType = protocol.RequestApproval
	if req.CallID == "" {
		req.CallID = req.RequestID
	}
	o, err := t.r.raise(ctx, t.run.id, req)
	return o.resolution, o.reason, err
}

// runTurn runs a prompt with cfg.Turn instead of the agent and returns
// the turn's error.
func (r *Runtime) runTurn(ctx context.Context, run *activeRun, m protocol.Prompt) error {
	err := r.cfg.Turn(ctx, &Turn{r: r, run: run}, m)
	if _, done := errors.AsType[published](err); err != nil && ctx.Err() == nil && !done {
		r.finish(run)
		r.publish(protocol.Error{Message: err.Error(), ErrorType: Classify(err.Error(), false)}, "")
	}
	// No response_end closes a turn without a model: the turn is over.
	r.logMu.Lock()
	r.state.s.IsResponding = false
	r.logMu.Unlock()
	return err
}

// Broadcast publishes m to every subscription as the runtime's own message
// (the hosted runner's drain and restore statuses).
func (r *Runtime) Broadcast(m protocol.Message) { r.publish(m, "") }
