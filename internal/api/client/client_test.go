package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/api/client"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/sqlite/sqlitetest"
)

// env is a real `maestro serve` API on a fresh SQLite store, and a client
// of it.
type env struct {
	st      store.Store
	dataDir string
	c       *client.Client
}

func newEnv(t *testing.T, token string, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	st := sqlitetest.Open(t, sqlite.Options{})
	e := &env{st: st, dataDir: t.TempDir()}
	srv, err := server.New(server.Config{Store: st, DataDir: e.dataDir, NextRun: queue.NextRun, Token: token, RequireAuth: token != ""})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	if e.c, err = client.New(ts.URL, token); err != nil {
		t.Fatal(err)
	}
	return e
}

// finish runs the job to success as a worker would.
func (e *env) finish(t *testing.T, events ...store.NewJobEvent) store.Job {
	t.Helper()
	jobs, err := e.st.Claim(t.Context(), store.ClaimParams{Worker: "w", Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if len(events) > 0 {
		if _, err := e.st.AppendJobEvents(t.Context(), jobs[0].Lease(), events); err != nil {
			t.Fatal(err)
		}
	}
	j, err := e.st.Complete(t.Context(), jobs[0].Lease(), "done")
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// wantStatus checks that err is the server's error answer with status.
func wantStatus(t *testing.T, what string, err error, status int) *client.Error {
	t.Helper()
	ae, ok := errors.AsType[*client.Error](err)
	if !ok || ae.Status != status || ae.Body.Error == "" {
		t.Fatalf("%s: got %v, want a %d error answer with a message", what, err, status)
	}
	return ae
}

// TestTasksAndJobs drives every task and job route through the client:
// create (JSON and multipart with files), list with paging, detail,
// comment, upload, deliverables and their download, jobs, cancel, retry,
// event pages with the events' JSON kept, the audit log, and the error
// answers.
func TestTasksAndJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "", nil)
	ctx := t.Context()
	c := e.c

	h, err := c.Health(ctx, false)
	if err != nil || h.Status != api.HealthOK {
		t.Fatalf("healthz: %+v %v", h, err)
	}
	if h, err = c.Health(ctx, true); err != nil || h.Status != api.HealthReady {
		t.Fatalf("readyz: %+v %v", h, err)
	}

	first, err := c.CreateTask(ctx, api.CreateTaskRequest{Title: "first", Piece: api.NoopPiece, Priority: 3, Payload: json.RawMessage(`{"k":1}`)})
	if err != nil || first.Task.ID != 1 || first.Job.State != store.StateQueued || first.Job.Priority != 3 || string(first.Job.Payload) != `{"k":1}` {
		t.Fatalf("create: %+v %v", first, err)
	}
	dir := t.TempDir()
	for name, data := range map[string]string{"a.txt": "alpha", "b.txt": "bravo!"} {
		os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644)
	}
	second, err := c.CreateTaskWithFiles(ctx, api.CreateTaskRequest{Title: "with files"},
		[]string{filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")})
	if err != nil || second.Task.ID != 2 || !slices.Equal(second.Files, []api.FileRef{{Path: "a.txt", Size: 5}, {Path: "b.txt", Size: 6}}) {
		t.Fatalf("create with files: %+v %v", second, err)
	}
	if _, err := c.CreateTaskWithFiles(ctx, api.CreateTaskRequest{Title: "x"}, []string{filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("create with a missing file: %v", err)
	}

	page, err := c.ListTasks(ctx, "", client.Page{Limit: 1})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != 2 || page.NextBefore != 2 {
		t.Fatalf("list page 1: %+v %v", page, err)
	}
	page, err = c.ListTasks(ctx, "", client.Page{Limit: 1, Before: page.NextBefore})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != 1 {
		t.Fatalf("list page 2: %+v %v", page, err)
	}
	if page, err = c.ListTasks(ctx, "nobody", client.Page{}); err != nil || len(page.Tasks) != 0 {
		t.Fatalf("list by owner: %+v %v", page, err)
	}

	cm, err := c.Comment(ctx, 1, "use main")
	if err != nil || cm.Comment.Body != "use main" || cm.Comment.AuthorKind != store.AuthorUser || len(cm.ResumedJobs) != 0 {
		t.Fatalf("comment: %+v %v", cm, err)
	}
	d, err := c.Task(ctx, 1)
	if err != nil || d.Task.Title != "first" || len(d.Jobs) != 1 || len(d.Comments) != 1 || d.Comments[0].ID != cm.Comment.ID {
		t.Fatalf("task: %+v %v", d, err)
	}

	up, err := c.Upload(ctx, 1, "notes/n 1.txt", strings.NewReader("four"), 4)
	if err != nil || up != (api.FileRef{Path: "notes/n 1.txt", Size: 4}) {
		t.Fatalf("upload: %+v %v", up, err)
	}
	if data, err := os.ReadFile(filepath.Join(e.dataDir, "tasks", "1", "work", "input", "notes", "n 1.txt")); err != nil || string(data) != "four" {
		t.Fatalf("uploaded file: %q %v", data, err)
	}

	dl, err := c.Deliverables(ctx, 1)
	if err != nil || len(dl.Files) != 0 {
		t.Fatalf("deliverables before output: %+v %v", dl, err)
	}
	out := filepath.Join(e.dataDir, "tasks", "1", "work", "output", "sub dir")
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "r#1.md"), []byte("# result\n"), 0o644)
	if dl, err = c.Deliverables(ctx, 1); err != nil || len(dl.Files) != 1 || dl.Files[0].Path != "sub dir/r#1.md" || dl.Files[0].Size != 9 {
		t.Fatalf("deliverables: %+v %v", dl, err)
	}
	var buf bytes.Buffer
	if n, err := c.DownloadDeliverable(ctx, 1, "sub dir/r#1.md", &buf); err != nil || n != 9 || buf.String() != "# result\n" {
		t.Fatalf("download: %d %q %v", n, buf.String(), err)
	}
	_, err = c.DownloadDeliverable(ctx, 1, "nothing", &buf)
	wantStatus(t, "download of a missing file", err, http.StatusNotFound)

	jobs, err := c.ListJobs(ctx, client.JobQuery{TaskID: 1, States: []store.State{store.StateQueued, store.StateRunning}})
	if err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != first.Job.ID {
		t.Fatalf("jobs: %+v %v", jobs, err)
	}
	if jobs, err = c.ListJobs(ctx, client.JobQuery{States: []store.State{store.StateSucceeded}}); err != nil || len(jobs.Jobs) != 0 {
		t.Fatalf("jobs succeeded: %+v %v", jobs, err)
	}
	e.finish(t) // job 1
	j, err := c.Job(ctx, 1)
	if err != nil || j.State != store.StateSucceeded || j.Result != "done" {
		t.Fatalf("job: %+v %v", j, err)
	}
	_, err = c.CancelJob(ctx, 1, "too late")
	wantStatus(t, "cancel a finished job", err, http.StatusConflict)
	if j, err = c.CancelJob(ctx, 2, "not needed"); err != nil || j.State != store.StateCancelled || j.Error != "not needed" {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	if j, err = c.RetryJob(ctx, 2, 2); err != nil || j.State != store.StateQueued {
		t.Fatalf("retry: %+v %v", j, err)
	}

	// Event pages: every event once, each with its JSON as sent.
	ev, err := c.JobEvents(ctx, 1, 0, 2)
	if err != nil || len(ev.Events) != 2 || ev.NextAfter != 2 || ev.State != store.StateSucceeded {
		t.Fatalf("events page 1: %+v %v", ev, err)
	}
	rest, err := c.JobEvents(ctx, 1, ev.NextAfter, 0)
	if err != nil || rest.NextAfter != 0 || int64(len(ev.Events)+len(rest.Events)) != rest.LastSeq {
		t.Fatalf("events page 2: %+v %v", rest, err)
	}
	var types []store.JobEventKind
	for _, x := range append(ev.Events, rest.Events...) {
		var again store.JobEvent
		if err := json.Unmarshal(x.Raw, &again); err != nil || again.Seq != x.Seq || again.Type != x.Type {
			t.Fatalf("event %d: raw %s does not hold it (%v)", x.Seq, x.Raw, err)
		}
		types = append(types, x.Type)
	}
	if !slices.Contains(types, store.JobEventComment) || types[len(types)-1] != store.JobEventStatus {
		t.Fatalf("event types %v: want the comment and a final status", types)
	}

	audit, err := c.Audit(ctx, "task:1", client.Page{})
	if err != nil || len(audit.Entries) != 3 || audit.Entries[0].Action != "task.upload" || audit.Entries[2].Action != "task.create" {
		t.Fatalf("audit: %+v %v", audit, err)
	}

	_, err = c.Task(ctx, 99)
	wantStatus(t, "a missing task", err, http.StatusNotFound)
	_, err = c.CreateTask(ctx, api.CreateTaskRequest{Title: "x", Piece: "nope"})
	if ae := wantStatus(t, "an unknown piece", err, http.StatusUnprocessableEntity); ae.Body.Field != "piece" {
		t.Fatalf("field %q, want piece", ae.Body.Field)
	}
}

// TestFollowJob: FollowJob delivers every event once, in order, across a
// connection the server side drops, and returns the stream's end.
func TestFollowJob(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	cut := false
	e := newEnv(t, "", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			first := !cut && r.Header.Get("Accept") == "text/event-stream"
			cut = cut || first
			mu.Unlock()
			if !first {
				h.ServeHTTP(w, r)
				return
			}
			// The first stream ends after three events, as a dropped
			// connection would.
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			frames := strings.SplitAfter(rec.Body.String(), "\n\n")
			n := 0
			for _, f := range frames {
				if strings.HasPrefix(f, "id: ") {
					if n == 3 {
						break
					}
					n++
				}
				w.Write([]byte(f))
			}
		})
	})
	ctx := t.Context()
	created, err := e.c.CreateTask(ctx, api.CreateTaskRequest{Title: "follow"})
	if err != nil {
		t.Fatal(err)
	}
	var steps []store.NewJobEvent
	for i := range 4 {
		steps = append(steps, store.NewJobEvent{Type: "step", Data: json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`)})
	}
	done := e.finish(t, steps...)

	var seqs []int64
	var reconnects []int64
	end, err := e.c.FollowJob(ctx, created.Job.ID, 0, client.FollowOptions{
		Event:     func(ev client.Event) { seqs = append(seqs, ev.Seq) },
		Reconnect: func(_ error, after int64, _ time.Duration) { reconnects = append(reconnects, after) },
	})
	if err != nil || end.State != store.StateSucceeded || end.LastSeq != done.LastSeq {
		t.Fatalf("follow: %+v %v", end, err)
	}
	if !slices.Equal(reconnects, []int64{3}) {
		t.Fatalf("reconnections after events %v, want one after event 3", reconnects)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("events %v: want 1..%d, each once", seqs, done.LastSeq)
		}
	}
	if int64(len(seqs)) != done.LastSeq {
		t.Fatalf("events %v: want 1..%d", seqs, done.LastSeq)
	}

	// From the middle of the log; a missing job is refused at once.
	seqs = nil
	if _, err := e.c.FollowJob(ctx, created.Job.ID, done.LastSeq-1, client.FollowOptions{Event: func(ev client.Event) { seqs = append(seqs, ev.Seq) }}); err != nil || !slices.Equal(seqs, []int64{done.LastSeq}) {
		t.Fatalf("follow after %d: %v %v", done.LastSeq-1, seqs, err)
	}
	_, err = e.c.FollowJob(ctx, 99, 0, client.FollowOptions{})
	wantStatus(t, "follow a missing job", err, http.StatusNotFound)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.c.FollowJob(cctx, created.Job.ID, 0, client.FollowOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("follow with a cancelled context: %v", err)
	}
}

// TestPiecesAndSchedules drives the piece and schedule routes through the
// client, with the validator's faults in a refused piece's error.
func TestPiecesAndSchedules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "", nil)
	ctx := t.Context()
	c := e.c

	list, err := c.Pieces(ctx)
	if err != nil || !slices.ContainsFunc(list.Pieces, func(p api.PieceSummary) bool { return p.Name == "general" && p.Builtin }) {
		t.Fatalf("pieces: %+v %v", list, err)
	}
	general, err := c.Piece(ctx, "general")
	if err != nil || general.Source != api.SourceBuiltin || !strings.Contains(general.YAML, "name: general") || general.Piece == nil {
		t.Fatalf("piece general: %+v %v", general.PieceSummary, err)
	}
	// Pieces of our own: the built-in chat piece under other names.
	chat, err := c.Piece(ctx, "chat")
	if err != nil || !strings.HasPrefix(chat.YAML, "name: chat\n") {
		t.Fatalf("piece chat: %+v %v", chat.PieceSummary, err)
	}
	pieceYAML := func(name string) string { return strings.Replace(chat.YAML, "name: chat\n", "name: "+name+"\n", 1) }
	v, err := c.ValidatePiece(ctx, pieceYAML("whatever"))
	if err != nil || !v.Valid || v.Piece.Name != "whatever" {
		t.Fatalf("validate: %+v %v", v, err)
	}
	_, err = c.ValidatePiece(ctx, strings.Replace(pieceYAML("bad"), "max_movements: 3\n", "max_movements: -1\n", 1))
	if ae := wantStatus(t, "validate an invalid piece", err, http.StatusUnprocessableEntity); len(ae.Body.Errors) != 1 ||
		ae.Body.Errors[0].Field != "max_movements" || !strings.Contains(ae.Error(), "\n  9:16: max_movements: ") {
		t.Fatalf("validator faults: %+v\n%s", ae.Body, ae)
	}
	d, err := c.CreatePiece(ctx, pieceYAML("mine"))
	if err != nil || d.Source != api.SourceStore || d.Version != 1 || !d.Deletable {
		t.Fatalf("create piece: %+v %v", d.PieceSummary, err)
	}
	updated := strings.Replace(pieceYAML("mine"), "max_movements: 3\n", "max_movements: 2\n", 1)
	_, err = c.PutPiece(ctx, "mine", updated, 7)
	wantStatus(t, "put at a stale version", err, http.StatusConflict)
	if d, err = c.PutPiece(ctx, "mine", updated, 1); err != nil || d.Version != 2 || d.YAML != updated {
		t.Fatalf("put piece: %+v %v", d.PieceSummary, err)
	}
	del, err := c.DeletePiece(ctx, "mine", 2)
	if err != nil || del != (api.PieceDeleted{Deleted: "mine"}) {
		t.Fatalf("delete piece: %+v %v", del, err)
	}
	_, err = c.Piece(ctx, "mine")
	wantStatus(t, "a deleted piece", err, http.StatusNotFound)

	off := false
	sc, err := c.CreateSchedule(ctx, api.ScheduleRequest{Name: "nightly", CronExpr: "0 3 * * *", Title: "report", Piece: "general"})
	if err != nil || sc.ID == 0 || !sc.Enabled || sc.NextRunAt.IsZero() {
		t.Fatalf("create schedule: %+v %v", sc, err)
	}
	if sc, err = c.PutSchedule(ctx, sc.ID, api.ScheduleRequest{Name: "nightly", CronExpr: "0 4 * * *", Title: "report 2", Enabled: &off}); err != nil || sc.Enabled || sc.Title != "report 2" {
		t.Fatalf("put schedule: %+v %v", sc, err)
	}
	if got, err := c.Schedule(ctx, sc.ID); err != nil || got.CronExpr != "0 4 * * *" {
		t.Fatalf("schedule: %+v %v", got, err)
	}
	if all, err := c.Schedules(ctx); err != nil || len(all.Schedules) != 1 {
		t.Fatalf("schedules: %+v %v", all, err)
	}
	_, err = c.CreateSchedule(ctx, api.ScheduleRequest{Name: "x", CronExpr: "61 * * * *", Title: "t"})
	if ae := wantStatus(t, "a bad cron expression", err, http.StatusUnprocessableEntity); ae.Body.Field != "cron_expr" {
		t.Fatalf("field %q, want cron_expr", ae.Body.Field)
	}
	if err := c.DeleteSchedule(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Schedule(ctx, sc.ID)
	wantStatus(t, "a deleted schedule", err, http.StatusNotFound)
}

// TestAuthAndURL: a server with a token refuses a client without it (401,
// the hint in the message) and answers one with it; New refuses a URL that
// is not http(s).
func TestAuthAndURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "tok-1", nil)
	if _, err := e.c.ListTasks(t.Context(), "", client.Page{}); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	// A token read with its line end ($(cat) keeps none, a Kubernetes
	// secret or an EnvironmentFile may): sent without it. It failed with
	// 'net/http: invalid header field value for "Authorization"'.
	nl, err := client.New(e.c.Base(), "tok-1\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nl.ListTasks(t.Context(), "", client.Page{}); err != nil {
		t.Fatalf("with the token and its line end: %v", err)
	}
	anon, err := client.New(e.c.Base(), "")
	if err != nil {
		t.Fatal(err)
	}
	anon.AuthHint = "pass --token"
	_, err = anon.ListTasks(t.Context(), "", client.Page{})
	if ae := wantStatus(t, "without the token", err, http.StatusUnauthorized); !strings.HasSuffix(ae.Error(), "(pass --token)") {
		t.Fatalf("401 message: %s", ae)
	}
	for _, bad := range []string{"ftp://x", "localhost:7878", ""} {
		if _, err := client.New(bad, ""); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

// TestNotTheAPI: an answer that is not the API's (another server at the
// address: a plain-text 404, an HTML page, plain HTTP to https://) says
// so and names the address;
// "server answered 404: Not Found" read as "no such task". A JSON error of
// the API gets no such note.
func TestNotTheAPI(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/tasks" {
			w.Write([]byte("<html>a static site</html>"))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	note := "the answer is not the Maestro API's: is " + ts.URL + " the address of maestro serve?"
	if _, err = c.Task(t.Context(), 1); err == nil || err.Error() != "server answered 404: Not Found ("+note+")" {
		t.Errorf("404 of another server: %v", err)
	}
	if _, err := c.ListTasks(t.Context(), "", client.Page{}); err == nil || !strings.HasSuffix(err.Error(), "("+note+")") {
		t.Errorf("an HTML page: %v", err)
	}
	// https:// to a plain-HTTP server: "is maestro serve running there?"
	// when it was, on http://.
	tlsToPlain, err := client.New(strings.Replace(ts.URL, "http://", "https://", 1), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsToPlain.Task(t.Context(), 1); err == nil || !strings.HasSuffix(err.Error(), "(the server answers plain HTTP: give its address as "+ts.URL+")") {
		t.Errorf("https:// to plain HTTP: %v", err)
	}
	e := newEnv(t, "", nil)
	_, err = e.c.Task(t.Context(), 99)
	if ae := wantStatus(t, "the API's 404", err, http.StatusNotFound); strings.Contains(ae.Error(), "not the Maestro API") {
		t.Errorf("the API's own 404: %s", ae)
	}
	// The API's address given for the server's: every route a 404
	// "no route GET /api/v1/api/v1/tasks".
	withPrefix, err := client.New(e.c.Base()+"/api/v1/", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = withPrefix.ListTasks(t.Context(), "", client.Page{})
	if ae := wantStatus(t, "under /api/v1", err, http.StatusNotFound); !strings.HasSuffix(ae.Error(), "(the address is the server's, without /api/v1: "+e.c.Base()+")") {
		t.Errorf("an address ending in /api/v1: %s", ae)
	}
}
