package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/store"
)

// published subscribes to every event sent to srv, re-sent ones too
// (which JetStream drops as duplicates: the stream does not tell them):
// next returns the next one's id and type.
func published(t *testing.T, srv *bustest.Server) (next func() (id, typ string)) {
	t.Helper()
	nc, err := nats.Connect(srv.URL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ch := make(chan *nats.Msg, 1024)
	if _, err := nc.ChanSubscribe("maestro.>", ch); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() (string, string) {
		t.Helper()
		select {
		case m := <-ch:
			var e struct{ ID, Type string }
			if err := json.Unmarshal(m.Data, &e); err != nil {
				t.Fatalf("published %q: %v", m.Data, err)
			}
			return e.ID, e.Type
		case <-time.After(30 * time.Second):
			t.Fatal("nothing published within 30 s")
			return "", ""
		}
	}
}

// finishedJobs queues two jobs and runs them to their end: 5 events
// (queued, started, a tool call attempted and completed, succeeded; then
// queued, cancelled: 7 in all).
func finishedJobs(t *testing.T, st store.Store) {
	t.Helper()
	l := runningJob(t, st,
		`{"type":"tool_call","call_id":"c1","tool":"Bash","args":{},"requires_approval":false}`,
		`{"type":"tool_end","call_id":"c1","success":true}`)
	if _, err := st.Complete(t.Context(), l, "done"); err != nil {
		t.Fatal(err)
	}
	_, j, err := st.CreateTask(t.Context(), store.NewTask{Owner: "bob", Title: "u", Piece: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(t.Context(), j.ID, "not needed"); err != nil {
		t.Fatal(err)
	}
}

// follow runs b's job follower on st until the returned stop is called
// (which waits for it to return).
func follow(t *testing.T, b *eventbus.Bus, st eventbus.JobSource, legacyFile string) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); b.FollowJobs(ctx, st, legacyFile, time.Hour) }()
	return func() { cancel(); <-done }
}

