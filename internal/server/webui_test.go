package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/webui"
)

const testIndex = `<!doctype html><title>Maestro</title><script type="module" src="/assets/app-1.js"></script>`

// TestWebUIMount: with a token, the app's files and client routes load
// without it (the sign-in page must), while the API, the metrics and the
// event streams keep their auth; the Host check and the cross-origin
// refusal cover the app too; unknown API routes still answer JSON 404,
// and only GET and HEAD reach the app. Without Config.UI, / is 404 as
// before.
func TestWebUIMount(t *testing.T) {
	t.Parallel()
	ui, err := webui.New(fstest.MapFS{"index.html": {Data: []byte(testIndex)}, "assets/app-1.js": {Data: []byte("1")}})
	if err != nil {
		t.Fatal(err)
	}
	const token = "s3cret-token"
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.UI = ui; c.Token = token; c.RequireAuth = true })
	tests := []struct {
		name, method, path string
		hdr                []string
		status             int
		want               string // in the body
	}{
		{"root without token", "GET", "/", nil, 200, testIndex},
		{"client route without token", "GET", "/tasks/12", nil, 200, testIndex},
		{"sign-in without token", "GET", "/signin", nil, 200, testIndex},
		{"asset without token", "GET", "/assets/app-1.js", nil, 200, "1"},
		{"head without token", "HEAD", "/schedules", nil, 200, ""},
		{"missing asset", "GET", "/assets/app-0.js", nil, 404, "reload the page"},
		{"API needs the token", "GET", "/api/v1/tasks", nil, 401, httpedge.MsgUnauthorizedREST},
		{"server info needs the token", "GET", "/api/v1/server", nil, 401, httpedge.MsgUnauthorizedREST},
		{"metrics need the token", "GET", "/metrics", nil, 401, httpedge.MsgUnauthorizedREST},
		{"unknown API route with token", "GET", "/api/v2/x", []string{"Authorization", "Bearer " + token}, 404, `"error":"no route GET /api/v2/x`},
		{"unknown API route without token", "GET", "/api/v2/x", nil, 401, httpedge.MsgUnauthorizedREST},
		{"POST to the app needs the token", "POST", "/tasks", nil, 401, httpedge.MsgUnauthorizedREST},
		{"POST to the app", "POST", "/tasks", []string{"Authorization", "Bearer " + token}, 405, "GET and HEAD"},
		{"rebound host", "GET", "/", []string{"Host", "attacker.example"}, 403, "is not a name of this server"},
		{"cross-site script load", "GET", "/assets/app-1.js", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}, 403, "cross-origin"},
		{"navigation from elsewhere", "GET", "/tasks", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}, 200, testIndex},
		{"healthz", "GET", "/healthz", nil, 200, `"ok"`},
		{"PUT to a probe", "PUT", "/healthz", nil, 405, `"error":"method PUT not allowed: /healthz answers GET and HEAD"`},
		{"POST to readyz", "POST", "/readyz", nil, 405, `/readyz answers GET and HEAD`},
		{"DELETE of the metrics", "DELETE", "/metrics", []string{"Authorization", "Bearer " + token}, 405, `/metrics answers GET and HEAD`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := e.do(tt.method, tt.path, nil, tt.hdr...)
			if code != tt.status || !strings.Contains(string(body), tt.want) {
				t.Fatalf("%s %s: %d %q, want %d with %q", tt.method, tt.path, code, body, tt.status, tt.want)
			}
		})
	}
	if slices.ContainsFunc(e.srv.Routes(), func(r string) bool { return strings.HasSuffix(r, " /") }) {
		t.Errorf("the app is listed among the API routes: %v", e.srv.Routes())
	}
	bare := newEnv(t, sqliteStore(t), nil)
	if code, _ := bare.do("GET", "/", nil); code != http.StatusNotFound {
		t.Errorf("GET / without a UI: %d, want 404", code)
	}
}

