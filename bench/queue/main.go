// Command queue measures Maestro's job queue: throughput of no-op jobs
// claimed and completed by N workers, and claim latency (enqueue → start),
// on SQLite or PostgreSQL. bench/queue/run.sh runs it beside bench/river
// (River on the same PostgreSQL) and then calls it with -report to print
// one table with ratios against River.
//
// Measurement mode (one configuration, one JSON line appended to -out):
//
//   - throughput: -jobs no-op jobs are enqueued while no worker runs (not
//     timed), then a queue.Pool with -workers claim goroutines and a Runner
//     that returns succeeded at once starts, and the clock runs until the
//     store has recorded the last job as succeeded;
//   - claim latency: with the pool idle, -lat-jobs jobs are enqueued one at
//     a time at -lat-rate per second; a job's latency is the time from just
//     before its Enqueue call to the start of its Runner call.
//
// Every run uses a fresh SQLite file (-dir) or a fresh schema of the
// PostgreSQL database (-dsn). -impl store replaces the pool with a minimal
// claim → Start → Complete loop on the store (the floor the pool adds its
// heartbeats, events and bookkeeping to).
//
// Report mode: -report results.jsonl prints the markdown table.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/maestro-run/maestro/bench/internal/jobbench"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// result is one measured configuration; bench/river writes the same line.
type result = jobbench.Result

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/queue:", err)
		os.Exit(1)
	}
}

type options struct {
	backend, dir, dsn, impl, out string
	pgPidfile                    string
	cpuProfile                   string // of the throughput phase
	workers, jobs, latJobs       int
	latRate                      float64
	timeout                      time.Duration
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("queue", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.backend, "backend", "sqlite", "store backend: sqlite or postgres")
	fs.StringVar(&o.dir, "dir", "", "sqlite: directory for the database files (default a temp dir, removed)")
	fs.StringVar(&o.dsn, "dsn", "", "postgres: connection URL of a database; each run creates a fresh schema in it")
	fs.StringVar(&o.impl, "impl", "pool", "pool: queue.Pool; store: a bare claim/Start/Complete loop on the store")
	fs.IntVar(&o.workers, "workers", 1, "claim goroutines")
	fs.IntVar(&o.jobs, "jobs", 5000, "no-op jobs in the throughput measurement")
	fs.IntVar(&o.latJobs, "lat-jobs", 200, "jobs in the claim-latency measurement")
	fs.Float64Var(&o.latRate, "lat-rate", 50, "jobs per second enqueued in the claim-latency measurement")
	fs.StringVar(&o.out, "out", "", "append the JSON result line to this file (default stdout)")
	fs.StringVar(&o.pgPidfile, "pg-pidfile", "", "postgres: the server's postmaster.pid, to also measure the server's CPU time per job")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	report := fs.String("report", "", "print the markdown table of the JSON lines in this file and exit")
	pgVersion := fs.String("pg-version", "", "report: PostgreSQL version for the title")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the throughput phase (not the enqueueing before it) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *report != "" {
		return printReport(stdout, *report, *pgVersion)
	}
	if o.workers < 1 || o.jobs < 1 || o.latJobs < 1 || o.latRate <= 0 {
		return errors.New("-workers, -jobs, -lat-jobs and -lat-rate must be positive")
	}
	if o.impl != "pool" && o.impl != "store" {
		return fmt.Errorf("-impl: expected pool or store, found %q", o.impl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	st, cleanup, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer cleanup()
	o.cpuProfile = *cpuProfile
	r, err := measure(ctx, st, o)
	if err != nil {
		return err
	}
	return jobbench.Append(stdout, o.out, r)
}

// openStore opens a fresh store for one run.
func openStore(ctx context.Context, o options) (store.Store, func(), error) {
	stamp := fmt.Sprintf("w%d_%d", o.workers, time.Now().UnixNano())
	switch o.backend {
	case "sqlite":
		dir, remove := o.dir, false
		if dir == "" {
			d, err := os.MkdirTemp("", "maestro-bench-queue-")
			if err != nil {
				return nil, nil, err
			}
			dir, remove = d, true
		}
		st, err := sqlite.Open(ctx, filepath.Join(dir, stamp+".db"), sqlite.Options{})
		if err != nil {
			return nil, nil, err
		}
		return st, func() {
			st.Close()
			if remove {
				os.RemoveAll(dir)
			}
		}, nil
	case "postgres":
		if o.dsn == "" {
			return nil, nil, errors.New("-backend postgres needs -dsn postgres://…")
		}
		u, err := url.Parse(o.dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("-dsn: %w", err)
		}
		admin, err := sql.Open("pgx", o.dsn)
		if err != nil {
			return nil, nil, err
		}
		defer admin.Close()
		schema := "bench_" + stamp
		if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
			return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		st, err := postgres.Open(ctx, u.String(), postgres.Options{})
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
	return nil, nil, fmt.Errorf("-backend: expected sqlite or postgres, found %q", o.backend)
}

func measure(ctx context.Context, st store.Store, o options) (result, error) {
	// completions counts jobs the store has recorded as succeeded.
	cs := &countingStore{Store: st, done: make(chan struct{}, o.jobs+o.latJobs+16)}
	var lat jobbench.Latency
	runner := queue.RunnerFunc(func(_ context.Context, j *queue.Job) queue.Result {
		if len(j.Payload) > 2 {
			var p struct {
				Seq int `json:"seq"`
			}
			if json.Unmarshal(j.Payload, &p) == nil && p.Seq > 0 {
				lat.Started(p.Seq)
			}
		}
		return queue.Result{State: store.StateSucceeded}
	})

	if err := enqueueNoops(ctx, st, o.jobs); err != nil {
		return result{}, err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg     sync.WaitGroup
		runErr error
	)
	cpu0, err := jobbench.ReadCPU(o.pgPidfile)
	if err != nil {
		return result{}, err
	}
	stopProfile := func() {}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return result{}, fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, fmt.Errorf("-cpuprofile: %w", err)
		}
		stopProfile = pprof.StopCPUProfile
		defer stopProfile()
	}
	start := time.Now()
	switch o.impl {
	case "pool":
		pool, err := queue.NewPool(queue.Config{Store: cs, Runner: runner, Name: "bench", Workers: o.workers})
		if err != nil {
			return result{}, err
		}
		wg.Go(func() { runErr = pool.Run(runCtx) })
	case "store":
		wg.Go(func() { runErr = storeLoop(runCtx, cs, runner, o.workers) })
	}
	finish := func() error {
		stop()
		wg.Wait()
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			return runErr
		}
		return nil
	}
	if err := cs.await(ctx, o.jobs); err != nil {
		finish()
		return result{}, fmt.Errorf("throughput: %w", err)
	}
	elapsed := time.Since(start)
	stopProfile()
	cpu1, err := jobbench.ReadCPU(o.pgPidfile)
	if err != nil {
		finish()
		return result{}, err
	}

	err = lat.Enqueue(ctx, o.latJobs, o.latRate, func(ctx context.Context, seq int) error {
		_, err := st.Enqueue(ctx, store.NewJob{Piece: "noop", Payload: fmt.Appendf(nil, `{"seq":%d}`, seq)})
		return err
	})
	if err != nil {
		finish()
		return result{}, fmt.Errorf("enqueue a latency job: %w", err)
	}
	if err := cs.await(ctx, o.latJobs); err != nil {
		finish()
		return result{}, fmt.Errorf("claim latency: %w", err)
	}
	if err := finish(); err != nil {
		return result{}, err
	}

	system := "maestro"
	if o.impl == "store" {
		system = "maestro-store"
	}
	r := result{System: system, Backend: o.backend, Workers: o.workers}
	r.Throughput(o.jobs, elapsed)
	r.CPUPerJob(cpu0, cpu1, o.jobs)
	if err := lat.Quantiles(&r, o.latRate); err != nil {
		return result{}, err
	}
	counts, err := st.CountJobs(ctx)
	if err != nil {
		return result{}, err
	}
	r.Completed = counts[store.StateSucceeded]
	if want := int64(o.jobs + o.latJobs); r.Completed != want || len(counts) != 1 {
		return result{}, fmt.Errorf("expected %d succeeded jobs and nothing else, found %v", want, counts)
	}
	return r, nil
}

