package eventbus_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/telemetry"
	"github.com/maestro-run/maestro/internal/tool"
)

// loopScenario: a tool call, then an answer — two model calls per run,
// three published events (attempted, completed; started once).
const loopScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"busbench","description":"bus overhead",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["ping"]},
"frames":[
 {"index":0,"statements":[{"kind":"text","text":"Checking."},{"kind":"tool_call","tool":"ping","input":{"text":"p"}}]},
 {"index":1,"statements":[{"kind":"text","text":"Done."}]}]}`

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type pingIn struct {
	Text string `json:"text"`
}

// BenchmarkAgentLoopBus measures Maestro's agent loop on replay writing a
// real session log: with no bus and no tracing (off), with a follower
// publishing the log (bus), with the loop's spans exported over OTLP/HTTP
// (trace), and both. The timer and the CPU clock stop only when the
// follower has published every event of the run (it is closed, waiting
// for them), so the publisher's work is counted in full. The ratio of
// cpu-ns/op to off's is the overhead on the agent (all in one run, same
// machine load). The NATS server is embedded unless
// MAESTRO_BENCH_NATS_URL names one (a standalone nats-server -js, as in
// production), so that its CPU is not counted as Maestro's.
func BenchmarkAgentLoopBus(b *testing.B) {
	sc, err := replay.Parse([]byte(loopScenario), "busbench.json")
	if err != nil {
		b.Fatal(err)
	}
	ping := tool.New("ping", "answers pong", true, func(context.Context, pingIn, tool.Call) (tool.Result, error) {
		return tool.Result{Content: "pong"}, nil
	})
	for _, v := range []struct {
		name       string
		bus, trace bool
	}{{"off", false, false}, {"bus", true, false}, {"trace", false, true}, {"bus+trace", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			s, err := session.NewStore(b.TempDir()).Create(session.Meta{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var f *eventbus.Follower
			if v.bus {
				f = benchBus(b).FollowSession(s.Dir(), s.Meta())
			}
			if v.trace {
				b.Cleanup(traceTo(b))
			}
			a := agent.New(agent.Config{Provider: replay.New(sc), Tools: tool.NewSet(ping)})
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := a.Run(b.Context(), nil, llm.UserText("go"), s); err != nil {
					b.Fatal(err)
				}
			}
			if f != nil {
				f.Close(s.Cursor(), "completed") // waits until every event is published
			}
			// The process's CPU time: the loop, the follower, the span
			// exporter and its receiver, and the embedded NATS server
			// when there is one (not Maestro's).
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkAgentLoopOverhead measures the overhead of the bus and tracing
// on the agent loop as a ratio robust to a loaded machine: each
// iteration is a round of overheadRuns runs with both off, then
// overheadRuns runs with both on, on the same agent, each block timed by
// the process's CPU clock. An on-block ends only when its follower has
// published every event (it is closed, waiting for them) and the span
// processor has exported every span (ForceFlush), so their work is
// counted in full. It reports the median over the rounds of the on/off
// CPU ratio as overhead-% (and each block's CPU per run). The NATS server
// is embedded unless MAESTRO_BENCH_NATS_URL names one.
func BenchmarkAgentLoopOverhead(b *testing.B) {
	const overheadRuns = 100
	sc, err := replay.Parse([]byte(loopScenario), "busbench.json")
	if err != nil {
		b.Fatal(err)
	}
	ping := tool.New("ping", "answers pong", true, func(context.Context, pingIn, tool.Call) (tool.Result, error) {
		return tool.Result{Content: "pong"}, nil
	})
	bus := benchBus(b)
	b.Cleanup(traceTo(b))
	tp, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	if !ok {
		b.Fatal("tracing not installed")
	}
	store := session.NewStore(b.TempDir())
	a := agent.New(agent.Config{Provider: replay.New(sc), Tools: tool.NewSet(ping)})
	block := func(on bool) time.Duration {
		s, err := store.Create(session.Meta{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		var f *eventbus.Follower
		if on {
			otel.SetTracerProvider(tp)
			f = bus.FollowSession(s.Dir(), s.Meta())
		} else {
			otel.SetTracerProvider(noop.NewTracerProvider())
		}
		cpu0 := cpuTime()
		for range overheadRuns {
			if _, err := a.Run(b.Context(), nil, llm.UserText("go"), s); err != nil {
				b.Fatal(err)
			}
		}
		if on {
			f.Close(s.Cursor(), "completed")
			if err := tp.ForceFlush(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		return cpuTime() - cpu0
	}
	var ratios []float64
	var offCPU, onCPU time.Duration
	for b.Loop() {
		off, on := block(false), block(true)
		offCPU, onCPU = offCPU+off, onCPU+on
		ratios = append(ratios, float64(on)/float64(off))
	}
	slices.Sort(ratios)
	runs := float64(b.N * overheadRuns)
	b.ReportMetric(float64(offCPU.Nanoseconds())/runs, "off-cpu-ns/run")
	b.ReportMetric(float64(onCPU.Nanoseconds())/runs, "on-cpu-ns/run")
	b.ReportMetric(100*(ratios[len(ratios)/2]-1), "overhead-%")
}

// BenchmarkPublishSustained measures events published per second: a
// session log grows by one tool call (two events) per iteration while a
// follower publishes it; the clock stops when the stream holds them all.
func BenchmarkPublishSustained(b *testing.B) {
	srv := bustest.Start(b)
	bus, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: srv.URL(), CreateStream: true, Source: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	s, err := session.NewStore(b.TempDir()).Create(session.Meta{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bus.FollowSession(s.Dir(), s.Meta())
	start := time.Now()
	n := 0
	for b.Loop() {
		n++
		toolTurn(s, fmt.Sprintf("c%d", n), "Read", true, "")
	}
	srv.Wait(2 * n)
	b.ReportMetric(float64(2*n)/time.Since(start).Seconds(), "events/s")
}

// benchBus opens a bus on MAESTRO_BENCH_NATS_URL (a standalone
// nats-server -js), else on an embedded server; closing a follower waits
// up to a minute for its events. It is closed when the benchmark ends.
func benchBus(b *testing.B) *eventbus.Bus {
	url := os.Getenv("MAESTRO_BENCH_NATS_URL")
	if url == "" {
		url = bustest.Start(b).URL()
	}
	bus, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: url, CreateStream: true, Source: "bench"},
		CloseWait: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bus.Close() })
	return bus
}

// traceTo installs tracing as Setup does, exporting to a collector that
// discards what it receives; the returned function restores the no-op
// provider.
func traceTo(b *testing.B) func() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	shutdown, err := telemetry.Setup(b.Context(), func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}[k]
	})
	if err != nil || !telemetry.Enabled() {
		b.Fatalf("tracing not installed: %v", err)
	}
	return func() {
		shutdown(context.Background())
		otel.SetTracerProvider(noop.NewTracerProvider())
		srv.Close()
	}
}