// TestServerInfo: GET /api/v1/server says what the process was told
// (version, store, start, default executor, its worker pool with its
// host), counts the jobs of every state, and lists the lease holders of
// running jobs with their jobs and last heartbeat; nothing else is
// invented (no host for a foreign worker).
func TestServerInfo(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	st := sqliteStore(t)
	e := newEnv(t, st, func(c *server.Config) {
		c.Info = server.Info{Version: "1.2.3 (abc)", Store: api.StoreSQLite, StartedAt: started, ExecutorDefault: "replay", Worker: "serve-1", Host: "box"}
	})
	e.createTask("one", nil)
	e.createTask("two", nil)
	e.createTask("three", nil)
	running := claim(t, st, "other-host:42")
	var info api.ServerInfo
	e.must(http.StatusOK, "GET", "/api/v1/server", nil, &info)
	if info.Version != "1.2.3 (abc)" || info.Store != "sqlite" || !info.StartedAt.Equal(started) || info.ExecutorDefault != "replay" {
		t.Errorf("info: %+v", info)
	}
	if len(info.Queue) != len(store.States()) || info.Queue[store.StateQueued] != 2 || info.Queue[store.StateRunning] != 1 || info.Queue[store.StateSucceeded] != 0 {
		t.Errorf("queue: %v", info.Queue)
	}
	want := []api.ServerWorker{
		{ID: "other-host:42", RunningJobs: []int64{running.ID}, LastSeen: running.HeartbeatAt},
		{ID: "serve-1", Host: "box", RunningJobs: []int64{}},
	}
	if running.HeartbeatAt.IsZero() {
		want[0].LastSeen = running.AttemptedAt
	}
	if len(info.Workers) != 2 || info.Workers[0].ID != want[0].ID || !slices.Equal(info.Workers[0].RunningJobs, want[0].RunningJobs) ||
		info.Workers[0].Host != "" || !info.Workers[0].LastSeen.Equal(want[0].LastSeen) || info.Workers[0].LastSeen.IsZero() ||
		info.Workers[1].ID != "serve-1" || info.Workers[1].Host != "box" || len(info.Workers[1].RunningJobs) != 0 {
		t.Errorf("workers: %+v, want %+v", info.Workers, want)
	}

	// A process that knows nothing says nothing: no store, start or
	// executor, no workers.
	bare := newEnv(t, sqliteStore(t), nil)
	_, raw := bare.do("GET", "/api/v1/server", nil)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"store", "started_at", "executor_default"} {
		if _, ok := fields[k]; ok {
			t.Errorf("%s answered though unknown: %s", k, raw)
		}
	}
	if string(fields["workers"]) != "[]" {
		t.Errorf("workers: %s", fields["workers"])
	}
}

// cutStreamsEnv serves a store whose event streams the test hook cuts
// after 3 events, with one task whose job has 7 events (plus its own).
func cutStreamsEnv(t *testing.T) (store.Store, *env, createdTask) {
	t.Helper()
	st := sqliteStore(t)
	e := newEnv(t, st, func(c *server.Config) { c.DropStreamsAfter = 3 })
	ct := e.createTask("streamed", nil)
	appendEvents(t, st, claim(t, st, "w"), "a", "b", "c", "d", "e", "f", "g")
	return st, e, ct
}

// TestDropStreamsAfter: the test hook cuts every event stream after the
// given number of events, without the end event, and a client resuming
// with Last-Event-ID gets the rest exactly once.
func TestDropStreamsAfter(t *testing.T) {
	t.Parallel()
	st, e, ct := cutStreamsEnv(t)
	last, err := st.GetJob(t.Context(), ct.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	lastID := ""
	for range 10 {
		s := e.openStream(ct.Job.ID, lastID, "")
		n := 0
		for {
			f, ok := s.next()
			if !ok {
				break
			}
			if f.Event == "" {
				continue
			}
			seqs = append(seqs, eventSeq(t, f))
			lastID = f.ID
			if n++; seqs[len(seqs)-1] == last.LastSeq {
				break // the job runs on: its stream stays open
			}
		}
		if seqs[len(seqs)-1] == last.LastSeq {
			break
		}
		if n != 3 {
			t.Fatalf("a stream sent %d events before it was cut, want 3", n)
		}
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("sequence numbers across the cuts: %v, want 1…%d once each", seqs, last.LastSeq)
		}
	}
	if int64(len(seqs)) != last.LastSeq {
		t.Fatalf("got %d events, the job has %d", len(seqs), last.LastSeq)
	}
}