// A second process on the store (a new worker machine, a container whose
// data directory is not kept: no cursor file) publishes nothing the
// first one published and JetStream acknowledged: the cursor is the
// store's. Before, it published every job's events from the first, and
// JetStream stored again those older than its duplicate window.
func TestJobCursorIsTheStores(t *testing.T) {
	srv, b1, st := jobBus(t, eventbus.Correlation{})
	finishedJobs(t, st)
	first := advanced{Store: st, done2: make(chan struct{})}
	stop := follow(t, b1, first, filepath.Join(t.TempDir(), "eventbus-jobs.json"))
	srv.Wait(7)
	select {
	case <-first.done2: // all acknowledged and recorded
	case <-time.After(30 * time.Second):
		t.Fatal("the first process did not advance job 2's cursor within 30 s")
	}
	stop()

	next := published(t, srv)
	b2 := newBus(t, srv, eventbus.Correlation{}, true)
	defer follow(t, b2, st, filepath.Join(t.TempDir(), "eventbus-jobs.json"))()
	// A job queued now is the second process's first event: nothing
	// before it.
	_, j, err := st.CreateTask(t.Context(), store.NewTask{Owner: "carol", Title: "v", Piece: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if id, typ := next(); typ != eventbus.TypeJobQueued || id != jobEventID(t, st, j.ID, 1) {
		t.Fatalf("the second process published %s %s first, want job %d's queued: it published again what the first one had", typ, id, j.ID)
	}
	if n := len(srv.Messages()); n != 8 {
		t.Errorf("%d events stored, want 8", n)
	}
}

// jobEventID is the id of the first event of job id's log entry seq.
func jobEventID(t *testing.T, st store.Store, id, seq int64) string {
	t.Helper()
	j, err := st.GetJob(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return "job-" + itoa(id) + "-" + itoa(j.CreatedAt.UnixMicro()) + "." + itoa(seq) + ".0"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// crashAtAdvance is a store whose process dies once its events are
// acknowledged, before their cursor is recorded: the advance cancels
// the follower.
type crashAtAdvance struct {
	store.Store
	crash context.CancelFunc
}

func (c crashAtAdvance) AdvanceJobEventCursor(ctx context.Context, jobID, seq int64) error {
	c.crash()
	return errors.New("crashed")
}

// A process that stops between JetStream's acknowledgement and the
// store's cursor (killed, the store unreachable) has its events
// published again by the next one, with the same ids: JetStream keeps
// one of each (within its duplicate window), and none is lost.
func TestJobEventsBeforeTheCursorArePublishedAgain(t *testing.T) {
	srv, b1, st := jobBus(t, eventbus.Correlation{})
	finishedJobs(t, st)
	next := published(t, srv)
	ctx, crash := context.WithCancel(t.Context())
	b1.FollowJobs(ctx, crashAtAdvance{Store: st, crash: crash}, "", time.Hour)
	first, _ := next() // job 1's queued, acknowledged
	if seq, err := st.JobEventCursor(t.Context(), 1); err != nil || seq != 0 {
		t.Fatalf("cursor of job 1 after the crash = %d, %v; want 0", seq, err)
	}
	for range 4 { // the rest of job 1's page
		next()
	}

	b2 := newBus(t, srv, eventbus.Correlation{}, true)
	second := advanced{Store: st, done2: make(chan struct{})}
	defer follow(t, b2, second, "")()
	var again []string
	for range 7 {
		id, _ := next()
		again = append(again, id)
	}
	select {
	case <-second.done2: // all acknowledged
	case <-time.After(30 * time.Second):
		t.Fatal("the next process did not advance job 2's cursor within 30 s")
	}
	if again[0] != first {
		t.Errorf("the next process began with %s, want %s again", again[0], first)
	}
	msgs := srv.Messages()
	var stored []string
	for _, m := range msgs {
		stored = append(stored, m.Event.ID())
	}
	if !slices.Equal(stored, again) {
		t.Errorf("stored:\n%q\nwant each once, as published again:\n%q", stored, again)
	}
	if seq, err := st.JobEventCursor(t.Context(), 2); err != nil || seq == 0 {
		t.Errorf("cursor of job 2 = %d, %v; want advanced", seq, err)
	}
}

// A process upgraded with its data directory moves its own cursors
// (<data dir>/eventbus-jobs.json, before the store kept them) to the
// store, and removes the file: neither it nor any other process
// publishes again what it published.
func TestJobCursorFileMovesToTheStore(t *testing.T) {
	srv, b, st := jobBus(t, eventbus.Correlation{})
	finishedJobs(t, st)
	j1, err := st.GetJob(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	// Job 1 was published; job 2 was not.
	file := filepath.Join(t.TempDir(), "eventbus-jobs.json")
	if err := os.WriteFile(file, []byte(`{"jobs":{"1":`+itoa(j1.LastSeq)+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	next := published(t, srv)
	defer follow(t, b, st, file)()
	var got []string
	for range 2 {
		_, typ := next()
		got = append(got, typ)
	}
	if want := []string{eventbus.TypeJobQueued, eventbus.TypeJobCancelled}; !slices.Equal(got, want) {
		t.Errorf("published %q, want job 2's %q only", got, want)
	}
	if seq, err := st.JobEventCursor(t.Context(), 1); err != nil || seq != j1.LastSeq {
		t.Errorf("store's cursor of job 1 = %d, %v; want %d, the file's", seq, err, j1.LastSeq)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cursor file is still there (%v)", err)
	}
}

// lateFollower is a store whose first listing waits for go_: a process
// that reads the jobs after another one published them.
type lateFollower struct {
	store.Store
	listed atomic.Bool
	go_    chan struct{}
}

func (l *lateFollower) ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	if !l.listed.Swap(true) {
		<-l.go_
	}
	return l.Store.ListJobs(ctx, f)
}

// advanced is a store that closes done2 once job 2's cursor is advanced.
type advanced struct {
	store.Store
	done2 chan struct{}
}

func (a advanced) AdvanceJobEventCursor(ctx context.Context, jobID, seq int64) error {
	err := a.Store.AdvanceJobEventCursor(ctx, jobID, seq)
	if jobID == 2 {
		select {
		case <-a.done2:
		default:
			close(a.done2)
		}
	}
	return err
}

// Two processes following one store at once: the one that reads a job
// after the other published its events (and recorded the cursor) does
// not publish them again, though it started before (its cursors read at
// start said nothing was published).
func TestJobFollowerReadsTheStoresCursorBeforePublishing(t *testing.T) {
	srv, b1, st := jobBus(t, eventbus.Correlation{})
	finishedJobs(t, st)
	late := &lateFollower{Store: st, go_: make(chan struct{})}
	b2 := newBus(t, srv, eventbus.Correlation{}, true)
	defer follow(t, b2, late, "")()
	next := published(t, srv)
	first := advanced{Store: st, done2: make(chan struct{})}
	stop := follow(t, b1, first, "")
	for range 7 {
		next()
	}
	select {
	case <-first.done2:
	case <-time.After(30 * time.Second):
		t.Fatal("the first process did not advance job 2's cursor within 30 s")
	}
	stop() // the job queued below is the second process's to publish
	close(late.go_)
	_, j, err := st.CreateTask(t.Context(), store.NewTask{Owner: "carol", Title: "v", Piece: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	if id, typ := next(); typ != eventbus.TypeJobQueued || id != jobEventID(t, st, j.ID, 1) {
		t.Fatalf("published %s %s after the first process's 7, want job %d's queued: the second process published again what the first one had", typ, id, j.ID)
	}
}

// A data directory used with another store (--db switched from SQLite
// to PostgreSQL, or to a fresh database) keeps that store's cursor
// file, whose job ids name other jobs here: it is removed, not moved
// in, and every job of this store is published. Before, its cursors
// were moved in, and the events they covered were never published.
func TestJobCursorFileOfAnotherStoreIsNotMoved(t *testing.T) {
	for name, c := range map[string]struct {
		file string
		// published: the store has cursors already (a process of this
		// version published from it).
		published bool
	}{
		"a job not in the store":       {file: `{"jobs":{"1":5,"3":4}}`},
		"more events than the store's": {file: `{"jobs":{"2":9}}`},
		"a store with cursors":         {file: `{"jobs":{"1":5}}`, published: true},
	} {
		t.Run(name, func(t *testing.T) {
			srv, b, st := jobBus(t, eventbus.Correlation{})
			finishedJobs(t, st)
			if c.published {
				if err := st.AdvanceJobEventCursor(t.Context(), 2, 1); err != nil {
					t.Fatal(err)
				}
			}
			file := filepath.Join(t.TempDir(), "eventbus-jobs.json")
			if err := os.WriteFile(file, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			want := 7
			if c.published {
				want = 6 // job 2's queued was
			}
			done := advanced{Store: st, done2: make(chan struct{})}
			defer follow(t, b, done, file)()
			select {
			case <-done.done2: // job 1's cursor is advanced before job 2's
			case <-time.After(30 * time.Second):
				t.Fatal("job 2's cursor was not advanced within 30 s")
			}
			if n := len(srv.Messages()); n != want { // all acknowledged
				t.Errorf("%d events stored, want %d", n, want)
			}
			j1, err := st.GetJob(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if seq, err := st.JobEventCursor(t.Context(), 1); err != nil || seq != j1.LastSeq {
				t.Errorf("store's cursor of job 1 = %d, %v; want %d, its events published", seq, err, j1.LastSeq)
			}
			if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the cursor file is still there (%v)", err)
			}
		})
	}
}
