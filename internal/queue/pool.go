package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// storeCallTimeout bounds the store calls the pool makes after a job's
// context ended (recording the outcome, releasing on shutdown).
const storeCallTimeout = 30 * time.Second

// completeLinger is how long the completer gathers succeeded jobs before
// it records them: a few large CompleteMany calls rather than many small
// ones (each a round trip and a commit on PostgreSQL). Slots do not wait
// for it; a succeeded job shows as such at most this much later.
const completeLinger = 10 * time.Millisecond

// completionBuffer is the least number of succeeded jobs that can wait
// for the completer while it records the previous group. With one slot
// per waiting job (as it was), a pool of one or four slots of short jobs
// stalled on every CompleteMany round trip.
const completionBuffer = 256

// claimGather is how long the dispatcher waits, after a claim that found
// a job for every slot it asked for, for the slots still running to be
// free before it claims again: short jobs claimed together end together,
// and one claim for all of them costs the store a fraction of a claim per
// slot. A pool of long jobs starts a job at most this much later.
const claimGather = time.Millisecond

// claimCooldown is the pause before claiming again when a claim came back
// empty right after one that returned a job.
const claimCooldown = 20 * time.Millisecond

// cancelCheckDelay is how long after a notification on a running job's
// topic the worker re-reads the job to see whether it was cancelled.
const cancelCheckDelay = 100 * time.Millisecond

// Reasons a job's context is cancelled (context.Cause).
var (
	// ErrShutdown: the pool is shutting down and the grace period ended;
	// the job is released.
	ErrShutdown = errors.New("worker shutting down")
	// ErrJobCancelled: the job was cancelled (or otherwise left the
	// worker's hands) in the store.
	ErrJobCancelled = errors.New("job cancelled")
)

// Pool claims jobs from a store and runs them with a Runner.
type Pool struct {
	cfg  Config
	wake *broadcast
	// endGrace closes (EndGrace) to end the shutdown grace at once.
	endGrace     chan struct{}
	endGraceOnce sync.Once
	// completions feeds the completer (set by Run).
	completions chan completion
}

// completion is a succeeded job waiting for the completer to record it,
// with the logger of the slot that ran it.
type completion struct {
	store.Completion
	log *slog.Logger
}

// NewPool checks cfg, fills in defaults and returns a Pool.
func NewPool(cfg Config) (*Pool, error) {
	if cfg.Store == nil {
		return nil, errors.New("queue: Config.Store is required")
	}
	if cfg.Runner == nil {
		return nil, errors.New("queue: Config.Runner is required")
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("queue: Config.Workers is %d, expected at least 1", cfg.Workers)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName()
	}
	if cfg.LeaseFor <= 0 {
		cfg.LeaseFor = DefaultLeaseFor
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Backoff == nil {
		cfg.Backoff = store.Backoff
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pool{cfg: cfg, wake: newBroadcast(), endGrace: make(chan struct{})}, nil
}

// EndGrace ends the shutdown's grace period at once: the jobs still
// running once Run's context has ended are stopped and released without
// waiting for ShutdownGrace (a worker's second SIGINT or SIGTERM). Before
// that, it only shortens the grace to come.
func (p *Pool) EndGrace() { p.endGraceOnce.Do(func() { close(p.endGrace) }) }

// Metrics returns the pool's metrics.
func (p *Pool) Metrics() *Metrics { return p.cfg.Metrics }

// Run claims and runs jobs until ctx ends, then shuts down gracefully:
// running jobs get ShutdownGrace to finish, then their context is cancelled
// and they are Released. Run returns nil after a graceful shutdown, or the
// error that prevented the pool from starting.
func (p *Pool) Run(ctx context.Context) error {
	sub, err := p.cfg.Store.Subscribe(ctx, store.TopicJobs)
	if err != nil {
		return fmt.Errorf("queue: subscribe to job wake-ups: %w", err)
	}
	defer sub.Close()

	// runCtx outlives ctx by ShutdownGrace so running jobs can finish.
	runCtx, cancelRun := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelRun(ErrShutdown)
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.NewTimer(p.cfg.ShutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancelRun(ErrShutdown)
		case <-p.endGrace:
			cancelRun(ErrShutdown)
		case <-runCtx.Done():
		}
	})
	defer stopGrace()

	var wg sync.WaitGroup
	wg.Go(func() {
		for sub.Wait(ctx, nil) {
			p.wake.signal()
		}
	})
	// Slots that succeed at about the same time are completed together.
	// A slot hands its success over and is free for the next job while
	// the completer records it; the buffer bounds how many wait (enough
	// that slots do not wait while the completer's call is on its round
	// trip).
	p.completions = make(chan completion, max(p.cfg.Workers, completionBuffer))
	completerDone := make(chan struct{})
	go func() {
		defer close(completerDone)
		p.completer(p.completions)
	}()

	// One dispatcher claims for every idle slot in one store call and
	// hands each job to its slot; a slot runs its job and reports back.
	slots := make([]chan store.Job, p.cfg.Workers)
	idle := make(chan int, p.cfg.Workers)
	var slotsWG sync.WaitGroup
	for i := range slots {
		slots[i] = make(chan store.Job, 1)
		name := p.slotName(i)
		slotsWG.Go(func() {
			log := p.cfg.Logger.With("worker", name)
			for j := range slots[i] {
				p.runJob(runCtx, log, j)
				idle <- i
			}
		})
	}
	p.dispatch(ctx, slots, idle)
	for _, c := range slots {
		close(c)
	}
	slotsWG.Wait()
	close(p.completions)
	<-completerDone
	wg.Wait()
	return nil
}

