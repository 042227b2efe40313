package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
)

// mpart is one part of a multipart body: a form field when filename is
// empty, else a file.
type mpart struct{ name, filename, body string }

func multipartBody(t *testing.T, parts ...mpart) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := `form-data; name="` + p.name + `"`
		if p.filename != "" {
			cd += `; filename="` + p.filename + `"`
			h.Set("Content-Type", "application/octet-stream")
		} else {
			h.Set("Content-Type", "application/json")
		}
		h.Set("Content-Disposition", cd)
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(p.body))
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

// uploadsLeft lists what is in the staging area.
func uploadsLeft(t *testing.T, dataDir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dataDir, "uploads"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestCreateTaskWithFiles: a multipart POST /tasks stages the files before
// the task exists and names the staging directory in the job's payload
// (where queue's runner looks for it), keeping the client's payload.
func TestCreateTaskWithFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.MaxUpload = 1000 })
	body, ctype := multipartBody(t,
		mpart{name: "task", body: `{"title":"summarise","piece":"noop","payload":{"k":1}}`},
		mpart{name: "file", filename: "report.txt", body: "figures\n"},
		mpart{name: "file", filename: "notes.md", body: "# notes\n"},
	)
	code, data := e.do("POST", "/api/v1/tasks", body, "Content-Type", ctype)
	if code != http.StatusCreated {
		t.Fatalf("status %d: %s", code, data)
	}
	var created struct {
		Task struct{ ID int64 }
		Job  struct {
			ID      int64
			Payload json.RawMessage
		}
		Files []struct {
			Path string
			Size int64
		}
	}
	if err := json.Unmarshal(data, &created); err != nil {
		t.Fatal(err)
	}
	if len(created.Files) != 2 || created.Files[0].Path != "report.txt" || created.Files[0].Size != 8 || created.Files[1].Path != "notes.md" {
		t.Errorf("files = %+v", created.Files)
	}
	var pl map[string]any
	if err := json.Unmarshal(created.Job.Payload, &pl); err != nil {
		t.Fatal(err)
	}
	key, _ := pl[staging.PayloadField].(string)
	if pl["k"] != float64(1) || !staging.ValidKey(key) {
		t.Fatalf("job payload = %s, want k kept and a staging key", created.Job.Payload)
	}
	for name, want := range map[string]string{"report.txt": "figures\n", "notes.md": "# notes\n"} {
		if got, err := os.ReadFile(filepath.Join(staging.Dir(e.dataDir, key), name)); err != nil || string(got) != want {
			t.Errorf("staged %s = %q, %v", name, got, err)
		}
	}
	// The files a client sent are not for other local users (the staging
	// directory was 0755, its files readable by all).
	if fi, err := os.Stat(staging.Dir(e.dataDir, key)); err != nil || fi.Mode().Perm() != staging.Perm {
		t.Errorf("staging directory: %v, %v; want mode %v", fi.Mode(), err, staging.Perm)
	}

	// Without files it is a plain create: no staging key, nothing staged.
	body, ctype = multipartBody(t, mpart{name: "task", body: `{"title":"no files"}`})
	code, data = e.do("POST", "/api/v1/tasks", body, "Content-Type", ctype)
	if code != http.StatusCreated || strings.Contains(string(data), staging.PayloadField) {
		t.Fatalf("status %d: %s", code, data)
	}
	if left := uploadsLeft(t, e.dataDir); len(left) != 2 || left[0] != key || left[1] != key+".job" {
		t.Errorf("staging area holds %v, want only %s and its job file", left, key)
	}
	// The job file names the job, where the maintenance sweep looks.
	if staging.JobFile(e.dataDir, key) != staging.JobFile(e.dataDir, key) {
		t.Fatalf("the server names the job in %s, the sweep looks in %s", staging.JobFile(e.dataDir, key), staging.JobFile(e.dataDir, key))
	}
	if b, err := os.ReadFile(staging.JobFile(e.dataDir, key)); err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(created.Job.ID, 10) {
		t.Errorf("job file = %q, %v; want the job id %d", b, err, created.Job.ID)
	}
}

