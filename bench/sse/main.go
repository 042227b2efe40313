// Command sse measures fan-out of one job's event stream over the REST API:
// -clients subscribers on GET /api/v1/jobs/{id}/events (Server-Sent Events)
// of internal/server on a loopback listener, with a SQLite store; -events
// events appended to the job through the store (by the worker holding its
// lease, as a running job would); per-event delivery latency (just before
// the append → the event parsed by a client) and the server process's
// resident memory.
//
// The clients run in a child process (this binary with -role clients), so
// the RSS figures are the server's alone. The appended events carry their
// append time (wall clock, same host) in their data; the child reports a
// line per event once every client has it, and its latency percentiles at
// the end.
//
// Two runs in one invocation: "lockstep" appends the next event only when
// every client has the previous one (pure fan-out latency), "paced" appends
// at -rate events per second regardless (a job streaming steadily).
//
//	go run ./bench/sse -clients 1000 -events 100
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
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/bench/internal/benchproc"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

func main() {
	benchproc.Main("bench/sse", serverMain, clientsMain)
}

// summary is what the client process reports at the end.
type summary struct {
	Received  int64   `json:"received"`   // bench events received, all clients
	Expected  int64   `json:"-"`          // clients × events (set by the server side)
	P50US     float64 `json:"p50_us"`     // delivery latency
	P99US     float64 `json:"p99_us"`     //
	MaxUS     float64 `json:"max_us"`     //
	ConnectMS float64 `json:"connect_ms"` // all clients subscribed
	Errors    int     `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
}

type runResult struct {
	mode                      string
	events                    int
	sum                       summary
	rssIdle, rssSubs, rssPeak int64 // KiB
	elapsed                   time.Duration
}

func serverMain(args []string) error {
	fs := flag.NewFlagSet("sse", flag.ContinueOnError)
	clients := fs.Int("clients", 1000, "SSE subscribers on the one job")
	events := fs.Int("events", 100, "events appended per run")
	rate := fs.Float64("rate", 20, "paced run: events appended per second")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 || *events < 1 || *rate <= 0 {
		return errors.New("-clients, -events and -rate must be positive")
	}
	benchproc.RaiseFileLimit()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "maestro-bench-sse-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "maestro.db"), sqlite.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := server.New(server.Config{Store: st, DataDir: dir})
	if err != nil {
		return err
	}
	base, stop, err := benchproc.Serve(srv)
	if err != nil {
		return err
	}
	defer stop()

	var results []runResult
	for _, mode := range []string{"lockstep", "paced"} {
		r, err := runOnce(ctx, st, base, mode, *clients, *events, *rate)
		if err != nil {
			return fmt.Errorf("%s run: %w", mode, err)
		}
		results = append(results, r)
	}
	// The in-process baselines run last so that the server's RSS figures
	// above start from a process that has not fanned anything out yet.
	var baselines []summary
	for _, read := range []bool{false, true} {
		b, err := baseline(ctx, st, *clients, *events, read)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		baselines = append(baselines, b)
	}
	fmt.Printf("%d SSE subscribers on one job over GET /api/v1/jobs/{id}/events (internal/server, SQLite store, loopback; clients in a separate process on the same %d CPUs); %d events appended through the store per run; latency = append call → event parsed by a client, over every client and event. RSS is the server process's.\n\n",
		*clients, runtime.NumCPU(), *events)
	fmt.Println("| run | events delivered | delivery p50 | delivery p99 | max | all subscribed in | server RSS before subscribing | subscribed | peak during the run |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, b := range baselines {
		what := "baseline: store.Subscribe wake-ups only, in process (no HTTP, no reads), lockstep"
		if i == 1 {
			what = "baseline: store.Subscribe wake-up + ReadJobEvents per subscriber, in process (no HTTP), lockstep"
		}
		fmt.Printf("| %s | %d / %d | %s | %s | %s | — | — | — | — |\n", what,
			b.Received, b.Expected, ms(b.P50US), ms(b.P99US), ms(b.MaxUS))
	}
	for _, r := range results {
		mode := "lockstep (next event when all have the previous)"
		if r.mode == "paced" {
			mode = fmt.Sprintf("paced at %.0f events/s", *rate)
		}
		fmt.Printf("| %s | %d / %d | %s | %s | %s | %.0f ms | %s | %s | %s |\n", mode,
			r.sum.Received, r.sum.Expected, ms(r.sum.P50US), ms(r.sum.P99US), ms(r.sum.MaxUS),
			r.sum.ConnectMS, mib(r.rssIdle), mib(r.rssSubs), mib(r.rssPeak))
	}
	return nil
}

// runOnce subscribes the clients to a fresh running job, appends the events
// and completes the job (which ends every stream).
func runOnce(ctx context.Context, st store.Store, base, mode string, clients, events int, rate float64) (runResult, error) {
	res := runResult{mode: mode, events: events}
	job, lease, err := startJob(ctx, st)
	if err != nil {
		return res, err
	}
	runtime.GC()
	// Reset the peak (VmHWM) so it covers this run only.
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	res.rssIdle = benchproc.KiB("VmRSS")

	cmd, err := benchproc.ClientsCommand(ctx, "-url",
		base+"/api/v1/jobs/"+strconv.FormatInt(job.ID, 10)+"/events", "-clients", strconv.Itoa(clients))
	if err != nil {
		return res, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer cmd.Wait()
	lines := make(chan string, events+16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() (string, error) {
		select {
		case l, ok := <-lines:
			if !ok {
				return "", errors.New("client process ended early")
			}
			return l, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if l, err := next(); err != nil || l != "ready" {
		return res, fmt.Errorf("waiting for the clients to subscribe: %q %v", l, err)
	}
	res.rssSubs = benchproc.KiB("VmRSS")

	start := time.Now()
	var tick *time.Ticker
	if mode == "paced" {
		tick = time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
	}
	for i := range events {
		if tick != nil {
			<-tick.C
		}
		data := fmt.Appendf(nil, `{"i":%d,"t":%d}`, i+1, time.Now().UnixNano())
		got, err := st.AppendJobEvents(ctx, lease, []store.NewJobEvent{{Type: "bench", Data: data}})
		if err != nil {
			return res, err
		}
		if tick == nil {
			want := "got " + strconv.FormatInt(got[0].Seq, 10)
			for {
				l, err := next()
				if err != nil {
					return res, err
				}
				if l == want {
					break
				}
			}
		}
	}
	res.elapsed = time.Since(start)
	if _, err := st.Complete(ctx, lease, "done"); err != nil {
		return res, err
	}
	for {
		l, err := next()
		if err != nil {
			return res, err
		}
		if s, ok := strings.CutPrefix(l, "result "); ok {
			if err := json.Unmarshal([]byte(s), &res.sum); err != nil {
				return res, err
			}
			res.sum.Expected = int64(clients) * int64(events)
			break
		}
	}
	res.rssPeak = max(benchproc.KiB("VmHWM"), res.rssSubs)
	if res.sum.Errors > 0 {
		return res, fmt.Errorf("%d clients failed, first: %s", res.sum.Errors, res.sum.FirstErr)
	}
	if res.sum.Received != res.sum.Expected {
		return res, fmt.Errorf("%d of %d events delivered", res.sum.Received, res.sum.Expected)
	}
	return res, nil
}

// startJob enqueues a no-op job and starts it as worker "bench", the way a
// running job holds its lease while it appends events.
func startJob(ctx context.Context, st store.Store) (store.Job, store.Lease, error) {
	job, err := st.Enqueue(ctx, store.NewJob{Piece: "noop"})
	if err != nil {
		return store.Job{}, store.Lease{}, err
	}
	claimed, err := st.Claim(ctx, store.ClaimParams{Worker: "bench", Limit: 1, LeaseFor: time.Hour})
	if err != nil || len(claimed) != 1 || claimed[0].ID != job.ID {
		return store.Job{}, store.Lease{}, fmt.Errorf("claim the bench job: %v (%d claimed)", err, len(claimed))
	}
	lease := claimed[0].Lease()
	started, err := st.Start(ctx, lease)
	return started, lease, err
}

// baseline fans the events out to subscribers of the store's notifier in
// this process, lockstep: each subscriber takes the wake-up and, with
// read, reads the new events from the store as the API's stream does.
// Without read, an event's latency is measured from the latest append.
func baseline(ctx context.Context, st store.Store, clients, events int, read bool) (summary, error) {
	var sum summary
	job, lease, err := startJob(ctx, st)
	if err != nil {
		return sum, err
	}
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		lastAppend atomic.Int64 // UnixNano before the latest append
		got        = make(chan struct{}, clients)
		mu         sync.Mutex
		lat        []time.Duration
		firstErr   error
		wg         sync.WaitGroup
	)
	for range clients {
		sub, err := st.Subscribe(subCtx, store.JobTopic(job.ID))
		if err != nil {
			return sum, err
		}
		wg.Go(func() {
			defer sub.Close()
			var mine []time.Duration
			after := job.LastSeq
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for range sub.C() {
				if !read {
					mine = append(mine, time.Duration(time.Now().UnixNano()-lastAppend.Load()))
					got <- struct{}{}
					continue
				}
				evs, err := st.ReadJobEvents(subCtx, job.ID, after, store.MaxListLimit)
				if err != nil {
					mu.Lock()
					if firstErr == nil && subCtx.Err() == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				now := time.Now().UnixNano()
				for _, e := range evs {
					after = e.Seq
					var d struct {
						T int64 `json:"t"`
					}
					if e.Type == "bench" && json.Unmarshal(e.Data, &d) == nil {
						mine = append(mine, time.Duration(now-d.T))
						got <- struct{}{}
					}
				}
			}
		})
	}
	for i := range events {
		t := time.Now().UnixNano()
		lastAppend.Store(t)
		data := fmt.Appendf(nil, `{"i":%d,"t":%d}`, i+1, t)
		if _, err := st.AppendJobEvents(ctx, lease, []store.NewJobEvent{{Type: "bench", Data: data}}); err != nil {
			return sum, err
		}
		for range clients {
			select {
			case <-got:
			case <-ctx.Done():
				return sum, ctx.Err()
			}
		}
	}
	cancel()
	wg.Wait()
	if _, err := st.Complete(ctx, lease, "done"); err != nil {
		return sum, err
	}
	if firstErr != nil {
		return sum, firstErr
	}
	slices.Sort(lat)
	sum.Received, sum.Expected = int64(len(lat)), int64(clients)*int64(events)
	if sum.Received != sum.Expected {
		return sum, fmt.Errorf("%d of %d events delivered", sum.Received, sum.Expected)
	}
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	sum.P50US, sum.P99US, sum.MaxUS = q(0.50), q(0.99), q(1)
	return sum, nil
}

// clientsMain is the child process: it opens the streams, reports "ready"
// once all are subscribed, "got <seq>" whenever every client has event
// seq, and "result <summary JSON>" when every stream has ended.
func clientsMain(args []string) error {
	fs := flag.NewFlagSet("sse clients", flag.ContinueOnError)
	url := fs.String("url", "", "event stream URL")
	n := fs.Int("clients", 1000, "subscribers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	benchproc.RaiseFileLimit()
	tr := &http.Transport{MaxIdleConns: *n, MaxIdleConnsPerHost: *n, DisableCompression: true}
	client := &http.Client{Transport: tr}
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	say := func(s string) {
		outMu.Lock()
		out.WriteString(s + "\n")
		out.Flush()
		outMu.Unlock()
	}

	var (
		ready    sync.WaitGroup
		done     sync.WaitGroup
		mu       sync.Mutex
		lat      []time.Duration
		errs     int
		firstErr string
		counts   sync.Map // seq → *atomic.Int64
		received atomic.Int64
	)
	start := time.Now()
	ready.Add(*n)
	for range *n {
		done.Go(func() {
			var mine []time.Duration
			signalled := false
			err := stream(client, *url, func() {
				signalled = true
				ready.Done()
			}, func(seq int64, sentNS int64) {
				mine = append(mine, time.Duration(time.Now().UnixNano()-sentNS))
				received.Add(1)
				c, _ := counts.LoadOrStore(seq, new(atomic.Int64))
				if c.(*atomic.Int64).Add(1) == int64(*n) {
					say("got " + strconv.FormatInt(seq, 10))
				}
			})
			if !signalled {
				ready.Done()
			}
			mu.Lock()
			lat = append(lat, mine...)
			if err != nil {
				errs++
				if firstErr == "" {
					firstErr = err.Error()
				}
			}
			mu.Unlock()
		})
	}
	ready.Wait()
	connect := time.Since(start)
	say("ready")
	done.Wait()
	slices.Sort(lat)
	s := summary{Received: received.Load(),
		ConnectMS: float64(connect.Microseconds()) / 1000, Errors: errs, FirstErr: firstErr}
	if len(lat) > 0 {
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
		s.P50US, s.P99US, s.MaxUS = q(0.50), q(0.99), q(1)
	}
	b, _ := json.Marshal(s)
	say("result " + string(b))
	return nil
}

// stream reads one SSE stream until `event: end`. subscribed is called
// after the first frame (the server subscribes before sending it); onEvent
// for every "bench" event with its sequence number and append time.
func stream(client *http.Client, url string, subscribed func(), onEvent func(seq, sentNS int64)) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	r := bufio.NewReaderSize(resp.Body, 16<<10)
	var event, data string
	first := true
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("stream ended before event: end: %w", err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line != "" {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "event":
				event = v
			case "data":
				data = v
			}
			continue
		}
		if first {
			first = false
			subscribed()
		}
		switch event {
		case "end":
			return nil
		case "error":
			return fmt.Errorf("server: %s", data)
		case "bench":
			var e struct {
				Seq  int64 `json:"seq"`
				Data struct {
					T int64 `json:"t"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				return fmt.Errorf("event data %q: %w", data, err)
			}
			onEvent(e.Seq, e.Data.T)
		}
		event, data = "", ""
	}
}

func ms(us float64) string {
	if us < 10_000 {
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.0f ms", us/1000)
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }
