package queue_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestNextRun(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 12, 7, 30, 0, time.UTC)
	tests := []struct {
		expr, want, err string
	}{
		{expr: "*/15 * * * *", want: "2026-11-23T12:15:00Z"},
		{expr: "0 9 * * MON", want: "2026-11-30T09:00:00Z"},
		{expr: "@hourly", want: "2026-11-23T13:00:00Z"},
		{expr: "@every 5m", want: "2026-11-23T12:12:30Z"},
		{expr: "CRON_TZ=Europe/Paris 0 9 * * *", want: "2026-11-24T08:00:00Z"},
		{expr: "61 * * * *", err: `field 1 (minute) "61"`},
		{expr: "0 0 32 * *", err: `field 3 (day of month) "32"`},
		{expr: "* * *", err: "3 fields where 5 are expected"},
		{expr: "", err: "nothing to schedule"},
	}
	// The machine's zone (of the time given) does not change the ticks:
	// without CRON_TZ the expression is read in UTC.
	east := at.In(time.FixedZone("UTC+5", 5*3600))
	for _, tt := range tests {
		if tt.err == "" {
			if a, b := must(queue.NextRun(tt.expr, at)), must(queue.NextRun(tt.expr, east)); !a.Equal(b) {
				t.Errorf("NextRun(%q) = %s from a UTC time, %s from the same time in UTC+5; want the same tick", tt.expr, a.Format(time.RFC3339), b.Format(time.RFC3339))
			}
		}
		got, err := queue.NextRun(tt.expr, at)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("NextRun(%q) error = %v, want one containing %q", tt.expr, err, tt.err)
			}
			continue
		}
		if err != nil || got.Format(time.RFC3339) != tt.want {
			t.Errorf("NextRun(%q) = %s, %v; want %s", tt.expr, got.Format(time.RFC3339), err, tt.want)
		}
	}
}

func TestMaintainOnceReapsExpiredLeases(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openSQLite(t, clk.Now)
	ctx := t.Context()
	j1 := enqueue(t, st, store.NewJob{MaxAttempts: 2})
	j2 := enqueue(t, st, store.NewJob{MaxAttempts: 2})
	if got, err := st.Claim(ctx, store.ClaimParams{Worker: "dead", Limit: 1, LeaseFor: time.Minute}); err != nil || len(got) != 1 || got[0].ID != j1.ID {
		t.Fatalf("claim = %v, %v", got, err)
	}
	clk.Add(30 * time.Second)
	if got, err := st.Claim(ctx, store.ClaimParams{Worker: "alive", Limit: 1, LeaseFor: time.Minute}); err != nil || len(got) != 1 || got[0].ID != j2.ID {
		t.Fatalf("claim = %v, %v", got, err)
	}
	clk.Add(31 * time.Second) // j1's lease expired, j2's has not
	reaped, fired, err := queue.MaintainOnce(ctx, st, clk.Now, quiet)
	if err != nil || reaped != 1 || fired != 0 {
		t.Fatalf("MaintainOnce = %d reaped, %d fired, %v; want 1, 0", reaped, fired, err)
	}
	if got, _ := st.GetJob(ctx, j1.ID); got.State != store.StateQueued || got.Attempt != 1 {
		t.Errorf("reaped job = %+v", got)
	}
	if got, _ := st.GetJob(ctx, j2.ID); got.State != store.StateDispatching {
		t.Errorf("live job = %+v", got)
	}
}

// TestMaintenanceFiresEachTickOnce runs two maintainers against one store
// (SQLite: two goroutines; PostgreSQL: two store handles, as two processes
// would) through several ticks and checks that each tick created exactly
// one task, also when both bypass the election and race on every tick.
func TestMaintenanceFiresEachTickOnce(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			var a, b store.Store
			if backend == "sqlite" {
				s := openSQLite(t, clk.Now)
				a, b = s, s
			} else {
				dsn := pg.Cluster(t).NewSchema(t)
				a, b = openPG(t, dsn, clk.Now), openPG(t, dsn, clk.Now)
			}
			testFiresOnce(t, clk, a, b)
		})
	}
}

