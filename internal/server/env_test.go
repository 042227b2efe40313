package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/pgtest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/sqlite/sqlitetest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// backend opens a fresh store.
type backend struct {
	name string
	open func(t *testing.T) store.Store
}

func sqliteStore(t *testing.T) store.Store {
	t.Helper()
	return sqlitetest.Open(t, sqlite.Options{})
}

func postgresStore(t *testing.T) store.Store {
	t.Helper()
	dsn := pg.Cluster(t).NewSchema(t)
	st, err := postgres.Open(t.Context(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var backends = []backend{{"sqlite", sqliteStore}, {"postgres", postgresStore}}

// onEachBackend runs test in parallel on a fresh env of each backend.
func onEachBackend(t *testing.T, test func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, newEnv(t, b.open(t), nil))
		})
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = proctest.Buffer

// env is one API server on a fresh store.
type env struct {
	t       *testing.T
	st      store.Store
	srv     *server.Server
	ts      *httptest.Server
	dataDir string
	token   string // sent by do when set
	logs    *syncBuffer
}

// testNextRun accepts "@every-minute" style test expressions: "* * * * *"
// fires at the next minute, anything else is refused naming the field.
func testNextRun(expr string, after time.Time) (time.Time, error) {
	if expr == "* * * * *" {
		return after.Truncate(time.Minute).Add(time.Minute), nil
	}
	return time.Time{}, fmt.Errorf("expected 5 fields (minute hour day-of-month month day-of-week), found %q", expr)
}

func newEnv(t *testing.T, st store.Store, mod func(*server.Config)) *env {
	t.Helper()
	e := &env{t: t, st: st, dataDir: t.TempDir(), logs: &syncBuffer{}}
	cfg := server.Config{
		Store: st, DataDir: e.dataDir, NextRun: testNextRun,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = httptest.NewServer(srv)
	t.Cleanup(e.ts.Close)
	return e
}

// do sends a request; body is JSON-encoded unless it is a string or []byte.
func (e *env) do(method, path string, body any, hdr ...string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd, ctype = bytes.NewReader(data), "application/json"
	}
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// must sends a request, checks the status and decodes the answer into out
// (when not nil).
func (e *env) must(want int, method, path string, body any, out any) {
	e.t.Helper()
	code, data := e.do(method, path, body)
	if code != want {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, code, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// apiError is the error body.
type apiError struct {
	Error  string `json:"error"`
	Field  string `json:"field"`
	Errors []struct {
		Line    int    `json:"line"`
		Col     int    `json:"col"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// wantError sends a request, checks the status and returns the error body.
func (e *env) wantError(want int, method, path string, body any, hdr ...string) apiError {
	e.t.Helper()
	code, data := e.do(method, path, body, hdr...)
	if code != want {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, code, want, data)
	}
	var ae apiError
	if err := json.Unmarshal(data, &ae); err != nil || ae.Error == "" {
		e.t.Fatalf("%s %s: expected a JSON error body, found %s (%v)", method, path, data, err)
	}
	return ae
}

type createdTask struct {
	Task store.Task `json:"task"`
	Job  store.Job  `json:"job"`
}

func (e *env) createTask(title string, extra map[string]any) createdTask {
	e.t.Helper()
	body := map[string]any{"title": title}
	for k, v := range extra {
		body[k] = v
	}
	var out createdTask
	e.must(http.StatusCreated, "POST", "/api/v1/tasks", body, &out)
	return out
}

// paths are the API paths of the created task and of its job.
func (ct createdTask) paths() (task, job string) {
	return "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10), "/api/v1/jobs/" + strconv.FormatInt(ct.Job.ID, 10)
}

// claim takes the one queued job as a worker and starts it.
func claim(t *testing.T, st store.Store, worker string) store.Job {
	t.Helper()
	jobs, err := st.Claim(t.Context(), store.ClaimParams{Worker: worker, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v (%d jobs)", err, len(jobs))
	}
	j, err := st.Start(t.Context(), jobs[0].Lease())
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func appendEvents(t *testing.T, st store.Store, j store.Job, types ...string) []store.JobEvent {
	t.Helper()
	var evs []store.NewJobEvent
	for _, ty := range types {
		evs = append(evs, store.NewJobEvent{Type: store.JobEventKind(ty), Data: json.RawMessage(fmt.Sprintf(`{"what":%q}`, ty))})
	}
	out, err := st.AppendJobEvents(t.Context(), j.Lease(), evs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
