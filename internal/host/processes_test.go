package host

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/pgtest"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
)

// pg is the package's PostgreSQL cluster (internal/pgtest), started on
// first use and stopped by TestMain.
var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// TestJoinStoreGivesBackACrashedProcesssJobs: a worker SIGKILLed while
// its slot ran a job is restarted on its machine under its --name: it
// takes the name back at once, and with it the job, queued again at once
// with the dead attempt counted and the reason in its error. The job
// waited for its lease (30 s by default) while the restarted worker sat
// idle. A job leased to another process (workerBB/1, whose name starts
// with workerB) is left alone.
func TestJoinStoreGivesBackACrashedProcesssJobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := postgres.Open(ctx, pg.Cluster(t).NewSchema(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	host, _ := os.Hostname()
	// The dead worker's pid is this process's: a container restarted
	// with the same pid, which crashedHere takes for a crash.
	if _, err := st.StartProcess(ctx, store.Process{Name: "workerB", Kind: store.ProcessWorker, Instance: "killed", Address: "there", Host: host, PID: os.Getpid()}, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	var jobs []int64
	for _, title := range []string{"its job", "another's job"} {
		_, j, err := st.CreateTask(ctx, store.NewTask{Title: title, Piece: "noop"})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j.ID)
	}
	if got, err := st.Claim(ctx, store.ClaimParams{Workers: []string{"workerB/2", "workerBB/1"}, Limit: 2, LeaseFor: time.Hour, Start: true}); err != nil || len(got) != 2 {
		t.Fatalf("claim: %v, %v", got, err)
	}

	rec, err := JoinStore(ctx, st, ProcessOptions{Kind: store.ProcessWorker, Name: "workerB", StaleAfter: time.Hour}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	got, err := st.GetJob(ctx, jobs[0])
	want := fmt.Sprintf("its worker workerB (pid %d on %s) ended without saying so", os.Getpid(), host)
	if err != nil || got.State != store.StateQueued || got.Attempt != 1 || got.MaxAttempts != 3 || !strings.Contains(got.Error, want) || got.ScheduledAt.After(time.Now()) {
		t.Errorf("the dead worker's job = %+v, %v; want it queued at once, attempt 1 of 3 counted, error %q", got, err, want)
	}
	if other, err := st.GetJob(ctx, jobs[1]); err != nil || other.State != store.StateRunning || other.LeaseOwner != "workerBB/1" {
		t.Errorf("workerBB/1's job = %+v, %v; want it left running", other, err)
	}
}