// TestDropStreamsAfterLostEvents: a client back at the cursor an aborted
// stream began from (it lost the events of that stream, as a busy browser
// does when the abort arrives with them) gets the next stream cut by a
// clean end, which loses nothing, so it always moves on; a stream from a
// new cursor is aborted again.
func TestDropStreamsAfterLostEvents(t *testing.T) {
	t.Parallel()
	_, e, ct := cutStreamsEnv(t)
	for i, c := range []struct {
		lastID string
		want   []int64
		end    error
	}{
		{"", []int64{1, 2, 3}, io.ErrUnexpectedEOF},  // aborted
		{"", []int64{1, 2, 3}, io.EOF},               // the same cursor again: a clean end
		{"3", []int64{4, 5, 6}, io.ErrUnexpectedEOF}, // a new cursor: aborted
		{"3", []int64{4, 5, 6}, io.EOF},
		{"3", []int64{4, 5, 6}, io.ErrUnexpectedEOF}, // the clean end is used once
	} {
		s := e.openStream(ct.Job.ID, c.lastID, "")
		var seqs []int64
		for {
			f, ok := s.next()
			if !ok {
				break
			}
			if f.Event != "" {
				seqs = append(seqs, eventSeq(t, f))
			}
		}
		if !slices.Equal(seqs, c.want) {
			t.Fatalf("stream %d (Last-Event-ID %q): events %v, want %v", i, c.lastID, seqs, c.want)
		}
		if _, err := s.r.ReadString('\n'); err != c.end {
			t.Errorf("stream %d (Last-Event-ID %q) ended with %v, want %v", i, c.lastID, err, c.end)
		}
	}
}

// TestServerInfoListsIdleWorkerProcesses: the maestro worker processes the
// store records (PostgreSQL's "Process names"; recorded here on SQLite)
// are listed, an idle one with its host and heartbeat; one whose slot
// holds a job is listed by that slot only; a serve, and a worker that
// stopped, are not. A team's page said "No workers seen" while its
// workers waited for jobs.
func TestServerInfoListsIdleWorkerProcesses(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := newEnv(t, st, nil)
	ctx := t.Context()
	for _, p := range []store.Process{
		{Name: "workerB", Kind: store.ProcessWorker, Instance: "b", Address: "b-box (pid 7)", Host: "b-box", PID: 7},
		{Name: "workerC", Kind: store.ProcessWorker, Instance: "c", Address: "c-box (pid 8)", Host: "c-box", PID: 8},
		{Name: "workerD", Kind: store.ProcessWorker, Instance: "d", Address: "d-box (pid 9)", Host: "d-box", PID: 9},
		{Name: "serveA", Kind: store.ProcessServe, Instance: "a", Address: "http://a:7878", Host: "a-box", PID: 6},
	} {
		if _, err := st.StartProcess(ctx, p, time.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.StopProcess(ctx, "workerD", "d"); err != nil {
		t.Fatal(err)
	}
	e.createTask("one", nil)
	running := claim(t, st, "workerC/1")
	var info api.ServerInfo
	e.must(http.StatusOK, "GET", "/api/v1/server", nil, &info)
	var got []string
	for _, w := range info.Workers {
		got = append(got, fmt.Sprintf("%s host=%q jobs=%v seen=%t", w.ID, w.Host, w.RunningJobs, !w.LastSeen.IsZero()))
	}
	want := []string{`workerB host="b-box" jobs=[] seen=true`, fmt.Sprintf(`workerC/1 host="" jobs=[%d] seen=true`, running.ID)}
	if !slices.Equal(got, want) {
		t.Errorf("workers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
