package queue

import (
	"context"
	"errors"
	"fmt"
	"github.com/maestro-run/maestro/internal/blobstore"
	"io"
	"log/slog"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// MaintenanceConfig configures RunMaintenance. Store is required.
type MaintenanceConfig struct {
	Store store.Store
	// Owner names this process in the leader election (unique per
	// process; default host:pid).
	Owner string
	// Every is how often the leader reaps and fires (default 1s); the
	// leader term is three times as long.
	Every  time.Duration
	Logger *slog.Logger
	// Now is the clock used to compute the next tick of a schedule
	// (default time.Now).
	Now func() time.Time
	// Tick, when set, replaces the Every ticker (tests drive rounds by
	// sending on it).
	Tick <-chan time.Time
	// DataDir, when set, is the data directory whose upload staging area
	// (<DataDir>/uploads) the leader sweeps (SweepStaging) on its first
	// round and then every StagingSweepEvery (default
	// DefaultStagingSweepEvery), removing directories no unfinished job
	// names once older than StagingGrace (default DefaultStagingGrace).
	DataDir           string
	StagingSweepEvery time.Duration
	// Artifacts, when set, is swept too (SweepArtifactStaging).
	Artifacts    blobstore.Store
	StagingGrace time.Duration
}

// LeaderName is the leader-election role of the maintenance loop.
const LeaderName = "queue-maintenance"

// Batch sizes of one maintenance round.
const (
	reapBatch     = 100
	scheduleBatch = 100
)

// RunMaintenance runs the reaper (ReapExpired), the cron scheduler
// (FireSchedule) and, with DataDir, the upload staging sweep
// (SweepStaging) until ctx ends, on the elected leader only; it is safe to
// run on many processes sharing one store (reaping, firing and sweeping
// are safe concurrently; the election only avoids wasted work). It resigns
// on exit and returns nil when ctx ends.
func RunMaintenance(ctx context.Context, cfg MaintenanceConfig) error {
	if cfg.Store == nil {
		return errors.New("queue: MaintenanceConfig.Store is required")
	}
	if cfg.Owner == "" {
		cfg.Owner = DefaultName()
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StagingSweepEvery <= 0 {
		cfg.StagingSweepEvery = DefaultStagingSweepEvery
	}
	if cfg.StagingGrace <= 0 {
		cfg.StagingGrace = DefaultStagingGrace
	}
	tick := cfg.Tick
	if tick == nil {
		t := time.NewTicker(cfg.Every)
		defer t.Stop()
		tick = t.C
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		defer cancel()
		_ = cfg.Store.ResignLeader(ctx, LeaderName, cfg.Owner)
	}()
	leading := false
	var swept time.Time // when this process last swept the staging area
	elections := &Outage{What: "leader election", Log: cfg.Logger, Now: cfg.Now}
	for {
		lead, err := cfg.Store.ElectLeader(ctx, LeaderName, cfg.Owner, 3*cfg.Every)
		if err == nil {
			elections.OK()
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			elections.Failed(err)
		case lead != leading:
			leading = lead
			cfg.Logger.Info("maintenance leadership changed", "leading", lead)
		}
		if err == nil && lead {
			if _, _, err := MaintainOnce(ctx, cfg.Store, cfg.Now, cfg.Logger); err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("maintenance round failed", "err", err)
			}
			if now := cfg.Now(); cfg.DataDir != "" && (swept.IsZero() || now.Sub(swept) >= cfg.StagingSweepEvery) {
				swept = now
				if _, err := SweepStaging(ctx, cfg.Store, cfg.DataDir, now, cfg.StagingGrace, cfg.Logger); err != nil && ctx.Err() == nil {
					cfg.Logger.Warn("upload staging sweep failed", "err", err)
				}
				if cfg.Artifacts != nil {
					if _, err := SweepArtifactStaging(ctx, cfg.Store, cfg.Artifacts, now, cfg.StagingGrace, cfg.Logger); err != nil && ctx.Err() == nil {
						cfg.Logger.Warn("artifact store upload staging sweep failed", "err", err)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
	}
}

// MaintainOnce runs one maintenance round without leader election: it
// requeues (or fails) jobs whose lease expired and fires every due
// schedule tick. It returns how many jobs were reaped and ticks fired.
func MaintainOnce(ctx context.Context, st store.Store, now func() time.Time, log *slog.Logger) (reaped, fired int, err error) {
	for {
		jobs, err := st.ReapExpired(ctx, reapBatch)
		if err != nil {
			return reaped, fired, fmt.Errorf("reap expired leases: %w", err)
		}
		for _, j := range jobs {
			log.Info("reaped expired lease", "job", j.ID, "attempt", j.Attempt, "owner", j.LeaseOwner, "state", j.State)
		}
		reaped += len(jobs)
		if len(jobs) < reapBatch {
			break
		}
	}
	var errs []error
	for {
		due, err := st.DueSchedules(ctx, scheduleBatch)
		if err != nil {
			return reaped, fired, fmt.Errorf("read due schedules: %w", err)
		}
		progress := 0
		for _, s := range due {
			// The tick after now: a schedule that missed ticks (all
			// processes down) fires once, not once per missed tick.
			next, err := NextRun(s.CronExpr, later(s.NextRunAt, now()))
			if err != nil {
				// An expression stored before a check refused it (such as
				// "@every -1h", once taken as every second) stays due: it
				// was reported every round, each second. It is switched
				// off once, saying why; updating it switches it on.
				if derr := disableSchedule(ctx, st, s); derr != nil {
					errs = append(errs, fmt.Errorf("schedule %d (%s): %w; switching it off: %w", s.ID, s.Name, err, derr))
					continue
				}
				log.Warn("schedule switched off: its cron expression is refused; update it (PUT /api/v1/schedules/{id}) to switch it on",
					"schedule", s.ID, "name", s.Name, "err", err)
				progress++
				continue
			}
			task, _, ok, err := st.FireSchedule(ctx, store.FireParams{ScheduleID: s.ID, Tick: s.NextRunAt, Next: next})
			if err != nil {
				errs = append(errs, fmt.Errorf("fire schedule %d (%s): %w", s.ID, s.Name, err))
				continue
			}
			progress++
			if ok {
				fired++
				log.Info("schedule fired", "schedule", s.ID, "name", s.Name, "tick", s.NextRunAt, "task", task.ID, "next", next)
			}
		}
		if len(due) < scheduleBatch || progress == 0 {
			break
		}
	}
	return reaped, fired, errors.Join(errs...)
}

// disableSchedule stores s as it is, switched off.
func disableSchedule(ctx context.Context, st store.Store, s store.Schedule) error {
	_, err := st.UpdateSchedule(ctx, s.ID, store.NewSchedule{
		Name: s.Name, CronExpr: s.CronExpr, Disabled: true, Owner: s.Owner, Title: s.Title, Body: s.Body,
		Piece: s.Piece, Profile: s.Profile, TaskClass: s.TaskClass, NextRunAt: s.NextRunAt,
	})
	return err
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
