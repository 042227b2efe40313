// Command river measures River (github.com/riverqueue/river, pgx v5 driver)
// on a PostgreSQL database with the same two measurements bench/queue makes
// for Maestro's queue, so bench/run.sh can put them side by side:
//
//   - throughput: -jobs no-op jobs are inserted while no client runs, then a
//     client with MaxWorkers=-workers starts and the clock runs until the
//     last job is completed (persisted: River reports job_completed events
//     after its completer has written the state);
//   - claim latency: with the client idle, -lat-jobs jobs are inserted one
//     at a time at -lat-rate per second and each job's latency is the time
//     from just before its Insert call to the start of its Work call.
//
// Each run appends one JSON line (see result) to -out. River is used with
// its defaults (FetchPollInterval 1 s, LISTEN/NOTIFY wake-ups) except two:
// the pool size matches Maestro's PostgreSQL store (16 connections), and
// FetchCooldown is River's minimum, 1 ms (-fetch-cooldown): with the default
// 100 ms a queue fetches at most MaxWorkers jobs per 100 ms, so no-op jobs
// run at about 10 × MaxWorkers per second, which measures the setting, not
// the queue.
//
// This is a separate module so that River never enters Maestro's dependency
// graph; it shares with bench/queue only package bench/internal/jobbench
// (the JSON line and the claim-latency measurement, standard library only).
//
//	go run . -dsn postgres://… -workers 4 -jobs 5000 -out results.jsonl
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/maestro-run/maestro/bench/internal/jobbench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/river:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		dsn      = flag.String("dsn", "", "PostgreSQL connection URL of a database River may own (required)")
		workers  = flag.Int("workers", 1, "River MaxWorkers of the one queue")
		jobs     = flag.Int("jobs", 5000, "no-op jobs in the throughput measurement")
		latJobs  = flag.Int("lat-jobs", 200, "jobs in the claim-latency measurement")
		latRate  = flag.Float64("lat-rate", 50, "jobs per second inserted in the claim-latency measurement")
		out      = flag.String("out", "", "append the JSON result line to this file (default stdout)")
		timeout  = flag.Duration("timeout", 5*time.Minute, "give up after this long")
		maxConns = flag.Int("max-conns", 16, "pgx pool size")
		pidfile  = flag.String("pg-pidfile", "", "the server's postmaster.pid: also measure the server's CPU time per job")
		cooldown = flag.Duration("fetch-cooldown", river.FetchCooldownMin, "River FetchCooldown (River's default is 100ms, which caps a queue at MaxWorkers jobs per 100 ms)")
	)
	flag.Parse()
	if *dsn == "" {
		return errors.New("-dsn is required: a postgres:// URL")
	}
	if *workers < 1 || *jobs < 1 || *latJobs < 1 || *latRate <= 0 {
		return errors.New("-workers, -jobs, -lat-jobs and -lat-rate must be positive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	cfg, err := pgxpool.ParseConfig(*dsn)
	if err != nil {
		return fmt.Errorf("-dsn: %w", err)
	}
	cfg.MaxConns = int32(*maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate River's schema: %w", err)
	}
	// Every run starts from an empty job table, as Maestro's runs start
	// from a fresh schema.
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return err
	}

	var lat jobbench.Latency
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{lat: &lat})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	client, err := river.NewClient(driver, &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}},
		Workers:       ws,
		Logger:        logger,
		FetchCooldown: *cooldown,
	})
	if err != nil {
		return err
	}
	done, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
		ChanSize: *jobs + *latJobs + 100,
	})
	defer cancelSub()

	// Throughput: insert everything first (not timed), then start.
	params := make([]river.InsertManyParams, *jobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	for i := 0; i < len(params); i += 1000 {
		if _, err := client.InsertManyFast(ctx, params[i:min(i+1000, len(params))]); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
	}
	cpu0, err := jobbench.ReadCPU(*pidfile)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	if err := await(ctx, done, *jobs); err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	elapsed := time.Since(start)
	cpu1, err := jobbench.ReadCPU(*pidfile)
	if err != nil {
		return err
	}

	// Claim latency: the client is idle now.
	err = lat.Enqueue(ctx, *latJobs, *latRate, func(ctx context.Context, seq int) error {
		_, err := client.Insert(ctx, noopArgs{Seq: seq}, nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("insert latency job: %w", err)
	}
	if err := await(ctx, done, *latJobs); err != nil {
		return fmt.Errorf("claim latency: %w", err)
	}
	stopCtx, stopCancel := context.WithTimeout(ctx, 30*time.Second)
	defer stopCancel()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop the client: %w", err)
	}

	r := jobbench.Result{System: "river", Backend: "postgres", Workers: *workers,
		FetchCooldownUS: float64(cooldown.Microseconds())}
	r.Throughput(*jobs, elapsed)
	r.CPUPerJob(cpu0, cpu1, *jobs)
	if err := lat.Quantiles(&r, *latRate); err != nil {
		return err
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&r.Completed); err != nil {
		return err
	}
	if want := int64(*jobs + *latJobs); r.Completed != want {
		return fmt.Errorf("%d jobs completed, expected %d", r.Completed, want)
	}
	return jobbench.Append(os.Stdout, *out, r)
}

// await counts n job_completed events; a failed job is an error.
func await(ctx context.Context, events <-chan *river.Event, n int) error {
	for seen := 0; seen < n; {
		select {
		case ev, ok := <-events:
			if !ok {
				return errors.New("subscription closed")
			}
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			seen++
		case <-ctx.Done():
			return fmt.Errorf("%d of %d jobs completed: %w", seen, n, ctx.Err())
		}
	}
	return nil
}

// noopArgs is the no-op job; Seq > 0 marks a claim-latency job.
type noopArgs struct {
	Seq int `json:"seq,omitempty"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	lat *jobbench.Latency
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	if job.Args.Seq > 0 {
		w.lat.Started(job.Args.Seq)
	}
	return nil
}