// TestCreateTaskWithFilesInDirectories: a file part's filename is its path
// under input/, directories included (multipart.Part.FileName kept only
// the last element: both files below were "report.txt", sent twice).
func TestCreateTaskWithFilesInDirectories(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	body, ctype := multipartBody(t,
		mpart{name: "task", body: `{"title":"compare","piece":"noop"}`},
		mpart{name: "file", filename: "2025/report.txt", body: "old\n"},
		mpart{name: "file", filename: "2026/q1/report.txt", body: "new\n"},
	)
	var created struct {
		Job   struct{ Payload map[string]any }
		Files []struct{ Path string }
	}
	code, data := e.do("POST", "/api/v1/tasks", body, "Content-Type", ctype)
	if code != http.StatusCreated {
		t.Fatalf("status %d: %s", code, data)
	}
	if err := json.Unmarshal(data, &created); err != nil {
		t.Fatal(err)
	}
	if len(created.Files) != 2 || created.Files[0].Path != "2025/report.txt" || created.Files[1].Path != "2026/q1/report.txt" {
		t.Errorf("files = %+v", created.Files)
	}
	key, _ := created.Job.Payload[staging.PayloadField].(string)
	for name, want := range map[string]string{"2025/report.txt": "old\n", "2026/q1/report.txt": "new\n"} {
		if got, err := os.ReadFile(filepath.Join(staging.Dir(e.dataDir, key), name)); err != nil || string(got) != want {
			t.Errorf("staged %s = %q, %v", name, got, err)
		}
	}
}

