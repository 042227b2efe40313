package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

// `tasks show` of a job whose worker was killed (kill -9) said only
// "running (attempt 1/3)" until its lease expired: not which worker held
// it, nor that it had stopped heartbeating. It now names the slot, and
// once the slot has missed its beats, that it may be gone and when the
// job goes back to the queue (or fails, on its last attempt).
func TestTasksShowSaysWhoHoldsAJob(t *testing.T) {
	t.Parallel()
	// Times are 0.4 s later than the figures shown, so that the moments
	// the command takes still round to them.
	now := time.Now().Add(400 * time.Millisecond)
	job := func(id int64, attempt int, seen, expires time.Duration) store.Job {
		return store.Job{ID: id, TaskID: 1, State: store.StateRunning, Attempt: attempt, MaxAttempts: 3, LeaseOwner: "workerC/1",
			AttemptedAt: now.Add(-time.Minute), HeartbeatAt: now.Add(-seen), LeaseExpiresAt: now.Add(expires), ScheduledAt: now.Add(-time.Minute)}
	}
	detail := api.TaskDetail{
		Task: store.Task{ID: 1, Title: "t", CreatedAt: now},
		Jobs: []store.Job{
			job(1, 1, 3*time.Second, 27*time.Second),   // alive: heartbeated 3 s ago
			job(2, 1, 25*time.Second, 5*time.Second),   // missed two beats
			job(3, 3, 40*time.Second, -10*time.Second), // lease expired, last attempt
			{ID: 4, TaskID: 1, State: store.StateQueued, Attempt: 1, MaxAttempts: 3, LeaseOwner: "workerC/1", ScheduledAt: now},
		},
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/tasks/1" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(detail)
	}))
	defer ts.Close()
	code, out, errOut := runTasksCLI(t, map[string]string{}, "tasks", "show", "1", "--server", ts.URL)
	if code != 0 {
		t.Fatalf("tasks show: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"job 1: running (attempt 1/3)\n    held by worker workerC/1, seen 3s ago\n",
		"job 2: running (attempt 1/3)\n    held by worker workerC/1, not seen for 25s (it heartbeats every 10s): it may be gone; if so the job goes back to the queue (this attempt counted) when its lease expires at " +
			detail.Jobs[1].LeaseExpiresAt.Local().Format(time.RFC3339) + " (in 5s)\n",
		"job 3: running (attempt 3/3)\n    held by worker workerC/1, not seen for 40s (it heartbeats every 10s): its lease expired at " +
			detail.Jobs[2].LeaseExpiresAt.Local().Format(time.RFC3339) + ", so the job fails (this was its last attempt) at the reaper's next pass\n",
		"job 4: queued (attempt 1/3)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tasks show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "job 4: queued (attempt 1/3)\n    held") {
		t.Errorf("a queued job is said to be held:\n%s", out)
	}
}