// completer records succeeded jobs: it gathers the completions that
// arrive within completeLinger of the first and records them with one
// CompleteMany call, while the next batch gathers (group commit), and logs
// and counts each outcome.
func (p *Pool) completer(in <-chan completion) {
	completeMany := func(ctx context.Context, cs []store.Completion) []error {
		outs := p.cfg.Store.CompleteMany(ctx, cs)
		errs := make([]error, len(outs))
		for i, o := range outs {
			errs[i] = o.Err
		}
		return errs
	}
	if ec, ok := p.cfg.Store.(errCompleter); ok {
		completeMany = ec.CompleteManyErrs
	}
	var batch []completion
	var items []store.Completion
	linger := time.NewTimer(completeLinger)
	for c := range in {
		batch, items = append(batch[:0], c), items[:0]
		// Gather for completeLinger after the first (no slot waits for
		// it), or until the batch is full or the pool stops.
		linger.Reset(completeLinger)
	gather:
		for len(batch) < store.MaxClaim {
			select {
			case c, ok := <-in:
				if !ok {
					break gather
				}
				batch = append(batch, c)
			case <-linger.C:
				break gather
			}
		}
		linger.Stop()
		for _, c := range batch {
			items = append(items, c.Completion)
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
		errs := completeMany(ctx, items)
		cancel()
		for i, c := range batch {
			p.cfg.Metrics.outcome("succeeded")
			p.recorded(c.log, store.StateSucceeded, errs[i])
		}
	}
}

// errCompleter is a store that can complete jobs without reading them back
// (the SQL stores): CompleteMany's outcomes without the jobs, which the
// completer does not use.
type errCompleter interface {
	CompleteManyErrs(ctx context.Context, cs []store.Completion) []error
}

// complete hands a succeeded job to the completer; it waits only while
// the completer's buffer is full.
func (p *Pool) complete(ctx context.Context, log *slog.Logger, l store.Lease, result string) {
	select {
	case p.completions <- completion{Completion: store.Completion{Lease: l, Result: result}, log: log}:
	case <-ctx.Done():
		p.cfg.Metrics.outcome("succeeded")
		p.recorded(log, store.StateSucceeded, fmt.Errorf("complete %s: %w", l, ctx.Err()))
	}
}

// recorded logs and counts what recording a job's outcome (state) did.
func (p *Pool) recorded(log *slog.Logger, state store.State, err error) {
	switch {
	case err == nil:
		log.Info("job finished", "state", state)
	case errors.Is(err, store.ErrLeaseLost):
		log.Info("outcome not recorded: lease lost", "err", err)
		p.cfg.Metrics.outcome("lost")
	default:
		log.Warn("record outcome failed", "err", err)
		p.cfg.Metrics.outcome("error")
	}
}

// slotName is the lease owner of the jobs slot i runs: Name/i+1.
func (p *Pool) slotName(i int) string { return p.cfg.Name + "/" + strconv.Itoa(i+1) }

// dispatch is the claim loop: claim and start one job for each idle slot
// in a single store call, hand them out, repeat;
// wait for a wake-up or the poll interval when nothing is due, and for a
// slot to finish when none is idle. It returns when ctx ends.
func (p *Pool) dispatch(ctx context.Context, slots []chan store.Job, idle <-chan int) {
	free := make([]int, len(slots)) // idle slots, claimed for in this order
	for i := range free {
		free[i] = i
	}
	claims := &Outage{What: "claim", Log: p.cfg.Logger, Now: p.cfg.Now}
	drainIdle := func() {
		for {
			select {
			case i := <-idle:
				free = append(free, i)
			default:
				return
			}
		}
	}
	busy := false // the previous claim returned a job
	full := false // it returned a job for every slot it claimed for
	owners := make([]string, 0, len(slots))
	gather := time.NewTimer(claimGather)
	gather.Stop()
	defer gather.Stop()
	for ctx.Err() == nil {
		drainIdle()
		if len(free) == 0 {
			select {
			case <-ctx.Done():
				return
			case i := <-idle:
				free = append(free, i)
			}
		}
		if full && len(free) < len(slots) {
			// The jobs handed out last are often about to end (short
			// jobs claimed together end together): claiming for the
			// slots free now would split the pool into groups that take
			// turns, each claiming for a few slots per round trip. Wait
			// up to claimGather for the others so one claim fills them.
			gather.Reset(claimGather)
		gathering:
			for len(free) < len(slots) {
				select {
				case <-ctx.Done():
					return
				case i := <-idle:
					free = append(free, i)
				case <-gather.C:
					break gathering
				}
			}
			gather.Stop()
			drainIdle()
		}
		woken := p.wake.wait()
		owners = owners[:0]
		for _, i := range free[:min(len(free), store.MaxClaim)] {
			owners = append(owners, p.slotName(i))
		}
		jobs, err := p.cfg.Store.Claim(ctx, store.ClaimParams{
			Workers: owners, Profiles: p.cfg.Profiles, TaskClasses: p.cfg.TaskClasses, LeaseFor: p.cfg.LeaseFor,
			Start: true,
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			claims.Failed(err)
			p.cfg.Metrics.claimError()
		} else {
			claims.OK()
		}
		full = len(jobs) == len(owners)
		if len(jobs) > 0 {
			busy = true
			now := p.cfg.Now()
			for k, j := range jobs {
				p.cfg.Metrics.claimed(latency(j, now))
				slots[free[k]] <- j // the slot is idle: its buffer is free
			}
			free = free[len(jobs):]
			continue
		}
		// Concurrent claimers can come back empty-handed while jobs
		// remain (PostgreSQL skips rows other claimers hold); right after
		// a successful claim, try again after a short cooldown rather
		// than a full poll interval.
		wait := p.cfg.Poll
		if busy {
			wait = min(wait, claimCooldown)
		}
		busy = false
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-woken:
		case <-t.C:
		}
		t.Stop()
	}
}

// latency is the claim latency of j: from when it became due (created or
// scheduled, whichever is later) to now.
func latency(j store.Job, now time.Time) time.Duration {
	from := j.ScheduledAt
	if j.CreatedAt.After(from) {
		from = j.CreatedAt
	}
	return max(now.Sub(from), 0)
}

// follow subscribes to the topic of a running job; nil if that failed
// (the heartbeat still notices a cancel).
func (p *Pool) follow(ctx context.Context, log *slog.Logger, j store.Job) *store.Subscription {
	sub, err := p.cfg.Store.Subscribe(ctx, store.JobTopic(j.ID))
	if err != nil {
		log.Warn("follow the job's notifications (the heartbeat still notices a cancel)", "err", err)
		return nil
	}
	return sub
}

// runJob runs one job the dispatcher claimed and started (one statement:
// ClaimParams.Start) to an outcome and records it.
func (p *Pool) runJob(runCtx context.Context, log *slog.Logger, running store.Job) {
	st := p.cfg.Store
	lease := running.Lease()
	log = log.With("job", running.ID, "attempt", running.Attempt)
	// Store calls made on the job's behalf after its context ended.
	bg := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(runCtx), storeCallTimeout)
	}

	jobCtx, cancelJob := context.WithCancelCause(runCtx)
	defer cancelJob(nil)
	lost := func(err error) {
		if errors.Is(err, store.ErrLeaseLost) {
			cancelJob(ErrJobCancelled)
		}
	}
	log.Info("job started", "piece", running.Piece)

	// The heartbeat and the cancel watch start when first due (LeaseFor/3,
	// cancelCheckDelay): a job that ends sooner starts neither goroutine,
	// nor subscribes to its topic. The watch subscribes before its first
	// read of the job, so a cancel before it is seen by that read and one
	// after it is heard.
	var wg sync.WaitGroup
	defer wg.Wait()
	watchCtx, stopWatch := context.WithCancel(jobCtx)
	defer stopWatch()
	stopHeartbeat := startAfter(&wg, p.cfg.LeaseFor/3, func() { p.heartbeat(watchCtx, log, lease, cancelJob) })
	stopCancelWatch := startAfter(&wg, cancelCheckDelay, func() {
		if sub := p.follow(watchCtx, log, running); sub != nil {
			p.watchCancel(watchCtx, sub, lease, cancelJob)
		}
	})
	stopWatchers := func() {
		stopWatch()
		stopHeartbeat()
		stopCancelWatch()
	}
	defer stopWatchers()

	j := &Job{
		Job: running, store: st,
		Emit: func(ctx context.Context, events ...store.NewJobEvent) error {
			_, err := st.AppendJobEvents(ctx, lease, events)
			lost(err)
			return err
		},
		Checkpoint: func(ctx context.Context, movement string, data []byte) error {
			err := st.Checkpoint(ctx, lease, movement, data)
			lost(err)
			return err
		},
		SetPiece: func(ctx context.Context, piece string) error {
			err := st.SetPiece(ctx, lease, piece)
			lost(err)
			return err
		},
		SaveRunState: func(ctx context.Context, movement string, data []byte) error {
			err := st.SaveRunState(ctx, lease, movement, data)
			lost(err)
			return err
		},
	}
	if running.TaskID != 0 {
		t, err := st.GetTask(jobCtx, running.TaskID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			log.Warn("read task", "err", err)
		}
		j.Task = t
	}

	spanCtx, span := startJobSpan(jobCtx, running, j.Task.Owner)
	res := p.call(spanCtx, j)
	endJobSpan(span, res)
	stopWatchers()
	wg.Wait()
	p.cfg.Metrics.addUsage(res.Usage, res.CostUSD)

	ctx, cancel := bg()
	defer cancel()
	cause := context.Cause(jobCtx)
	switch {
	case errors.Is(cause, ErrJobCancelled):
		log.Info("job taken away while running (cancelled or lease lost); dropped")
		p.cfg.Metrics.outcome("lost")
		return
	case errors.Is(cause, ErrShutdown) && res.State != store.StateSucceeded:
		if _, err := st.Release(ctx, lease); err != nil {
			log.Warn("release on shutdown failed", "err", err)
		} else {
			log.Info("job released on shutdown")
		}
		p.cfg.Metrics.outcome("released")
		return
	}
	// The progress comment is on the task by the time the job is seen to
	// end, when its end is certain; a failed attempt posts it only once
	// the store says no retry follows.
	certain := res.State == store.StateSucceeded || res.State == store.StateAborted || (res.State == store.StateFailed && res.NoRetry)
	if certain {
		p.postReport(ctx, log, running, res)
	}
	if res.State == store.StateSucceeded {
		if res.ChildJobs {
			// Its children still unfinished are of no use to it now.
			parent := running
			parent.State = store.StateSucceeded
			p.cancelChildren(ctx, log, parent)
		}
		// The completer records it; the slot takes its next job meanwhile.
		p.complete(ctx, log, lease, res.Result)
		return
	}
	ended, err := p.record(ctx, lease, res)
	p.recorded(log, res.State, err)
	if err == nil && res.ChildJobs && ended.State.Terminal() {
		p.cancelChildren(ctx, log, ended)
	}
	if err == nil && !certain && ended.State.Terminal() {
		p.postReport(ctx, log, running, res)
	}
}

