package sqlite_test

import (
	"math"
	"testing"
)

// TestJobUsageBackfill: migration 004 reads the logs of an older
// database's jobs once, so their tasks list with the executor, model,
// agent CLI and cost those logs hold (a job without such events: none).
func TestJobUsageBackfill(t *testing.T) {
	t.Parallel()
	s := openAfterRows(t, 3,
		`INSERT INTO tasks (id, title, created_at, updated_at) VALUES (1, 'ran', 0, 0), (2, 'queued', 0, 0)`,
		`INSERT INTO jobs (id, task_id, state, max_attempts, scheduled_at, created_at, updated_at) VALUES
			(10, 1, 'succeeded', 1, 0, 0, 0), (11, 2, 'queued', 1, 0, 0, 0)`,
		`INSERT INTO job_events (job_id, seq, attempt, type, data, created_at) VALUES
			(10, 1, 1, 'protocol', '{"type":"ready","provider":"anthropic","model":"claude-x","executor_type":"live"}', 0),
			(10, 2, 1, 'protocol', '{"type":"response_end","usage":{"total_cost_usd":0.5}}', 0),
			(10, 3, 1, 'run_event', '{"kind":"movement_started","data":{"movement":"m","agent":"codex"}}', 0),
			(10, 4, 1, 'protocol', '{"type":"response_end","usage":{"total_cost_usd":0.25}}', 0),
			(10, 5, 1, 'protocol', '{"type":"response_end","usage":{"total_cost_usd":"x"}}', 0)`,
	)
	for _, tc := range []struct {
		id                     int64
		executor, model, agent string
		cost                   float64
	}{
		{1, "live", "anthropic/claude-x", "codex", 0.75},
		{2, "", "", "", 0},
	} {
		task, err := s.GetTask(t.Context(), tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if task.JobExecutor != tc.executor || task.JobModel != tc.model || task.JobAgent != tc.agent || math.Abs(task.JobCostUSD-tc.cost) > 1e-9 {
			t.Errorf("task %d: executor %q model %q agent %q cost %v; want %q %q %q %v", tc.id,
				task.JobExecutor, task.JobModel, task.JobAgent, task.JobCostUSD, tc.executor, tc.model, tc.agent, tc.cost)
		}
	}
}
