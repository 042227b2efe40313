package queue_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

const (
	stagingKey = "0123456789abcdef0123456789abcdef"
	otherKey   = "fedcba9876543210fedcba9876543210"
)

// stagingPayload is a job payload naming staging key (plus extra fields).
func stagingPayload(t *testing.T, key string, extra map[string]json.RawMessage) json.RawMessage {
	t.Helper()
	pl := map[string]json.RawMessage{}
	for k, v := range extra {
		pl[k] = v
	}
	pl[staging.PayloadField], _ = json.Marshal(key)
	data, err := json.Marshal(pl)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// stage writes files into the staging directory of key, all last changed
// at changed.
func stage(t *testing.T, data, key string, changed time.Time, files map[string]string) {
	t.Helper()
	dir := staging.Dir(data, key)
	wstest.WriteFiles(t, dir, files)
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			err = os.Chtimes(p, changed, changed)
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
}

func writeJobFile(t *testing.T, data, key, content string) {
	t.Helper()
	if err := os.WriteFile(staging.JobFile(data, key), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// grace is the grace period of the sweep tests.
const grace = time.Hour

// sweepTimes are a sweep test's time of the sweep and two change times,
// one older than the grace period and one younger.
func sweepTimes() (now, old, young time.Time) {
	now = time.Now()
	return now, now.Add(-2 * grace), now.Add(-grace / 2)
}

// TestSweepStaging: a staging directory whose job ended without running
// goes into the task's input/; one no unfinished job names goes once older
// than the grace period; everything an unfinished job still needs stays.
func TestSweepStaging(t *testing.T) {
	t.Parallel()
	now, old, young := sweepTimes()
	tests := []struct {
		name string
		// job: the state the job naming the key ends in before the sweep
		// ("" none).
		job store.State
		// jobFile: "own" (the job's id), "none", "unknown" (no such job),
		// "other" (a job naming another key), "garbage" (half written).
		jobFile string
		changed time.Time
		// youngFile adds a file still being written to an old directory.
		youngFile bool
		want      string // kept, moved, removed
	}{
		{name: "queued job", job: store.StateQueued, jobFile: "own", changed: old, want: "kept"},
		{name: "waiting job", job: store.StateWaitingHuman, jobFile: "own", changed: old, want: "kept"},
		{name: "cancelled while queued", job: store.StateCancelled, jobFile: "own", changed: young, want: "moved"},
		{name: "failed before it ran", job: store.StateFailed, jobFile: "own", changed: young, want: "moved"},
		{name: "succeeded without moving (noop)", job: store.StateSucceeded, jobFile: "own", changed: young, want: "moved"},
		{name: "crash before the task existed, young", jobFile: "none", changed: young, want: "kept"},
		{name: "crash before the task existed, old", jobFile: "none", changed: old, want: "removed"},
		{name: "old directory, a file still being written", jobFile: "none", changed: old, youngFile: true, want: "kept"},
		{name: "job file lost, job queued", job: store.StateQueued, jobFile: "none", changed: old, want: "kept"},
		{name: "job file lost, job cancelled", job: store.StateCancelled, jobFile: "none", changed: old, want: "removed"},
		{name: "job file half written, job queued", job: store.StateQueued, jobFile: "garbage", changed: old, want: "kept"},
		{name: "job file half written, no job", jobFile: "garbage", changed: old, want: "removed"},
		{name: "job file names an unknown job", jobFile: "unknown", changed: old, want: "removed"},
		{name: "job file names an unknown job, young", jobFile: "unknown", changed: young, want: "kept"},
		{name: "job file names a job of another key", jobFile: "other", changed: old, want: "removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openSQLite(t, nil)
			ctx := t.Context()
			data := t.TempDir()
			stage(t, data, stagingKey, tt.changed, map[string]string{"report.txt": "figures\n", "docs/notes.md": "# notes\n"})
			if tt.youngFile {
				p := filepath.Join(staging.Dir(data, stagingKey), "docs", "big.bin")
				if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
					t.Fatal(err)
				}
				os.Chtimes(p, young, young)
			}
			var task store.Task
			var job store.Job
			if tt.job != "" {
				var err error
				task, job, err = st.CreateTask(ctx, store.NewTask{Title: "t", Piece: "noop", Payload: stagingPayload(t, stagingKey, nil)})
				if err != nil {
					t.Fatal(err)
				}
				driveTo(t, st, job, tt.job)
			}
			switch tt.jobFile {
			case "own":
				writeJobFile(t, data, stagingKey, jsonInt(job.ID)+"\n")
			case "unknown":
				writeJobFile(t, data, stagingKey, "999\n")
			case "garbage":
				writeJobFile(t, data, stagingKey, "1")
				writeJobFile(t, data, stagingKey, "")
			case "other":
				_, other, err := st.CreateTask(ctx, store.NewTask{Title: "other", Payload: stagingPayload(t, otherKey, nil)})
				if err != nil {
					t.Fatal(err)
				}
				writeJobFile(t, data, stagingKey, jsonInt(other.ID))
			}
			hadJobFile := exists(t, staging.JobFile(data, stagingKey))

			got, err := queue.SweepStaging(ctx, st, data, now, grace, quiet)
			if err != nil {
				t.Fatalf("SweepStaging: %v", err)
			}
			stagedDir := staging.Dir(data, stagingKey)
			input := filepath.Join(queue.WorkDir(data, task.ID), "input")
			switch tt.want {
			case "kept":
				if got != (queue.StagingSweep{}) {
					t.Errorf("sweep = %+v, want nothing done", got)
				}
				if b, err := os.ReadFile(filepath.Join(stagedDir, "docs", "notes.md")); err != nil || string(b) != "# notes\n" {
					t.Errorf("staged docs/notes.md = %q, %v; want it kept", b, err)
				}
				if exists(t, staging.JobFile(data, stagingKey)) != hadJobFile {
					t.Errorf("the job file changed")
				}
			case "moved":
				if got != (queue.StagingSweep{Moved: 1}) {
					t.Errorf("sweep = %+v, want one moved", got)
				}
				for name, want := range map[string]string{"report.txt": "figures\n", "docs/notes.md": "# notes\n"} {
					if b, err := os.ReadFile(filepath.Join(input, filepath.FromSlash(name))); err != nil || string(b) != want {
						t.Errorf("input/%s = %q, %v; want %q", name, b, err, want)
					}
				}
			case "removed":
				if got != (queue.StagingSweep{Removed: 1}) {
					t.Errorf("sweep = %+v, want one removed", got)
				}
				if tt.job != "" && exists(t, input) {
					t.Errorf("an orphan went into the task's input/")
				}
			}
			if tt.want != "kept" {
				if ents, _ := os.ReadDir(filepath.Join(data, "uploads")); len(ents) != 0 {
					t.Errorf("uploads/ still holds %v", ents)
				}
			}
			if tt.job != "" {
				if j, err := st.GetJob(ctx, job.ID); err != nil || j.State != tt.job {
					t.Errorf("the sweep changed the job: %+v, %v", j, err)
				}
			}
		})
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// driveTo brings a new queued job to state s.
func driveTo(t *testing.T, st store.Store, j store.Job, s store.State) {
	t.Helper()
	ctx := t.Context()
	claim := func() store.Job {
		got, err := st.Claim(ctx, store.ClaimParams{Worker: "w", Limit: 1, LeaseFor: time.Minute})
		if err != nil || len(got) != 1 || got[0].ID != j.ID {
			t.Fatalf("claim = %v, %v", got, err)
		}
		return got[0]
	}
	var err error
	switch s {
	case store.StateQueued:
	case store.StateCancelled:
		_, err = st.Cancel(ctx, j.ID, "test")
	case store.StateFailed:
		_, err = st.Fail(ctx, claim().Lease(), store.FailParams{Error: "choose the model: no key", NoRetry: true})
	case store.StateSucceeded:
		_, err = st.Complete(ctx, claim().Lease(), "ok")
	case store.StateWaitingHuman:
		_, err = st.Wait(ctx, claim().Lease(), store.WaitParams{State: store.StateWaitingHuman, Question: "which?"})
	default:
		t.Fatalf("driveTo %s: not supported", s)
	}
	if err != nil {
		t.Fatalf("driveTo %s: %v", s, err)
	}
}

// TestSweepStagingLeavesOthersAlone: a job file whose directory is gone is
// removed; entries the sweep does not recognise stay; no staging area is
// no work.
func TestSweepStagingLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	data := t.TempDir()
	if got, err := queue.SweepStaging(t.Context(), st, data, time.Now(), time.Hour, quiet); err != nil || got != (queue.StagingSweep{}) {
		t.Fatalf("no uploads/: %+v, %v", got, err)
	}
	uploads := filepath.Join(data, "uploads")
	for _, d := range []string{"notes", "0123"} {
		if err := os.MkdirAll(filepath.Join(uploads, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(uploads, "README"), []byte("x"), 0o644)
	writeJobFile(t, data, stagingKey, "1\n") // the runner moved the files before the API wrote it
	longAgo := time.Now().Add(-48 * time.Hour)
	for _, n := range []string{"notes", "0123", "README"} {
		os.Chtimes(filepath.Join(uploads, n), longAgo, longAgo)
	}
	got, err := queue.SweepStaging(t.Context(), st, data, time.Now(), time.Hour, quiet)
	if err != nil || got != (queue.StagingSweep{}) {
		t.Fatalf("sweep = %+v, %v", got, err)
	}
	ents, _ := os.ReadDir(uploads)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 3 || names[0] != "0123" || names[1] != "README" || names[2] != "notes" {
		t.Errorf("uploads/ holds %v, want the unknown entries only", names)
	}
}

// TestRunMaintenanceSweepsStaging: the leader sweeps on its first round,
// then not again before StagingSweepEvery has passed.
func TestRunMaintenanceSweepsStaging(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openSQLite(t, clk.Now)
	data := t.TempDir()
	stage(t, data, stagingKey, clk.Now().Add(-2*time.Hour), map[string]string{"a.txt": "a"})
	tick := make(chan time.Time)
	ctx := t.Context()
	done := make(chan struct{})
	go func() {
		defer close(done)
		queue.RunMaintenance(ctx, queue.MaintenanceConfig{Store: st, Owner: "A", Every: time.Hour, Now: clk.Now, Logger: quiet, Tick: tick,
			DataDir: data, StagingSweepEvery: 10 * time.Minute, StagingGrace: time.Hour})
	}()
	// round waits until the loop has finished a round: a send returns when
	// the loop takes the tick, the next one when the following round ran.
	round := func() {
		t.Helper()
		for range 2 {
			select {
			case tick <- clk.Now():
			case <-time.After(waitTimeout):
				t.Fatal("maintenance loop stuck")
			}
		}
	}
	round()
	if exists(t, staging.Dir(data, stagingKey)) {
		t.Fatal("the first round left an orphan staging directory older than the grace period")
	}
	stage(t, data, otherKey, clk.Now().Add(-2*time.Hour), map[string]string{"b.txt": "b"})
	clk.Add(5 * time.Minute)
	round()
	if !exists(t, staging.Dir(data, otherKey)) {
		t.Fatal("swept again before StagingSweepEvery")
	}
	clk.Add(5 * time.Minute)
	round()
	if exists(t, staging.Dir(data, otherKey)) {
		t.Fatal("not swept once StagingSweepEvery had passed")
	}
}

// twoFilesScenario reads two uploaded files and fails a frame if one is
// missing.
const twoFilesScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"read-two","description":"read both uploads",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Read","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Read","input":{"path":"input/a.txt"},"expectedResult":"success"}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"Read","input":{"path":"input/docs/b.txt"},"expectedResult":"success"}]},
{"index":2,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"Read both."}}]}
]}`

// TestEngineRunnerFinishesHalfMovedStaging: attempt 1 moved one file of
// two into input/ and died; once its lease is reaped, attempt 2 finishes
// the move and the run reads both files.
func TestEngineRunnerFinishesHalfMovedStaging(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openSQLite(t, clk.Now)
	ctx := t.Context()
	data := t.TempDir()
	pl := stagingPayload(t, stagingKey, map[string]json.RawMessage{"replay": json.RawMessage(twoFilesScenario)})
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Read both", Piece: "general", Payload: pl, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	stage(t, data, stagingKey, clk.Now(), map[string]string{"docs/b.txt": "B\n"})
	writeJobFile(t, data, stagingKey, jsonInt(job.ID))
	in := filepath.Join(queue.WorkDir(data, task.ID), "input")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "a.txt"), []byte("A\n"), 0o644); err != nil { // attempt 1's half
		t.Fatal(err)
	}
	if got, err := st.Claim(ctx, store.ClaimParams{Worker: "dead", Limit: 1, LeaseFor: time.Minute}); err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	clk.Add(2 * time.Minute)
	if reaped, _, err := queue.MaintainOnce(ctx, st, clk.Now, quiet); err != nil || reaped != 1 {
		t.Fatalf("reaped %d, %v", reaped, err)
	}
	startPool(t, queue.Config{Store: st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: data})})
	done := waitJob(t, st, job.ID, "finished", func(j store.Job) bool { return j.State.Terminal() })
	if done.State != store.StateSucceeded || done.Attempt != 2 || done.Result != "Read both." {
		t.Fatalf("job = %s attempt %d, result %q, error %q; want succeeded on attempt 2", done.State, done.Attempt, done.Result, done.Error)
	}
	for name, want := range map[string]string{"a.txt": "A\n", "docs/b.txt": "B\n"} {
		if b, err := os.ReadFile(filepath.Join(in, filepath.FromSlash(name))); err != nil || string(b) != want {
			t.Errorf("input/%s = %q, %v", name, b, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(data, "uploads")); len(ents) != 0 {
		t.Errorf("uploads/ still holds %v", ents)
	}
}