// postReport posts the Runner's progress comment (Result.Report) on the
// job's task as an agent comment.
func (p *Pool) postReport(ctx context.Context, log *slog.Logger, j store.Job, res Result) {
	if res.Report == "" || j.TaskID == 0 {
		return
	}
	if _, _, err := p.cfg.Store.AddComment(ctx, store.NewComment{TaskID: j.TaskID, AuthorKind: store.AuthorAgent, Body: res.Report}); err != nil {
		log.Warn("post the progress comment", "err", err)
	}
}

// call runs the Runner, turning a panic into a failed attempt.
func (p *Pool) call(ctx context.Context, j *Job) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			p.cfg.Logger.Error("runner panicked", "job", j.ID, "panic", v, "stack", string(debug.Stack()))
			res = Result{State: store.StateFailed, Error: fmt.Sprintf("runner panicked: %v", v)}
		}
	}()
	return p.cfg.Runner.Run(ctx, j)
}

// record stores the Runner's result, other than succeeded (the
// completer's), and returns the job as stored.
func (p *Pool) record(ctx context.Context, l store.Lease, res Result) (store.Job, error) {
	st := p.cfg.Store
	var (
		j   store.Job
		err error
	)
	switch res.State {
	case store.StateWaitingHuman, store.StateWaitingSubtasks:
		reason := "waiting for an answer"
		if res.State == store.StateWaitingSubtasks {
			reason = "waiting for subtasks"
		}
		j, err = st.Wait(ctx, l, store.WaitParams{State: res.State, Reason: reason, Question: res.Question})
		p.cfg.Metrics.outcome(string(res.State))
	case store.StateAborted:
		j, err = st.Fail(ctx, l, store.FailParams{Error: orDefault(res.Error, "aborted"), Abort: true})
		p.cfg.Metrics.outcome("aborted")
	default: // failed, or anything a runner should not report
		msg := res.Error
		if res.State != store.StateFailed && res.State != "" {
			msg = fmt.Sprintf("runner reported state %q: %s", res.State, res.Error)
		}
		notCounted := res.NotCounted && !res.NoRetry
		j, err = st.Fail(ctx, l, store.FailParams{
			Error: orDefault(msg, "failed"), RetryAfter: p.cfg.Backoff(l.Attempt), NoRetry: res.NoRetry, NotCounted: notCounted,
		})
		switch {
		case err == nil && notCounted:
			p.cfg.Metrics.outcome("requeued")
		case err == nil && j.State == store.StateQueued:
			p.cfg.Metrics.outcome("retried")
		default:
			p.cfg.Metrics.outcome("failed")
		}
	}
	return j, err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// startAfter runs f in a goroutine of wg once d has passed, unless the
// returned stop is called first (stop may be called more than once).
func startAfter(wg *sync.WaitGroup, d time.Duration, f func()) (stop func()) {
	wg.Add(1)
	t := time.AfterFunc(d, func() {
		defer wg.Done()
		f()
	})
	return func() {
		if t.Stop() {
			wg.Done()
		}
	}
}

// heartbeat extends the lease now and then every LeaseFor/3 until ctx
// ends (runJob starts it LeaseFor/3 after the start); a lost lease cancels
// the job.
func (p *Pool) heartbeat(ctx context.Context, log *slog.Logger, l store.Lease, cancelJob context.CancelCauseFunc) {
	t := time.NewTicker(p.cfg.LeaseFor / 3)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		_, err := p.cfg.Store.Heartbeat(ctx, l, p.cfg.LeaseFor)
		switch {
		case err == nil:
		case errors.Is(err, store.ErrLeaseLost):
			log.Info("lease lost; stopping the job", "err", err)
			cancelJob(ErrJobCancelled)
			return
		case ctx.Err() != nil:
			return
		default:
			log.Warn("heartbeat failed", "err", err)
		}
	}
}

