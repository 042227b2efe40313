package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/maestro-run/maestro/internal/pgtest"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
)

// pg is the package's PostgreSQL cluster (internal/pgtest), started on
// first use and stopped by TestMain.
var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// openPG opens a store on a schema of its own of the package's cluster,
// closed when the test ends.
func openPG(t *testing.T) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), pg.Cluster(t).NewSchema(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

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
	st := openPG(t)
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

// TestJoinStoreTakesTheNameOfAKilledUnreapedProcess: a worker killed
// (kill -9) and restarted at once on its machine takes its --name back
// though its parent has not reaped it yet: the killed pid is a zombie,
// which kill(pid, 0) answers for as for a live process, so the restart
// was refused ("--name workerC is taken … free within 24s") until the
// name went stale. A live pid still holds its name.
func TestJoinStoreTakesTheNameOfAKilledUnreapedProcess(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openPG(t)
	host, _ := os.Hostname()
	killed := exec.Command("cat") // runs until its stdin closes
	if _, err := killed.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	defer killed.Wait()
	live := exec.Command("cat")
	liveIn, err := live.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer live.Wait()
	defer liveIn.Close()
	for _, p := range []store.Process{
		{Name: "workerC", Kind: store.ProcessWorker, Instance: "killed", Address: "there", Host: host, PID: killed.Process.Pid},
		{Name: "workerD", Kind: store.ProcessWorker, Instance: "live", Address: "there", Host: host, PID: live.Process.Pid},
	} {
		if _, err := st.StartProcess(ctx, p, time.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Wait for its exit but leave it unreaped (WNOWAIT): a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, killed.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(killed.Process.Pid, 0); err != nil {
		t.Fatalf("kill(zombie, 0) = %v; the test wants it to answer as for a live process", err)
	}

	log := slog.New(slog.DiscardHandler)
	rec, err := JoinStore(ctx, st, ProcessOptions{Kind: store.ProcessWorker, Name: "workerC", StaleAfter: time.Hour}, log)
	if err != nil {
		t.Fatalf("restarted right after kill -9 (its pid a zombie): %v; want the name taken back at once", err)
	}
	rec.Close()
	if rec, err := JoinStore(ctx, st, ProcessOptions{Kind: store.ProcessWorker, Name: "workerD", StaleAfter: time.Hour}, log); err == nil || !strings.Contains(err.Error(), "--name workerD is taken") {
		rec.Close()
		t.Errorf("JoinStore under the name of a live pid = %v; want it refused", err)
	}
}

// outageProcesses fails every process heartbeat before until, as a
// database that is down does.
type outageProcesses struct {
	store.Processes
	until time.Time
}

func (o *outageProcesses) HeartbeatProcess(context.Context, string, string) error {
	if time.Now().Before(o.until) {
		return errors.New("failed to connect to `user=postgres database=maestro`: 127.0.0.1:5432 (localhost): dial error: connect: connection refused")
	}
	return nil
}

// TestProcessHeartbeatOutageIsLoggedOnce: during a 100 s outage of the
// database the process heartbeat (every 10 s) logs one warning saying
// what failed, that it retries and what to check, then a reminder at most
// every 30 s with the count, and one line when it works again (beats at
// 10 s … 90 s fail, the one at 100 s works). It logged the driver's text
// at each of the nine failed beats.
func TestProcessHeartbeatOutageIsLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		st := &outageProcesses{until: time.Now().Add(100 * time.Second)}
		s := &ProcessRecord{st: st, stale: 30 * time.Second, log: slog.New(slog.NewTextHandler(&buf, nil)), p: store.Process{Name: "workerC", Instance: "i"}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		time.Sleep(130 * time.Second) // fake time: the bubble's clock
		synctest.Wait()
		cancel()
		<-done
		out := buf.String()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 {
			t.Errorf("logged %d lines during a 100 s outage, want 4 (the failure, 2 reminders, back):\n%s", len(lines), out)
		}
		for _, want := range []string{
			"heartbeat of this process's --name failed: the store does not answer; retrying every 10s (check that the database is up and reachable from here",
			"heartbeat of this process's --name still failing\" name=workerC failures=4 for=30s",
			"heartbeat of this process's --name works again\" name=workerC failures=9 after=1m30s",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the log lacks %q:\n%s", want, out)
			}
		}
	})
}
