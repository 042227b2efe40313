package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// writeScenario writes a deliverable and succeeds.
const writeScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"write-report","description":"write, then finish",
"metadata":{"recordedAt":"2026-11-27T00:00:00Z","toolsExpected":["Write","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Write","input":{"path":"output/report.txt","content":"figures\n"}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"Reported."}}]}
]}`

// outageStore is an artifact store that is unreachable while down is set:
// every call fails as an S3 store's does when nothing listens on its port.
// With tripOn set, the first Put of a key containing it takes it down.
type outageStore struct {
	*blobstore.Local
	down    atomic.Bool
	tripOn  string
	tripped atomic.Bool
}

func (s *outageStore) refused(op, key string) error {
	if !s.down.Load() {
		return nil
	}
	return fmt.Errorf("%s blob %s in s3://bkt: %w", op, key, &url.Error{Op: "Get", URL: "http://127.0.0.1:9/bkt", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
}

func (s *outageStore) Put(ctx context.Context, key string, r io.Reader, size int64, sum string) error {
	if s.tripOn != "" && strings.Contains(key, s.tripOn) && s.tripped.CompareAndSwap(false, true) {
		s.down.Store(true)
	}
	if err := s.refused("put", key); err != nil {
		return err
	}
	return s.Local.Put(ctx, key, r, size, sum)
}

func (s *outageStore) Get(ctx context.Context, key string) (io.ReadSeekCloser, blobstore.Info, error) {
	if err := s.refused("get", key); err != nil {
		return nil, blobstore.Info{}, err
	}
	return s.Local.Get(ctx, key)
}

func (s *outageStore) Stat(ctx context.Context, key string) (blobstore.Info, error) {
	if err := s.refused("stat", key); err != nil {
		return blobstore.Info{}, err
	}
	return s.Local.Stat(ctx, key)
}

func (s *outageStore) List(ctx context.Context, prefix string) ([]blobstore.Info, error) {
	if err := s.refused("list", prefix); err != nil {
		return nil, err
	}
	return s.Local.List(ctx, prefix)
}

func (s *outageStore) Delete(ctx context.Context, key string) error {
	if err := s.refused("delete", key); err != nil {
		return err
	}
	return s.Local.Delete(ctx, key)
}

// waitEvents waits (on the job's notifications) until ok accepts the
// job's event log; a job that ends first fails the test.
func waitEvents(t *testing.T, st store.Store, id int64, what string, ok func([]store.JobEvent) bool) []store.JobEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	sub, err := st.Subscribe(ctx, store.JobTopic(id))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for {
		evs, err := st.ReadJobEvents(ctx, id, 0, store.MaxListLimit)
		if err != nil {
			t.Fatal(err)
		}
		if ok(evs) {
			return evs
		}
		if j, err := st.GetJob(ctx, id); err == nil && j.State.Terminal() {
			t.Fatalf("job %d ended %s (attempt %d/%d, error %q) before %s; its log: %s", id, j.State, j.Attempt, j.MaxAttempts, j.Error, what, eventLines(evs))
		}
		select {
		case <-sub.C():
		case <-ctx.Done():
			t.Fatalf("job %d: gave up waiting for %s after %s; its log: %s", id, what, waitTimeout, eventLines(evs))
		}
	}
}

// eventLines is a job's log, one event per line, for messages.
func eventLines(evs []store.JobEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  #%d %s %s", e.Seq, e.Type, e.Data)
	}
	return b.String()
}

// givenBack lists the status events of the attempts given back without
// being counted.
func givenBack(t *testing.T, evs []store.JobEvent) []store.StatusEvent {
	t.Helper()
	var out []store.StatusEvent
	for _, e := range evs {
		if e.Type != store.JobEventStatus {
			continue
		}
		var st store.StatusEvent
		if err := json.Unmarshal(e.Data, &st); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(st.Reason, "attempt not counted") {
			out = append(out, st)
		}
	}
	return out
}

// statusLines lists the protocol status messages of a job's log that
// contain sub.
func statusLines(evs []store.JobEvent, sub string) []string {
	var out []string
	for _, e := range evs {
		if e.Type != store.JobEventProtocol {
			continue
		}
		m, err := protocol.DecodeServer(e.Data)
		if s, ok := m.(protocol.Status); err == nil && ok && strings.Contains(s.Message, sub) {
			out = append(out, s.Message)
		}
	}
	return out
}

// TestArtifactStoreOutageAtClaim: a job claimed while its artifact store
// is unreachable cannot fetch its files; it is given back with a backoff,
// its attempt not counted and its log saying why, as often as the outage
// lasts, and runs to success once the store answers again. It failed for
// good once its attempts were spent (one here), although nothing was wrong
// with it.
func TestArtifactStoreOutageAtClaim(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	ctx := t.Context()
	local := localStore(t)
	a := &outageStore{Local: local}
	a.down.Store(true)
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Report", Piece: "general", MaxAttempts: 1, Payload: payload(t, writeScenario)})
	if err != nil {
		t.Fatal(err)
	}
	metrics := queue.NewMetrics()
	startPool(t, queue.Config{Store: st, Metrics: metrics, Poll: 20 * time.Millisecond, Backoff: func(int) time.Duration { return 20 * time.Millisecond },
		Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: t.TempDir(), Artifacts: a})})
	waitJob(t, st, job.ID, "two attempts given back", func(j store.Job) bool {
		if j.State.Terminal() {
			t.Fatalf("job ended %s during the outage: %s", j.State, j.Error)
		}
		return j.MaxAttempts >= 3
	})
	a.down.Store(false)
	done := waitJob(t, st, job.ID, "success", func(j store.Job) bool { return j.State.Terminal() })
	if done.State != store.StateSucceeded || done.Result != "Reported." || done.Error != "" {
		t.Fatalf("job after the outage = %s (attempt %d/%d), error %q; want succeeded", done.State, done.Attempt, done.MaxAttempts, done.Error)
	}
	if done.MaxAttempts-done.Attempt != 0 {
		t.Errorf("job ended at attempt %d of %d: the attempts given back were counted", done.Attempt, done.MaxAttempts)
	}
	back := givenBack(t, events(t, st, job.ID))
	if len(back) < 2 {
		t.Fatalf("status events giving the job back: %+v, want at least two", back)
	}
	for _, s := range back {
		if s.State != store.StateQueued || !strings.HasPrefix(s.Error, "artifact store unreachable: ") || !strings.Contains(s.Error, "connection refused") ||
			!strings.HasPrefix(s.Reason, "retry in ") || s.RetryAt.IsZero() {
			t.Errorf("status event = %+v, want queued, retry in …, attempt not counted: artifact store unreachable: …", s)
		}
	}
	if n := metrics.Snapshot().Outcomes["requeued"]; n != int64(len(back)) {
		t.Errorf("requeued outcomes = %d, want %d", n, len(back))
	}
	if data, err := blobstore.ReadAll(ctx, local, blobstore.TaskPrefix(task.ID)+"/work/output/report.txt", 100); err != nil || string(data) != "figures\n" {
		t.Errorf("deliverable in the store = %q, %v", data, err)
	}
}

// TestArtifactStoreOutageAtFinalSync: the artifact store goes away while
// the job runs, so its final sync cannot send the deliverable. The attempt
// keeps its result and its lease and tries the sync again, its log saying
// so, until the store answers: the job succeeds in that same attempt with
// its deliverable in the store. It failed that attempt, its result lost
// (with one attempt, the job).
func TestArtifactStoreOutageAtFinalSync(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, nil)
	ctx := t.Context()
	local := localStore(t)
	a := &outageStore{Local: local, tripOn: "work/output/report.txt"}
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Report", Piece: "general", MaxAttempts: 1, Payload: payload(t, writeScenario)})
	if err != nil {
		t.Fatal(err)
	}
	startPool(t, queue.Config{Store: st, Backoff: func(int) time.Duration { return 20 * time.Millisecond },
		Runner: queue.NewEngineRunnerSyncRetry(queue.EngineRunnerConfig{DataDir: t.TempDir(), Artifacts: a}, 10*time.Millisecond)})
	waitEvents(t, st, job.ID, "two sync retries", func(evs []store.JobEvent) bool {
		return len(statusLines(evs, "retrying in")) >= 2
	})
	a.down.Store(false)
	done := waitJob(t, st, job.ID, "success", func(j store.Job) bool { return j.State.Terminal() })
	if done.State != store.StateSucceeded || done.Result != "Reported." || done.Attempt != 1 || done.MaxAttempts != 1 {
		t.Fatalf("job after the outage = %s (attempt %d/%d), error %q; want succeeded by its first attempt", done.State, done.Attempt, done.MaxAttempts, done.Error)
	}
	lines := statusLines(events(t, st, job.ID), "retrying in")
	for _, l := range lines {
		if !strings.HasPrefix(l, "artifact store unreachable: sync the job's files to ") || !strings.Contains(l, "connection refused") {
			t.Errorf("status line %q, want artifact store unreachable: sync …; retrying in …", l)
		}
	}
	if data, err := blobstore.ReadAll(ctx, local, blobstore.TaskPrefix(task.ID)+"/work/output/report.txt", 100); err != nil || string(data) != "figures\n" {
		t.Errorf("deliverable in the store = %q, %v", data, err)
	}
}