func testFiresOnce(t *testing.T, clk *clock, a, b store.Store) {
	ctx := t.Context()
	first, err := queue.NextRun("*/5 * * * *", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.CreateSchedule(ctx, store.NewSchedule{Name: "report", CronExpr: "*/5 * * * *", Title: "weekly report", Piece: "noop", NextRunAt: first})
	if err != nil {
		t.Fatal(err)
	}

	// Elected: two maintainers driven round by round.
	tickA, tickB := make(chan time.Time), make(chan time.Time)
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		queue.RunMaintenance(mctx, queue.MaintenanceConfig{Store: a, Owner: "A", Every: time.Hour, Now: clk.Now, Logger: quiet, Tick: tickA})
	})
	wg.Go(func() {
		queue.RunMaintenance(mctx, queue.MaintenanceConfig{Store: b, Owner: "B", Every: time.Hour, Now: clk.Now, Logger: quiet, Tick: tickB})
	})
	const rounds = 3
	for range rounds {
		clk.Add(5 * time.Minute)
		// A send returns once the loop took the tick; the second send to
		// the same loop returns once its round (run before waiting) is done.
		for _, ch := range []chan time.Time{tickA, tickB, tickA, tickB} {
			select {
			case ch <- clk.Now():
			case <-time.After(waitTimeout):
				t.Fatal("maintenance loop stuck")
			}
		}
	}
	cancel()
	wg.Wait()
	tasks, err := a.ListTasks(ctx, store.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != rounds {
		t.Fatalf("elected maintainers created %d tasks over %d ticks", len(tasks), rounds)
	}

	// Racing: both run a round on every tick, without the election.
	const racing = 20
	for range racing {
		clk.Add(5 * time.Minute)
		var fired [2]int
		var errs [2]error
		var rw sync.WaitGroup
		for i, st := range []store.Store{a, b} {
			rw.Go(func() { _, fired[i], errs[i] = queue.MaintainOnce(ctx, st, clk.Now, quiet) })
		}
		rw.Wait()
		if errs[0] != nil || errs[1] != nil || fired[0]+fired[1] != 1 {
			t.Fatalf("one tick fired %d + %d times (errors %v, %v)", fired[0], fired[1], errs[0], errs[1])
		}
	}
	tasks, err = a.ListTasks(ctx, store.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != rounds+racing {
		t.Errorf("%d tasks after %d ticks", len(tasks), rounds+racing)
	}
	got, err := a.GetSchedule(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := queue.NextRun("*/5 * * * *", clk.Now()); !got.NextRunAt.Equal(want) {
		t.Errorf("next run %s, want %s", got.NextRunAt, want)
	}
}

func TestMaintenanceSkipsMissedTicks(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openSQLite(t, clk.Now)
	ctx := t.Context()
	first, _ := queue.NextRun("@hourly", clk.Now())
	if _, err := st.CreateSchedule(ctx, store.NewSchedule{Name: "h", CronExpr: "@hourly", Title: "t", NextRunAt: first}); err != nil {
		t.Fatal(err)
	}
	clk.Add(10 * time.Hour) // everything was down for ten ticks
	if _, fired, err := queue.MaintainOnce(ctx, st, clk.Now, quiet); err != nil || fired != 1 {
		t.Fatalf("fired %d, %v; want one catch-up firing", fired, err)
	}
	if _, fired, _ := queue.MaintainOnce(ctx, st, clk.Now, quiet); fired != 0 {
		t.Errorf("fired %d more times without a new tick", fired)
	}
}

// TestMaintenanceSwitchesOffARefusedSchedule: a schedule stored with an
// expression a later check refuses ("@every -1h", which fired every
// second) stays due; it was reported as an error every round, each second.
// It is switched off once with a warning that says why and how to switch
// it on, and the rounds after are quiet; the other schedules still fire.
func TestMaintenanceSwitchesOffARefusedSchedule(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openSQLite(t, clk.Now)
	ctx := t.Context()
	bad, err := st.CreateSchedule(ctx, store.NewSchedule{Name: "bad", CronExpr: "@every -1h", Title: "t", NextRunAt: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := queue.NextRun("@hourly", clk.Now())
	if _, err := st.CreateSchedule(ctx, store.NewSchedule{Name: "good", CronExpr: "@hourly", Title: "t", NextRunAt: first}); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Hour)
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if _, fired, err := queue.MaintainOnce(ctx, st, clk.Now, log); err != nil || fired != 1 {
		t.Fatalf("fired %d, %v; want the good schedule's tick and no error", fired, err)
	}
	if !strings.Contains(logged.String(), "schedule switched off") || !strings.Contains(logged.String(), "@every -1h") {
		t.Errorf("log:\n%s\nwant a warning that the schedule is switched off, naming its expression", logged.String())
	}
	got, err := st.GetSchedule(ctx, bad.ID)
	if err != nil || got.Enabled || got.CronExpr != "@every -1h" || got.Title != "t" {
		t.Fatalf("bad schedule = %+v, %v; want it kept as it was, switched off", got, err)
	}
	logged.Reset()
	clk.Add(time.Second)
	if _, _, err := queue.MaintainOnce(ctx, st, clk.Now, log); err != nil || logged.Len() != 0 {
		t.Errorf("the next round: %v, log %q; want it quiet", err, logged.String())
	}
}

// must returns t, or the zero time when err is set (the caller compares).
func must(t time.Time, err error) time.Time {
	if err != nil {
		return time.Time{}
	}
	return t
}
