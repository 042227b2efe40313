package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
)

// askScenarioFile is a scripted model that asks the user which colour,
// then finishes with the answer (also the `maestro tasks` tests' scenario).
const askScenarioFile = "testdata/ask-scenario.yaml"

// TestAskThroughTheAPI is the acceptance test: the API and a worker pool
// with the engine runner in one process; a task whose scripted model asks
// a question waits (waiting_human), a comment answers it, and the job
// completes — all observed through the API, the job's events followed on
// one SSE stream from start to end.
func TestAskThroughTheAPI(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			metrics := queue.NewMetrics()
			e := newEnv(t, st, func(c *server.Config) {
				c.TaskDir, c.NextRun, c.Metrics = queue.TaskDir, queue.NextRun, metrics
			})
			pool, err := queue.NewPool(queue.Config{
				Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: e.dataDir}),
				Name: "test", Workers: 1, Metrics: metrics, Poll: 200 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() { pool.Run(ctx) })
			defer wg.Wait()
			defer cancel()

			askScenario, err := os.ReadFile(askScenarioFile)
			if err != nil {
				t.Fatal(err)
			}
			ct := e.createTask("Paint the fence.", map[string]any{"piece": "chat", "payload": map[string]any{"replay": string(askScenario)}})
			s := e.openStream(ct.Job.ID, "", "")
			var seen []int64
			waitFor := func(state store.State) {
				t.Helper()
				for {
					f := s.nextEvent()
					if f.Event == "end" {
						t.Fatalf("the stream ended (%s) before state %s", f.Data, state)
					}
					seen = append(seen, eventSeq(t, f))
					if f.Event != string(store.JobEventStatus) {
						continue
					}
					var ev store.JobEvent
					var status store.StatusEvent
					json.Unmarshal([]byte(f.Data), &ev)
					json.Unmarshal(ev.Data, &status)
					if status.State == state {
						return
					}
					if status.State.Terminal() {
						t.Fatalf("job ended %s before %s: %s", status.State, state, f.Data)
					}
				}
			}
			waitFor(store.StateWaitingHuman)

			task := "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10)
			var detail struct {
				Jobs     []store.Job     `json:"jobs"`
				Comments []store.Comment `json:"comments"`
			}
			e.must(http.StatusOK, "GET", task, nil, &detail)
			if len(detail.Jobs) != 1 || detail.Jobs[0].State != store.StateWaitingHuman ||
				len(detail.Comments) != 1 || detail.Comments[0].AuthorKind != store.AuthorAgent || detail.Comments[0].Body != "Which colour should the fence be?" {
				t.Fatalf("waiting task: %+v", detail)
			}
			var com struct {
				ResumedJobs []store.Job `json:"resumed_jobs"`
			}
			e.must(http.StatusCreated, "POST", task+"/comments", map[string]string{"body": "blue"}, &com)
			if len(com.ResumedJobs) != 1 || com.ResumedJobs[0].ID != ct.Job.ID {
				t.Fatalf("resumed %+v", com)
			}
			waitFor(store.StateSucceeded)
			if f := s.nextEvent(); f.Event != "end" || !strings.Contains(f.Data, `"succeeded"`) {
				t.Fatalf("after success: %+v, want event: end", f)
			}
			for i, q := range seen {
				if q != int64(i+1) {
					t.Fatalf("event sequence %v has a gap or a duplicate", seen)
				}
			}
			var job struct {
				Job store.Job `json:"job"`
			}
			e.must(http.StatusOK, "GET", "/api/v1/jobs/"+strconv.FormatInt(ct.Job.ID, 10), nil, &job)
			if job.Job.State != store.StateSucceeded || job.Job.Result != "The fence is painted blue." {
				t.Fatalf("job %+v", job.Job)
			}
			_, body := e.do("GET", "/metrics", nil)
			if !strings.Contains(string(body), `maestro_jobs{state="succeeded"} 1`) {
				t.Fatalf("metrics:\n%s", body)
			}
		})
	}
}