// watchCancel cancels the job as soon as the store says it is no longer
// ours (cancelled by a user), without waiting for the next heartbeat. runJob
// starts it cancelCheckDelay after the start, subscribed to the job's topic
// (sub, which it closes), and its first check comes then without a
// notification: it covers what happened before the subscription.
func (p *Pool) watchCancel(ctx context.Context, sub *store.Subscription, l store.Lease, cancelJob context.CancelCauseFunc) {
	defer sub.Close()
	for first := true; first || sub.Wait(ctx, nil); first = false {
		// Coalesce a burst of notifications (the job's own events) and
		// spare short jobs the read: check once cancelCheckDelay after the
		// first notification.
		delay := cancelCheckDelay
		if first {
			delay = 0
		}
		t := time.NewTimer(delay)
	drain:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case _, ok := <-sub.C():
				if !ok {
					t.Stop()
					return
				}
			case <-t.C:
				break drain
			}
		}
		j, err := p.cfg.Store.GetJob(ctx, l.JobID)
		if err != nil {
			continue
		}
		if !j.State.Active() || j.Attempt != l.Attempt || j.LeaseOwner != l.Owner {
			cancelJob(ErrJobCancelled)
			return
		}
	}
}

// broadcast wakes every waiting worker at once.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// wait returns a channel closed by the next signal.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) signal() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// DefaultName is the default worker and maintenance owner name: host:pid.
func DefaultName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
