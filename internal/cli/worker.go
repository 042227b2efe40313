package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// workerOptions are the flags of `maestro worker`.
type workerOptions struct {
	DB          string
	DataDir     string
	Artifacts   string
	Workers     int
	Profiles    []string
	TaskClasses []string
	Lease       time.Duration
	Name        string
	// MoveArtifacts replaces the database's artifact location.
	MoveArtifacts bool
}

func newWorkerCmd(io *IOStreams) *cobra.Command {
	var o workerOptions
	cmd := &cobra.Command{
		Use:   "worker [flags]",
		Short: "Run queued jobs (no API): claim, run with the engine, record the outcome",
		Long: `Run a worker process: it claims queued jobs from the job store, runs each
task's piece with Maestro's engine in the task's workspace
(<data dir>/tasks/<task id>: input/, output/, logs/), and records the outcome.
It also takes part in the maintenance election: the elected process requeues
jobs whose worker died (their lease expired) and fires due cron schedules.

The store is SQLite at <data dir>/maestro.db by default (one process only:
'maestro serve' or one 'maestro worker'); point every process at one
PostgreSQL database with --db postgres://… (or MAESTRO_DB) to run workers on
several machines.

Each claimed job is held under a lease that the worker extends every
--lease/3; a worker that dies loses its jobs once the lease expires and another
worker resumes them (the engine restarts the interrupted movement). A job that
fails is retried with backoff while attempts remain. A job that asks the user
a question waits (waiting_human) until a user comment answers it.

SIGINT or SIGTERM stops claiming and lets running jobs finish for up to 10 s
(a second signal ends the wait); jobs still running then are interrupted and
released back to the queue (the attempt does not count). Progress lines go to stderr. docs/queue.md has the
details.`,
		Example: `  maestro worker                                   # SQLite in ~/.maestro, one job at a time
  maestro worker --workers 4 --data-dir /srv/maestro
  maestro worker --db postgres://maestro@db/maestro --workers 8 --profile gpu
  MAESTRO_DB=postgres://maestro@db/maestro maestro worker --task-class code`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorker(cmd.Context(), io, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DB, "db", "", "job store: postgres://… URL (default: MAESTRO_DB, else SQLite <data dir>/maestro.db)")
	f.StringVar(&o.DataDir, "data-dir", "", "data directory: SQLite database and task workspaces (default ~/.maestro or $MAESTRO_HOME)")
	f.StringVar(&o.Artifacts, "artifacts", "", artifactsFlag)
	f.BoolVar(&o.MoveArtifacts, "move-artifacts", false, moveArtifactsFlag)
	f.IntVar(&o.Workers, "workers", 1, "jobs to run at once in this process")
	f.StringSliceVar(&o.Profiles, "profile", nil, "serve jobs that require this profile (repeatable; jobs without a profile are always served)")
	f.StringSliceVar(&o.TaskClasses, "task-class", nil, "serve jobs of this task class (repeatable; jobs without one are always served)")
	f.DurationVar(&o.Lease, "lease", queue.DefaultLeaseFor, "lease length: a job whose worker stops heartbeating is reclaimed after this long")
	f.StringVar(&o.Name, "name", "", "this process's name (at most 100 bytes), shown as the lease owner (default host:pid); on a shared PostgreSQL database a name a running serve or worker holds is refused")
	return cmd
}

func runWorker(ctx context.Context, io *IOStreams, o workerOptions) error {
	if o.Workers < 1 {
		return usageErr("--workers must be at least 1, got %d", o.Workers)
	}
	if o.Lease < 300*time.Millisecond {
		return usageErr("--lease must be at least 300ms, got %s", o.Lease)
	}
	if err := checkName(o.Name); err != nil {
		return err
	}
	if err := checkStoreFlags(o.DB, o.Artifacts); err != nil {
		return err
	}
	p, err := startJobProcess(ctx, io, o.Name, o.DB, o.DataDir)
	if err != nil {
		return failErr(err)
	}
	defer p.Close()
	ctx, log, st, dataDir := p.ctx, p.log, p.st, p.dataDir
	o.Name = p.name
	h, err := host.New(host.Options{Getenv: io.Getenv, DataDir: dataDir, Logger: log})
	if err != nil {
		return failErr(err)
	}
	artifacts, err := host.Artifacts(ctx, o.Artifacts, h.Config(), io.Getenv)
	if err != nil {
		return failErr(err)
	}
	shared, err := host.JoinStore(ctx, st, host.ProcessOptions{
		Kind: store.ProcessWorker, Name: o.Name, Artifacts: artifacts, Move: o.MoveArtifacts, StaleAfter: o.Lease,
		ArtifactsFrom: artifactsFrom(o.Artifacts, h.Config().Artifacts, h.Config().Path),
	}, log)
	if err != nil {
		return failErr(err)
	}
	defer shared.Close()
	runner, _, err := jobRunner(ctx, io, h, st, dataDir, artifacts)
	if err != nil {
		return failErr(err)
	}
	defer host.CloseRunner(runner) // runs parked on an MCP question stop with the process
	pool, err := queue.NewPool(queue.Config{
		Store: st, Runner: runner, Name: o.Name, Workers: o.Workers,
		Profiles: o.Profiles, TaskClasses: o.TaskClasses, LeaseFor: o.Lease, Logger: log,
	})
	if err != nil {
		return failErr(err)
	}
	if _, lite := st.(*sqlite.Store); lite {
		// A worker on a machine of a team that forgot --db ran on a
		// SQLite database of its own, idle, saying nothing of it.
		fmt.Fprintf(io.ErrOut, "maestro worker: warning: on SQLite (no --db, no MAESTRO_DB) this worker holds %s alone: no maestro serve can open it beside this worker, so no new task reaches it (it runs what is queued there, and its schedules). To run workers beside a serve, point every process at one PostgreSQL database (--db postgres://…; docs/scale-out.md)\n", filepath.Join(dataDir, "maestro.db"))
	}
	fmt.Fprintf(io.ErrOut, "maestro worker %s: %d worker(s), lease %s, data %s, %s\n", o.Name, o.Workers, o.Lease, dataDir, filesAt(artifacts))
	// SIGINT or SIGTERM: say at once what the next seconds hold (the
	// worker was silent until the grace ended and it released its jobs).
	said := make(chan struct{})
	sayStopping := context.AfterFunc(ctx, func() {
		fmt.Fprintln(io.ErrOut, stoppingJobs("maestro worker"))
		close(said)
	})
	defer sayStopping()

	// A second SIGINT or SIGTERM ends the grace: the running jobs go back
	// to the queue at once (the signals were taken and ignored until the
	// grace was over).
	poolDone := make(chan struct{})
	go endGraceOnSecondSignal("maestro worker", ctx, poolDone, pool, io)
	// A pool that cannot run stops the maintenance loop too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var poolErr, maintErr error
	wg.Go(func() {
		poolErr = pool.Run(ctx)
		close(poolDone)
		cancel()
	})
	wg.Go(func() { shared.Run(ctx) })
	wg.Go(func() { h.PublishJobs(ctx, st, dataDir) }) // docs/events.md, "Platform events"
	wg.Go(func() {
		maintErr = queue.RunMaintenance(ctx, queue.MaintenanceConfig{Store: st, Owner: o.Name, Every: min(time.Second, o.Lease/2), Logger: log, DataDir: dataDir, Artifacts: artifacts})
	})
	wg.Wait()
	if err := errors.Join(poolErr, maintErr); err != nil {
		return failErr(err)
	}
	if !sayStopping() {
		<-said // stopping comes before stopped
	}
	fmt.Fprintln(io.ErrOut, "maestro worker: stopped")
	return nil
}

// stoppingJobs is what serve and worker (cmd) say as a stop signal
// arrives while they run jobs: they were silent for the grace.
func stoppingJobs(cmd string) string {
	return fmt.Sprintf("%s: stopping: no new jobs; running jobs get %s to finish, then go back to the queue (the attempt does not count; a second Ctrl-C or SIGTERM gives them back at once)", cmd, queue.DefaultShutdownGrace)
}

// endGraceOnSecondSignal waits for the first stop signal (signalled, the
// context of untilSignalled, ending), then ends the pool's grace on a
// second one, until done closes.
func endGraceOnSecondSignal(cmd string, signalled context.Context, done <-chan struct{}, pool *queue.Pool, io *IOStreams) {
	select {
	case <-signalled.Done():
	case <-done:
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, stopSignals()...)
	defer signal.Stop(c)
	select {
	case <-c:
		fmt.Fprintln(io.ErrOut, cmd+": second signal: the running jobs go back to the queue now")
		pool.EndGrace()
	case <-done:
	}
}
