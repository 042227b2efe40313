package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the span processor Setup installs: the SDK's batch span
// processor's semantics (spans exported in batches of at most
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, when a batch is full or every
// OTEL_BSP_SCHEDULE_DELAY, each export bounded by
// OTEL_BSP_EXPORT_TIMEOUT; spans beyond OTEL_BSP_MAX_QUEUE_SIZE waiting
// are dropped; ForceFlush and Shutdown export every span ended before
// them) without its cost on the agent loop: the SDK's processor sends
// every ended span on a channel to its goroutine, waking it (a futex
// wake and a reschedule, docs/events.md "Figures") once a span, where
// this one appends the span under a mutex and wakes its goroutine once
// a full batch.
type batcher struct {
	exp      sdktrace.SpanExporter
	delay    time.Duration
	timeout  time.Duration
	maxQueue int
	maxBatch int

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan
	dropped int
	stopped bool

	// exporting serializes the exports (a batch at a time, in order);
	// batch is the buffer of the export in progress.
	exporting sync.Mutex
	batch     []sdktrace.ReadOnlySpan

	full     chan struct{} // a full batch waits (capacity 1)
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// The SDK's defaults (the OpenTelemetry specification's).
const (
	defaultScheduleDelay = 5000 * time.Millisecond
	defaultExportTimeout = 30000 * time.Millisecond
	defaultMaxQueue      = 2048
	defaultMaxBatch      = 512
)

// newBatcher starts a batcher exporting to exp, configured by the
// OTEL_BSP_* variables as the SDK's batch span processor is.
func newBatcher(exp sdktrace.SpanExporter, getenv func(string) string) *batcher {
	b := &batcher{
		exp:      exp,
		delay:    max(envMillis(getenv, "OTEL_BSP_SCHEDULE_DELAY", defaultScheduleDelay), time.Millisecond),
		timeout:  envMillis(getenv, "OTEL_BSP_EXPORT_TIMEOUT", defaultExportTimeout),
		maxQueue: envInt(getenv, "OTEL_BSP_MAX_QUEUE_SIZE", defaultMaxQueue),
		maxBatch: envInt(getenv, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaultMaxBatch),
		full:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if b.maxBatch > b.maxQueue {
		b.maxBatch = min(defaultMaxBatch, b.maxQueue)
	}
	go b.run()
	return b
}

// envInt is a positive integer variable, def when unset or invalid.
func envInt(getenv func(string) string, key string, def int) int {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv(key))); err == nil && n > 0 {
		return n
	}
	return def
}

// envMillis is a variable in milliseconds (0 allowed: no timeout).
func envMillis(getenv func(string) string, key string, def time.Duration) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv(key))); err == nil && n >= 0 {
		return time.Duration(n) * time.Millisecond
	}
	return def
}

func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, dropping it when the queue is full; the
// goroutine is woken only when a batch is full.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if len(b.queue) >= b.maxQueue {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) >= b.maxBatch
	b.mu.Unlock()
	if full {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
}

// run exports the full batches as they fill and everything queued every
// delay, until Shutdown.
func (b *batcher) run() {
	defer close(b.done)
	t := time.NewTimer(b.delay)
	defer t.Stop()
	for {
		all := false
		select {
		case <-b.stop:
			return
		case <-b.full:
		case <-t.C:
			all = true
		}
		if err := b.export(context.Background(), all); err != nil {
			otel.Handle(err)
		}
		t.Reset(b.delay)
	}
}

// export exports the queue by batches: all of it, or (all false) its
// full batches only. A batch that fails is dropped, as the SDK's
// processor does (the exporter retries); the first error is returned.
func (b *batcher) export(ctx context.Context, all bool) error {
	b.exporting.Lock()
	defer b.exporting.Unlock()
	var first error
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.maxBatch)
		if n == 0 || !all && n < b.maxBatch {
			b.mu.Unlock()
			return first
		}
		b.batch = append(b.batch[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.mu.Unlock()
		ectx, cancel := ctx, context.CancelFunc(func() {})
		if b.timeout > 0 {
			ectx, cancel = context.WithTimeoutCause(ctx, b.timeout, errors.New("processor export timeout"))
		}
		err := b.exp.ExportSpans(ectx, b.batch)
		cancel()
		clear(b.batch)
		if err != nil && first == nil {
			first = err
		}
		if ctx.Err() != nil {
			return errors.Join(first, ctx.Err())
		}
	}
}

// ForceFlush exports every span ended before it.
func (b *batcher) ForceFlush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	stopped := b.stopped
	b.mu.Unlock()
	if stopped {
		return nil
	}
	return b.export(ctx, true)
}

// Shutdown stops the batcher, exports what is queued and shuts the
// exporter down.
func (b *batcher) Shutdown(ctx context.Context) error {
	var err error
	b.stopOnce.Do(func() {
		// Spans ended from now on are dropped, as the SDK's processor
		// does; those queued are exported.
		b.mu.Lock()
		b.stopped = true
		dropped := b.dropped
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		err = b.export(ctx, true)
		if dropped > 0 {
			otel.Handle(fmt.Errorf("tracing: %d spans dropped (the export queue was full, OTEL_BSP_MAX_QUEUE_SIZE)", dropped))
		}
		err = errors.Join(err, b.exp.Shutdown(ctx))
	})
	return err
}