// enqueueNoops enqueues n no-op jobs from a few goroutines (untimed set-up).
func enqueueNoops(ctx context.Context, st store.Store, n int) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, 4)
	)
	for range 4 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := st.Enqueue(ctx, store.NewJob{Piece: "noop"}); err != nil {
					errs <- fmt.Errorf("enqueue: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// countingStore signals every job Complete or CompleteMany completed.
type countingStore struct {
	store.Store
	done chan struct{}
}

func (c *countingStore) Complete(ctx context.Context, l store.Lease, res string) (store.Job, error) {
	j, err := c.Store.Complete(ctx, l, res)
	if err == nil {
		c.done <- struct{}{}
	}
	return j, err
}

func (c *countingStore) CompleteMany(ctx context.Context, cs []store.Completion) []store.JobOutcome {
	outs := c.Store.CompleteMany(ctx, cs)
	for _, o := range outs {
		if o.Err == nil {
			c.done <- struct{}{}
		}
	}
	return outs
}

// CompleteManyErrs is the store's own when it has one (the pool's
// completer uses it), else CompleteMany's errors.
func (c *countingStore) CompleteManyErrs(ctx context.Context, cs []store.Completion) []error {
	var errs []error
	if ec, ok := c.Store.(interface {
		CompleteManyErrs(context.Context, []store.Completion) []error
	}); ok {
		errs = ec.CompleteManyErrs(ctx, cs)
	} else {
		for _, o := range c.Store.CompleteMany(ctx, cs) {
			errs = append(errs, o.Err)
		}
	}
	for _, err := range errs {
		if err == nil {
			c.done <- struct{}{}
		}
	}
	return errs
}

func (c *countingStore) await(ctx context.Context, n int) error {
	for seen := 0; seen < n; seen++ {
		select {
		case <-c.done:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d jobs completed: %w", seen, n, ctx.Err())
		}
	}
	return nil
}
