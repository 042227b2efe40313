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
	// hold holds a response_end until the next message, or until the
	// turn is over (as the agent's sink does).
	hold *runSink
}

// Publish sends m to every subscription through the publish path. A
// response_end goes out with the next message, or once the turn is over:
// it may be the turn's last, on which a client sends its next prompt (an
// agent CLI's turn ends with the CLI's response_end). An error the turn
// ends with goes through PublishLast.
func (t *Turn) Publish(m protocol.Message) { t.hold.Event(m) }

// publishHeld publishes m as Publish does a response_end: with the next
// message, or once the turn is over.
func (t *Turn) publishHeld(m protocol.Message) { t.hold.publish(m, true) }

// raise raises req for the turn's run, after what Publish holds.
func (t *Turn) raise(ctx context.Context, req protocol.ServerRequest) (outcome, error) {
	t.hold.flush()
	return t.r.raise(ctx, t.run.id, req)
}

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
	o, err := t.raise(ctx, req)
	return o.resolution, o.reason, err
}

// runTurn runs a prompt with cfg.Turn instead of the agent and returns
// the turn's error.
func (r *Runtime) runTurn(ctx context.Context, run *activeRun, m protocol.Prompt) error {
	t := &Turn{r: r, run: run, hold: &runSink{r: r, holdEnd: true, plain: true}}
	err := r.cfg.Turn(ctx, t, m)
	r.finish(run)
	t.hold.flush()
	if _, done := errors.AsType[published](err); err != nil && ctx.Err() == nil && !done {
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
