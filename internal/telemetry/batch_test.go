package telemetry

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// fakeExporter records the batches it is given.
type fakeExporter struct {
	mu       sync.Mutex
	batches  [][]string
	exported chan struct{}
	shutdown bool
}

func (e *fakeExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	e.mu.Lock()
	e.batches = append(e.batches, names)
	e.mu.Unlock()
	select {
	case e.exported <- struct{}{}:
	default:
	}
	return nil
}

func (e *fakeExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown = true
	return nil
}

func (e *fakeExporter) names() (all []string, batches int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.batches {
		all = append(all, b...)
	}
	return all, len(e.batches)
}

// The batcher keeps the batch span processor's semantics: a full batch
// is exported without a flush, ForceFlush exports every ended span in
// order in batches of the configured size, spans beyond the queue's
// size are dropped, Shutdown exports what is queued and stops the
// exporter, spans ended after it are dropped.
func TestBatcher(t *testing.T) {
	exp := &fakeExporter{exported: make(chan struct{}, 1)}
	env := map[string]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "3", "OTEL_BSP_MAX_QUEUE_SIZE": "5", "OTEL_BSP_SCHEDULE_DELAY": "3600000"}
	b := newBatcher(exp, func(k string) string { return env[k] })
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	tr := tp.Tracer(Scope)
	end := func(from, to int) {
		for i := from; i < to; i++ {
			_, s := tr.Start(t.Context(), strconv.Itoa(i))
			s.End()
		}
	}
	end(0, 3) // a full batch: exported by the batcher's goroutine
	select {
	case <-exp.exported:
	case <-time.After(time.Minute):
		t.Fatal("a full batch was not exported")
	}
	if got, n := exp.names(); n != 1 || len(got) != 3 {
		t.Fatalf("after a full batch: %v in %d batches", got, n)
	}
	// The queue holds 5: 2 of these 7 are dropped (no export meanwhile).
	b.exporting.Lock()
	end(3, 10)
	b.exporting.Unlock()
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, n := exp.names()
	if want := []string{"0", "1", "2", "3", "4", "5", "6", "7"}; !slices.Equal(got, want) || n != 3 {
		t.Errorf("after ForceFlush: %v in %d batches, want %v in 3", got, n, want)
	}
	end(10, 11)
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	end(11, 12)
	if got, _ := exp.names(); got[len(got)-1] != "10" || !exp.shutdown {
		t.Errorf("after Shutdown: %v, exporter shut down %v", got, exp.shutdown)
	}
}
