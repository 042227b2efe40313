// Command attach measures the HTTP attach transport (internal/transport/
// http) fanning one headless session out to many SSE subscribers:
// -clients implicit event streams on one runtime behind a loopback
// listener, -events status frames published one at a time (each only
// once every client has the previous one), and for every frame and every
// client the delivery latency from just before the publish to the
// envelope parsed by the client. It also reports the server process's
// resident memory and Go heap before and after the clients attached.
//
// The clients run in a child process (this binary with -role clients) so
// that the memory figures are the server's alone. The server tells the
// child on its stdin when it publishes frame i; the child answers on its
// stdout once every client has it.
//
//	go run ./bench/attach -clients 1000 -events 200
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/bench/internal/benchproc"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

func main() {
	benchproc.Main("bench/attach", serverMain, clientsMain)
}

const scenario = `schemaVersion: evalops.maestro.scripted-scenario.v1
id: bench
description: Unused; the benchmark publishes statuses without prompting.
metadata: {recordedAt: "2026-01-01T00:00:00Z", toolsExpected: []}
frames:
  - index: 0
    statements:
      - {kind: text, text: ok}
`

// report is what the clients process prints at the end.
type report struct {
	ConnectMS float64   `json:"connect_ms"`
	Latencies []float64 `json:"-"`
	P50US     float64   `json:"p50_us"`
	P90US     float64   `json:"p90_us"`
	P99US     float64   `json:"p99_us"`
	MaxUS     float64   `json:"max_us"`
	Received  int64     `json:"received"`
	Errors    int64     `json:"errors"`
	FirstErr  string    `json:"first_error,omitempty"`
}

func serverMain(args []string) error {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	clients := fs.Int("clients", 1000, "SSE subscribers on the one session")
	events := fs.Int("events", 200, "status frames published")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 || *events < 1 {
		return errors.New("-clients and -events must be positive")
	}
	benchproc.RaiseFileLimit()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	scen, err := replay.Parse([]byte(scenario), "bench.yaml")
	if err != nil {
		return err
	}
	tools := tool.NewSet()
	rt, err := runtime.New(runtime.Config{
		Provider:     replay.New(scen),
		Executor:     protocol.ExecutorReplay,
		Tools:        func(context.Context) (*tool.Set, error) { return tools, nil },
		SessionID:    "bench",
		BufferFrames: httpattach.DefaultReplayRing,
	})
	if err != nil {
		return err
	}
	defer rt.Close()
	rt.Start()
	sessions := httpattach.NewSessionMap(nil)
	sessions.Add("bench", rt)
	h := httpattach.NewHandler(httpattach.Config{Sessions: sessions})
	defer h.Close()
	base, stop, err := benchproc.Serve(h)
	if err != nil {
		return err
	}
	defer stop()
	ctl, err := rt.Connect(runtime.ConnectOptions{Role: protocol.RoleController})
	if err != nil {
		return err
	}

	debug.FreeOSMemory()
	idleRSS, idleHeap := benchproc.KiB("VmRSS"), heapKiB()
	cmd, err := benchproc.ClientsCommand(ctx, "-url", base+"/api/headless/sessions/bench/events", "-clients", strconv.Itoa(*clients), "-events", strconv.Itoa(*events))
	if err != nil {
		return err
	}
	toChild, fromChild, err := benchproc.StartPiped(cmd)
	if err != nil {
		return err
	}
	lines := bufio.NewScanner(fromChild)
	lines.Buffer(make([]byte, 1<<20), 64<<20)
	expect := func(prefix string) (string, error) {
		if !lines.Scan() {
			return "", fmt.Errorf("clients process ended early (waiting for %q): %v", prefix, lines.Err())
		}
		l := lines.Text()
		if !strings.HasPrefix(l, prefix) {
			return "", fmt.Errorf("clients process said %q, want %q", l, prefix)
		}
		return strings.TrimPrefix(l, prefix), nil
	}
	if _, err := expect("attached"); err != nil {
		return err
	}
	rawRSS := benchproc.KiB("VmRSS")
	debug.FreeOSMemory() // return the attach-time garbage (snapshots) to the OS
	subsRSS, subsHeap := benchproc.KiB("VmRSS"), heapKiB()
	goroutines := goruntime.NumGoroutine()

	start := time.Now()
	peakRSS := subsRSS
	for i := range *events {
		fmt.Fprintf(toChild, "%d %d\n", i, time.Now().UnixNano())
		if err := ctl.Handle(ctx, protocol.Init{}); err != nil {
			return err
		}
		if _, err := expect("got " + strconv.Itoa(i)); err != nil {
			return err
		}
		if i%20 == 0 {
			peakRSS = max(peakRSS, benchproc.KiB("VmRSS"))
		}
	}
	elapsed := time.Since(start)
	toChild.Close()
	out, err := io.ReadAll(fromChild)
	if err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("clients process: %w", err)
	}
	var rep report
	if err := json.Unmarshal(out, &rep); err != nil {
		return fmt.Errorf("clients report %q: %w", out, err)
	}
	if rep.Errors > 0 {
		return fmt.Errorf("%d client errors, first: %s", rep.Errors, rep.FirstErr)
	}
	n := *clients
	fmt.Printf("| subscribers | frames | deliveries | attach all | delivery p50 | p90 | p99 | max | frames/s (lockstep) |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %d | %d | %.0f ms | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.0f |\n",
		n, *events, rep.Received, rep.ConnectMS, rep.P50US, rep.P90US, rep.P99US, rep.MaxUS, float64(*events)/elapsed.Seconds())
	fmt.Println()
	fmt.Printf("| server memory | idle | %d subscribers | per subscriber | peak while publishing |\n", n)
	fmt.Printf("|---|---|---|---|---|\n")
	fmt.Printf("| RSS (after returning free memory) | %.1f MiB | %.1f MiB | %.1f KiB | %.1f MiB |\n", mib(idleRSS), mib(subsRSS), float64(subsRSS-idleRSS)/float64(n), mib(peakRSS))
	fmt.Printf("| RSS right after attaching | — | %.1f MiB | — | — |\n", mib(rawRSS))
	fmt.Printf("| Go heap in use | %.1f MiB | %.1f MiB | %.1f KiB | — |\n", mib(idleHeap), mib(subsHeap), float64(subsHeap-idleHeap)/float64(n))
	fmt.Printf("| goroutines | — | %d | — | — |\n", goroutines)
	return nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// clientsMain runs the subscribers.