// readReportScenario reads the uploaded file first thing and fails the
// frame if it is not there.
const readReportScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"read-report","description":"read the upload",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Read","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Read","input":{"path":"input/report.txt"},"expectedResult":"success"}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"Read it."}}]}
]}`

// TestStagedFilesOfACancelledJob: a task created with files whose job is
// cancelled before it runs leaves nothing in the staging area once the
// maintenance sweep ran: the files are in the task's input/, where the
// retried job reads them.
func TestStagedFilesOfACancelledJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	task, _ := json.Marshal(map[string]any{"title": "read the report", "piece": "general", "payload": map[string]json.RawMessage{"replay": json.RawMessage(readReportScenario)}})
	body, ctype := multipartBody(t, mpart{name: "task", body: string(task)}, mpart{name: "file", filename: "report.txt", body: "figures\n"})
	code, data := e.do("POST", "/api/v1/tasks", body, "Content-Type", ctype)
	if code != http.StatusCreated {
		t.Fatalf("status %d: %s", code, data)
	}
	var created struct {
		Task struct{ ID int64 }
		Job  struct{ ID int64 }
	}
	if err := json.Unmarshal(data, &created); err != nil {
		t.Fatal(err)
	}
	jpath := "/api/v1/jobs/" + strconv.FormatInt(created.Job.ID, 10)
	e.must(http.StatusOK, "POST", jpath+"/cancel", nil, nil)

	got, err := queue.SweepStaging(t.Context(), e.st, e.dataDir, time.Now(), queue.DefaultStagingGrace, slog.New(slog.DiscardHandler))
	if err != nil || got != (queue.StagingSweep{Moved: 1}) {
		t.Fatalf("sweep = %+v, %v; want the cancelled job's files moved", got, err)
	}
	if left := uploadsLeft(t, e.dataDir); len(left) != 0 {
		t.Errorf("staging area holds %v after the sweep", left)
	}
	in := filepath.Join(queue.WorkDir(e.dataDir, created.Task.ID), "input", "report.txt")
	if b, err := os.ReadFile(in); err != nil || string(b) != "figures\n" {
		t.Fatalf("input/report.txt = %q, %v", b, err)
	}

	// The retried job runs with its file.
	e.must(http.StatusOK, "POST", jpath+"/retry", nil, nil)
	pool, err := queue.NewPool(queue.Config{Store: e.st, Runner: queue.NewEngineRunner(queue.EngineRunnerConfig{DataDir: e.dataDir})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	sub, err := e.st.Subscribe(ctx, store.JobTopic(created.Job.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	deadline := time.After(60 * time.Second)
	for {
		j, err := e.st.GetJob(ctx, created.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State.Terminal() {
			if j.State != store.StateSucceeded || j.Result != "Read it." {
				t.Fatalf("retried job ended %s: %q %q", j.State, j.Result, j.Error)
			}
			break
		}
		select {
		case <-sub.C():
		case <-deadline:
			t.Fatalf("retried job still %s after 60s", j.State)
		}
	}
}

func TestCreateTaskWithFilesRefused(t *testing.T) {
	t.Parallel()
	task := mpart{name: "task", body: `{"title":"t"}`}
	file := func(name, body string) mpart { return mpart{name: "file", filename: name, body: body} }
	tests := []struct {
		name   string
		parts  []mpart
		status int
		field  string
		msg    string
	}{
		{"task part missing", []mpart{file("a.txt", "a")}, 400, "task", `first part to be named "task"`},
		{"task not JSON", []mpart{{name: "task", body: "title: t"}, file("a.txt", "a")}, 400, "task", "expected a JSON object"},
		{"task part an array", []mpart{{name: "task", body: `[{"title":"t"}]`}}, 400, "task", "task: expected a JSON object, found JSON array"},
		{"unknown task field", []mpart{{name: "task", body: `{"title":"t","colour":"blue"}`}}, 400, "colour", "unknown field"},
		{"task field in another case", []mpart{{name: "task", body: `{"Title":"t"}`}}, 400, "Title", `unknown field; did you mean "title"?`},
		{"no title", []mpart{{name: "task", body: `{"body":"b"}`}, file("a.txt", "a")}, 422, "title", "required"},
		{"reserved payload field", []mpart{{name: "task", body: `{"title":"t","payload":{"input_staging":"x"}}`}}, 422, "payload.input_staging", "reserved"},
		{"unknown part", []mpart{task, {name: "notes", body: "x"}}, 400, "notes", "unknown part"},
		{"dot-dot filename", []mpart{task, file("..", "x")}, 400, "path", "without .. segments"},
		{"filename leading out", []mpart{task, file("../x.txt", "x")}, 400, "path", "without .. segments"},
		{"absolute filename", []mpart{task, file("/etc/x.txt", "x")}, 400, "path", "/etc/x.txt"},
		{"a file and a directory", []mpart{task, file("a", "a"), file("a/b.txt", "b")}, 422, "file", "cannot also be a directory"},
		{"twice the same file", []mpart{task, file("a.txt", "a"), file("a.txt", "b")}, 422, "file", `"a.txt" is sent twice`},
		{"file too large", []mpart{task, file("a.txt", "a"), file("big.bin", strings.Repeat("x", 101))}, 413, "", "big.bin: expected at most 100 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.MaxUpload = 100 })
			body, ctype := multipartBody(t, tt.parts...)
			ae := e.wantError(tt.status, "POST", "/api/v1/tasks", body, "Content-Type", ctype)
			if ae.Field != tt.field || !strings.Contains(ae.Error, tt.msg) {
				t.Errorf("error %+v, want field %q and %q", ae, tt.field, tt.msg)
			}
			if left := uploadsLeft(t, e.dataDir); len(left) != 0 {
				t.Errorf("a refused create left staged files: %v", left)
			}
			var list struct{ Tasks []any }
			e.must(http.StatusOK, "GET", "/api/v1/tasks", nil, &list)
			if len(list.Tasks) != 0 {
				t.Errorf("a refused create made a task: %+v", list.Tasks)
			}
		})
	}

	// The JSON create refuses the reserved field too.
	e := newEnv(t, sqliteStore(t), nil)
	ae := e.wantError(422, "POST", "/api/v1/tasks", map[string]any{"title": "t", "payload": map[string]any{"input_staging": "0123456789abcdef0123456789abcdef"}})
	if ae.Field != "payload.input_staging" {
		t.Errorf("JSON create with input_staging: %+v", ae)
	}
	// A server without a data directory cannot take files.
	e = newEnv(t, sqliteStore(t), func(c *server.Config) { c.DataDir = "" })
	body, ctype := multipartBody(t, task, file("a.txt", "a"))
	if ae := e.wantError(501, "POST", "/api/v1/tasks", body, "Content-Type", ctype); !strings.Contains(ae.Error, "send the task as JSON") {
		t.Errorf("no data dir: %+v", ae)
	}
}
