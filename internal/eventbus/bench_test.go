package eventbus_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/openai"
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

// httpTurns is loopScenario for the fake model server: a tool call,
// then an answer.
const httpTurns = `[{"text":["Checking."],"tool_calls":[{"name":"ping","input":"{\"text\":\"p\"}"}],"input_tokens":120,"output_tokens":12},
 {"text":["Done."],"input_tokens":140,"output_tokens":3}]`

// BenchmarkAgentLoopOverhead measures the overhead of the bus and tracing
// on the agent loop as a ratio robust to a loaded machine: each
// iteration is a round of overheadRuns runs with both off, then
// overheadRuns runs with both on, on the same agent, each block timed by
// this process's CPU clock. An on-block ends only when its follower has
// published every event (it is closed, waiting for them) and the span
// processor has exported every span (ForceFlush), so their work is
// counted in full. It reports the median over the rounds of the on/off
// CPU ratio as overhead-% (and each block's CPU per run, and the spread:
// the smallest and largest round's ratio). The NATS server,
// the OTLP receiver and the model server run in their own processes
// (benchNATS, otlpSink, fakeModel): only Maestro's CPU is counted.
//
// Two loops: replay, the scripted provider in process answering at once
// (the worst case: the loop does almost nothing but write its log), and
// http, the OpenAI Chat Completions client streaming from the fake model
// server over loopback, as a real session does. Each run is one tool call
// and two model calls.
//
// MAESTRO_BENCH_OVERHEAD_ON=bus (or trace) turns on only the bus (only
// tracing) in the on-blocks, to attribute the overhead; the metrics keep
// their names.
func BenchmarkAgentLoopOverhead(b *testing.B) {
	sc, err := replay.Parse([]byte(loopScenario), "busbench.json")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("replay", func(b *testing.B) { loopOverhead(b, replay.New(sc)) })
	b.Run("http", func(b *testing.B) {
		p, err := openai.New(openai.Config{BaseURL: fakeModel(b, httpTurns) + "/v1", Model: "fake", API: openai.APIChat})
		if err != nil {
			b.Fatal(err)
		}
		loopOverhead(b, p)
	})
}

func loopOverhead(b *testing.B, p llm.Provider) {
	overheadRuns := 100
	if n, err := strconv.Atoi(os.Getenv("MAESTRO_BENCH_OVERHEAD_RUNS")); err == nil && n > 0 {
		overheadRuns = n
	}
	only := os.Getenv("MAESTRO_BENCH_OVERHEAD_ON")
	busOn, traceOn := only != "trace", only != "bus"
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
	a := agent.New(agent.Config{Provider: p, Tools: tool.NewSet(ping)})
	// block returns the CPU time of overheadRuns runs (the follower's
	// publishing and the span export included) and the wall time of the
	// runs alone (what a user waits for: the agent never waits for the
	// bus nor the exporter).
	block := func(on bool) (cpu, wall time.Duration) {
		s, err := store.Create(session.Meta{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		var f *eventbus.Follower
		otel.SetTracerProvider(noop.NewTracerProvider())
		if on && traceOn {
			otel.SetTracerProvider(tp)
		}
		if on && busOn {
			f = bus.FollowSession(s.Dir(), s.Meta())
		}
		cpu0, t0 := cpuTime(), time.Now()
		for range overheadRuns {
			if _, err := a.Run(b.Context(), nil, llm.UserText("go"), s); err != nil {
				b.Fatal(err)
			}
		}
		wall = time.Since(t0)
		if f != nil {
			f.Close(s.Cursor(), "completed")
		}
		if on && traceOn {
			if err := tp.ForceFlush(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		return cpuTime() - cpu0, wall
	}
	var ratios, wallRatios []float64
	var offCPU, onCPU, offWall, onWall time.Duration
	for b.Loop() {
		off, offW := block(false)
		on, onW := block(true)
		offCPU, onCPU, offWall, onWall = offCPU+off, onCPU+on, offWall+offW, onWall+onW
		ratios = append(ratios, float64(on)/float64(off))
		wallRatios = append(wallRatios, float64(onW)/float64(offW))
	}
	slices.Sort(ratios)
	slices.Sort(wallRatios)
	runs := float64(b.N * overheadRuns)
	b.ReportMetric(float64(offCPU.Nanoseconds())/runs, "off-cpu-ns/run")
	b.ReportMetric(float64(onCPU.Nanoseconds())/runs, "on-cpu-ns/run")
	b.ReportMetric(100*(ratios[len(ratios)/2]-1), "overhead-%")
	// The spread over the rounds.
	b.ReportMetric(100*(ratios[0]-1), "min-overhead-%")
	b.ReportMetric(100*(ratios[len(ratios)-1]-1), "max-overhead-%")
	// The runs' wall time (median over the rounds of the on/off ratio).
	b.ReportMetric(float64(offWall.Nanoseconds())/runs, "off-wall-ns/run")
	b.ReportMetric(float64(onWall.Nanoseconds())/runs, "on-wall-ns/run")
	b.ReportMetric(100*(wallRatios[len(wallRatios)/2]-1), "wall-overhead-%")
}

// BenchmarkPublishSustained measures events published per second: a
// session log grows by one tool call (two events) per iteration while a
// follower publishes it; the clock stops when the stream holds them all.
func BenchmarkPublishSustained(b *testing.B) {
	url := benchNATS(b)
	bus, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: url, CreateStream: true, Source: "bench"}})
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
	streamHolds(b, url, 2*n)
	b.ReportMetric(float64(2*n)/time.Since(start).Seconds(), "events/s")
}

// benchBus opens a bus on a standalone NATS server (benchNATS); closing
// a follower waits up to a minute for its events. It is closed when the
// benchmark ends.
func benchBus(b *testing.B) *eventbus.Bus {
	url := benchNATS(b)
	bus, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: url, CreateStream: true, Source: "bench"},
		CloseWait: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bus.Close() })
	return bus
}

// traceTo installs tracing as Setup does, exporting to a collector in
// its own process that discards what it receives (otlpSink); the returned
// function restores the no-op provider.
func traceTo(b *testing.B) func() {
	url := otlpSink(b)
	shutdown, err := telemetry.Setup(b.Context(), func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url}[k]
	})
	if err != nil || !telemetry.Enabled() {
		b.Fatalf("tracing not installed: %v", err)
	}
	return func() {
		shutdown(context.Background())
		otel.SetTracerProvider(noop.NewTracerProvider())
	}
}

// streamHolds waits (at most a minute) until the stream on url holds n
// messages.
func streamHolds(b *testing.B, url string, n int) {
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := js.Stream(ctx, eventbus.StreamName)
		if err == nil {
			if info, err := st.Info(ctx); err == nil && info.State.Msgs >= uint64(n) {
				return
			}
		}
		select {
		case <-ctx.Done():
			b.Fatalf("the stream does not hold %d messages: %v", n, ctx.Err())
		case <-tick.C:
		}
	}
}