func clientsMain(args []string) error {
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	url := fs.String("url", "", "events URL")
	clients := fs.Int("clients", 1000, "subscribers")
	events := fs.Int("events", 200, "frames expected")
	if err := fs.Parse(args); err != nil {
		return err
	}
	benchproc.RaiseFileLimit()
	tr := &http.Transport{MaxIdleConnsPerHost: *clients, DisableCompression: true}
	client := &http.Client{Transport: tr}
	arrivals := make([][]int64, *clients) // [client][frame] unix ns
	for i := range arrivals {
		arrivals[i] = make([]int64, *events)
	}
	sent := make([]int64, *events)
	counts := make([]atomic.Int64, *events)
	acks := make(chan int, *events)
	var errs atomic.Int64
	var firstErr atomic.Pointer[string]
	fail := func(err error) {
		if errs.Add(1) == 1 {
			s := err.Error()
			firstErr.Store(&s)
		}
	}
	var attached sync.WaitGroup
	attached.Add(*clients)
	var done sync.WaitGroup
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for c := range *clients {
		done.Add(1)
		go func() {
			defer done.Done()
			once := sync.OnceFunc(attached.Done)
			defer once()
			req, _ := http.NewRequestWithContext(ctx, "GET", *url, nil)
			resp, err := client.Do(req)
			if err != nil {
				fail(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				fail(fmt.Errorf("events: HTTP %d", resp.StatusCode))
				return
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			frame := 0
			for sc.Scan() {
				l := sc.Bytes()
				switch {
				case len(l) == 0:
				case strings.HasPrefix(string(l), `data: {"type":"snapshot"`):
					once()
				case strings.Contains(string(l), `"message":{"type":"status"`):
					if frame >= *events {
						continue
					}
					arrivals[c][frame] = time.Now().UnixNano()
					if counts[frame].Add(1) == int64(*clients) {
						acks <- frame
					}
					frame++
					if frame == *events {
						return
					}
				}
			}
			if frame < *events {
				fail(fmt.Errorf("stream ended after %d frames: %v", frame, sc.Err()))
			}
		}()
	}
	attached.Wait()
	connect := time.Since(start)
	fmt.Println("attached")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 2 {
			continue
		}
		i, _ := strconv.Atoi(f[0])
		ns, _ := strconv.ParseInt(f[1], 10, 64)
		if i < 0 || i >= *events {
			continue
		}
		sent[i] = ns
		select {
		case a := <-acks:
			fmt.Printf("got %d\n", a)
		case <-time.After(time.Minute):
			fail(fmt.Errorf("frame %d not delivered to every client within a minute (%d of %d)", i, counts[i].Load(), *clients))
			fmt.Printf("got %d\n", i)
		}
	}
	cancel()
	done.Wait()
	rep := report{ConnectMS: float64(connect.Microseconds()) / 1000, Errors: errs.Load()}
	if p := firstErr.Load(); p != nil {
		rep.FirstErr = *p
	}
	var lat []float64
	for c := range arrivals {
		for i, at := range arrivals[c] {
			if at != 0 && sent[i] != 0 {
				lat = append(lat, float64(at-sent[i])/1000)
			}
		}
	}
	rep.Received = int64(len(lat))
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	rep.P50US, rep.P90US, rep.P99US = pct(0.50), pct(0.90), pct(0.99)
	if len(lat) > 0 {
		rep.MaxUS = lat[len(lat)-1]
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

func heapKiB() int64 {
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return int64(m.HeapInuse / 1024)
}
