package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/store"
)

// An MCP server's elicitation during a queued job is an ASK (docs/mcp.md,
// "Elicitation in queued jobs"): the job parks in waiting_human with the
// server's question while its run stays where it is, inside the tool call
// in this process; the user's comment, read by the job's next attempt,
// is the answer, and that attempt follows the same run to its end.

// DefaultElicitTimeout is how long a parked run waits for the answer to
// an MCP server's question before it stops (JobMCP.ElicitTimeout).
const DefaultElicitTimeout = 24 * time.Hour

// jobRun is one job's run, which may outlive the attempt that started it
// (parked on an elicitation) and finish under a later one.
type jobRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	// asks carries the run's elicitations to the attempt following it;
	// done its result.
	asks chan *asking
	done chan Result

	mu      sync.Mutex
	ems     []*emitter
	prov    llm.Provider
	pending *asking // the question the job waits on
	// materialised says the job's files were fetched from the artifact
	// store: only then may the attempt's final sync write them back.
	materialised atomic.Bool
}

// asking is one elicitation waiting for an answer.
type asking struct {
	server string
	params *sdk.ElicitParams
	answer chan *sdk.ElicitResult
}

func newJobRun(ctx context.Context) *jobRun {
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	return &jobRun{ctx: rctx, cancel: cancel, asks: make(chan *asking), done: make(chan Result, 1)}
}

// follow registers an emitter of the run (and the run's model, named in
// a later attempt's ready message).
func (jr *jobRun) follow(em *emitter, prov llm.Provider) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	jr.ems, jr.prov = append(jr.ems, em), prov
}

// retarget sends the run's events to j's log (nil: keep them until an
// attempt follows the run again).
func (jr *jobRun) retarget(j *Job) {
	jr.mu.Lock()
	ems := jr.ems
	jr.mu.Unlock()
	for _, em := range ems {
		em.retarget(j)
	}
}

// status writes a status line to the run's log.
func (jr *jobRun) status(msg string) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	if len(jr.ems) > 0 {
		jr.ems[len(jr.ems)-1].Event(protocol.Status{Message: msg})
	}
}

// parked holds the runs of this runner that wait for an answer, by job.
type parked struct {
	mu   sync.Mutex
	runs map[int64]*jobRun
}

func (p *parked) put(id int64, jr *jobRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runs == nil {
		p.runs = map[int64]*jobRun{}
	}
	p.runs[id] = jr
}

// take removes and returns job id's parked run (nil: none).
func (p *parked) take(id int64) *jobRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	jr := p.runs[id]
	delete(p.runs, id)
	return jr
}

// drop forgets jr if it is still job id's parked run.
func (p *parked) drop(id int64, jr *jobRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runs[id] == jr {
		delete(p.runs, id)
	}
}

// Close stops the runs parked on a question (their MCP servers with
// them): a process that stops running jobs calls it. Their jobs stay
// waiting_human; the answer then restarts the run's movement.
func (r *engineRunner) Close() error {
	r.parked.mu.Lock()
	runs := r.parked.runs
	r.parked.runs = nil
	r.parked.mu.Unlock()
	for _, jr := range runs {
		jr.cancel(errRunnerClosed)
	}
	for _, jr := range runs {
		<-jr.done
	}
	return nil
}

// errRunnerClosed stops the parked runs of a runner that is closed.
var errRunnerClosed = errors.New("the job runner stopped")

// elicitFor returns the Elicit hook of job id's MCP servers: the question
// goes to the attempt following the run, which parks the job; the hook
// waits for the answer at most the elicitation timeout, then stops the
// run (a later attempt restarts its movement).
func (r *engineRunner) elicitFor(id int64, jr *jobRun) func(context.Context, string, *sdk.ElicitParams) (*sdk.ElicitResult, error) {
	timeout := DefaultElicitTimeout
	if r.cfg.MCP != nil && r.cfg.MCP.ElicitTimeout > 0 {
		timeout = r.cfg.MCP.ElicitTimeout
	}
	return func(ctx context.Context, server string, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
		cancelled := &sdk.ElicitResult{Action: "cancel"}
		a := &asking{server: server, params: p, answer: make(chan *sdk.ElicitResult, 1)}
		select {
		case jr.asks <- a:
		case <-ctx.Done():
			return cancelled, nil
		case <-jr.ctx.Done():
			return cancelled, nil
		}
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case res := <-a.answer:
			return res, nil
		case <-ctx.Done():
			return cancelled, nil
		case <-jr.ctx.Done():
			return cancelled, nil
		case <-t.C:
			r.parked.drop(id, jr)
			jr.cancel(fmt.Errorf("the MCP server %s's question was not answered within %s", server, timeout))
			return cancelled, nil
		}
	}
}

// await follows the run under the attempt j (ctx) until it ends, or
// until an MCP server asks a question: then the run is parked and the
// attempt ends waiting_human with the question.
func (r *engineRunner) await(ctx context.Context, j *Job, jr *jobRun) Result {
	stop := context.AfterFunc(ctx, func() { jr.cancel(context.Cause(ctx)) })
	select {
	case res := <-jr.done:
		stop()
		return res
	case a := <-jr.asks:
		if !stop() { // the attempt ended as the server asked: so does the run
			a.answer <- &sdk.ElicitResult{Action: "cancel"}
			return <-jr.done
		}
		jr.status(fmt.Sprintf("The MCP server %s asks a question; the job waits for the answer (a comment on the task).", a.server))
		jr.retarget(nil) // flushed to this attempt's log; later events wait for the next
		jr.mu.Lock()
		jr.pending = a
		jr.mu.Unlock()
		r.parked.put(j.ID, jr)
		return Result{State: store.StateWaitingHuman, Question: mcp.Question(a.server, a.params)}
	}
}

// answer follows a parked run under the attempt j: the newest user
// comment answers the server's question (a reply that does not fit its
// form is a new question saying why), and the run continues.
func (r *engineRunner) answer(ctx context.Context, j *Job, jr *jobRun) Result {
	select {
	case res := <-jr.done: // the run ended while parked
		jr.retarget(j)
		return res
	default:
	}
	jr.mu.Lock()
	a, prov := jr.pending, jr.prov
	jr.mu.Unlock()
	reply, err := latestUserComment(ctx, j)
	if err != nil {
		r.parked.put(j.ID, jr)
		return Result{State: store.StateFailed, Error: fmt.Sprintf("read the answer to the MCP server %s: %v", a.server, err)}
	}
	if reply == "" {
		r.parked.put(j.ID, jr)
		return Result{State: store.StateWaitingHuman}
	}
	res, err := mcp.Answer(a.params, reply)
	if err != nil {
		r.parked.put(j.ID, jr)
		return Result{State: store.StateWaitingHuman, Question: fmt.Sprintf("That answer does not fit the form of the MCP server %s: %v.\n\n%s", a.server, err, mcp.Question(a.server, a.params))}
	}
	jr.retarget(j)
	if prov != nil {
		jr.mu.Lock()
		em := jr.ems[len(jr.ems)-1]
		jr.mu.Unlock()
		ready(em, prov)
	}
	jr.status(fmt.Sprintf("The MCP server %s got the answer (%s).", a.server, res.Action))
	a.answer <- res
	return r.await(ctx, j, jr)
}
