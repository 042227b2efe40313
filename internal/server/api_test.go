package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/secrets/secretstest"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
)

func TestTasks(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b.open(t), nil)
			a := e.createTask("first", map[string]any{"body": "do it", "piece": "code", "priority": 5, "max_attempts": 2, "payload": map[string]any{"k": 1}})
			if a.Task.Title != "first" || a.Task.Piece != "code" || a.Task.Owner != "local" || a.Job.State != store.StateQueued ||
				a.Job.Priority != 5 || a.Job.MaxAttempts != 2 || string(a.Job.Payload) != `{"k":1}` {
				t.Fatalf("created %+v", a)
			}
			bt := e.createTask("second", nil)
			ct := e.createTask("third", map[string]any{"piece": server.NoopPiece})

			var list struct {
				Tasks      []store.Task `json:"tasks"`
				NextBefore int64        `json:"next_before"`
			}
			e.must(http.StatusOK, "GET", "/api/v1/tasks?limit=2", nil, &list)
			if len(list.Tasks) != 2 || list.Tasks[0].ID != ct.Task.ID || list.Tasks[1].ID != bt.Task.ID || list.NextBefore != bt.Task.ID {
				t.Fatalf("page 1: %+v", list)
			}
			next := "/api/v1/tasks?limit=2&before=" + strconv.FormatInt(list.NextBefore, 10)
			list.NextBefore = 0
			e.must(http.StatusOK, "GET", next, nil, &list)
			if len(list.Tasks) != 1 || list.Tasks[0].ID != a.Task.ID || list.NextBefore != 0 {
				t.Fatalf("page 2: %+v", list)
			}
			e.must(http.StatusOK, "GET", "/api/v1/tasks?owner=nobody", nil, &list)
			if len(list.Tasks) != 0 {
				t.Fatalf("owner filter: %+v", list)
			}

			// A job that asks waits; a comment answers and resumes it.
			j := claim(t, e.st, "w1")
			if j.ID != a.Job.ID {
				t.Fatalf("claimed job %d, want the highest priority %d", j.ID, a.Job.ID)
			}
			if _, err := e.st.Wait(t.Context(), j.Lease(), store.WaitParams{State: store.StateWaitingHuman, Reason: "ask", Question: "which branch?"}); err != nil {
				t.Fatal(err)
			}
			var com struct {
				Comment     store.Comment `json:"comment"`
				ResumedJobs []store.Job   `json:"resumed_jobs"`
			}
			path := "/api/v1/tasks/" + strconv.FormatInt(a.Task.ID, 10)
			e.must(http.StatusCreated, "POST", path+"/comments", map[string]string{"body": "main"}, &com)
			if com.Comment.Body != "main" || com.Comment.AuthorKind != store.AuthorUser || len(com.ResumedJobs) != 1 ||
				com.ResumedJobs[0].ID != j.ID || com.ResumedJobs[0].State != store.StateQueued {
				t.Fatalf("comment: %+v", com)
			}
			var detail struct {
				Task     store.Task      `json:"task"`
				Jobs     []store.Job     `json:"jobs"`
				Comments []store.Comment `json:"comments"`
			}
			e.must(http.StatusOK, "GET", path, nil, &detail)
			if detail.Task.ID != a.Task.ID || len(detail.Jobs) != 1 || len(detail.Comments) != 2 ||
				detail.Comments[0].Body != "which branch?" || detail.Comments[0].AuthorKind != store.AuthorAgent || detail.Comments[1].Body != "main" {
				t.Fatalf("detail: %+v", detail)
			}
			// The comment is in the job's log for SSE followers.
			evs, err := e.st.ReadJobEvents(t.Context(), j.ID, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if last := evs[len(evs)-1]; last.Type != store.JobEventComment || !strings.Contains(string(last.Data), `"main"`) {
				t.Fatalf("last event %s %s, want the comment", last.Type, last.Data)
			}
			// A second comment resumes nothing.
			e.must(http.StatusCreated, "POST", path+"/comments", map[string]string{"body": "thanks"}, &com)
			if len(com.ResumedJobs) != 0 {
				t.Fatalf("second comment resumed %+v", com.ResumedJobs)
			}

			// Jobs.
			var jobs struct {
				Jobs []store.Job `json:"jobs"`
			}
			e.must(http.StatusOK, "GET", "/api/v1/jobs?state=queued", nil, &jobs)
			if len(jobs.Jobs) != 3 {
				t.Fatalf("queued jobs: %+v", jobs)
			}
			e.must(http.StatusOK, "GET", "/api/v1/jobs?task_id="+strconv.FormatInt(bt.Task.ID, 10), nil, &jobs)
			if len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != bt.Job.ID {
				t.Fatalf("jobs of task: %+v", jobs)
			}
			var one struct {
				Job store.Job `json:"job"`
			}
			jpath := "/api/v1/jobs/" + strconv.FormatInt(bt.Job.ID, 10)
			e.must(http.StatusOK, "GET", jpath, nil, &one)
			if one.Job.ID != bt.Job.ID {
				t.Fatalf("job: %+v", one)
			}
			e.must(http.StatusOK, "POST", jpath+"/cancel", map[string]string{"reason": "not needed"}, &one)
			if one.Job.State != store.StateCancelled || one.Job.Error != "not needed" {
				t.Fatalf("cancelled: %+v", one.Job)
			}
			if ae := e.wantError(http.StatusConflict, "POST", jpath+"/cancel", nil); ae.Error != "job "+strconv.FormatInt(bt.Job.ID, 10)+" has already finished (cancelled); there is nothing to cancel" {
				t.Fatalf("cancel twice: %q", ae.Error)
			}
			e.must(http.StatusOK, "POST", jpath+"/retry", map[string]int{"extra": 2}, &one)
			if one.Job.State != store.StateQueued {
				t.Fatalf("retried: %+v", one.Job)
			}
			// The state is said as a user reads it, not the store's
			// "invalid state transition".
			if ae := e.wantError(http.StatusConflict, "POST", jpath+"/retry", nil); ae.Error != "job "+strconv.FormatInt(bt.Job.ID, 10)+" has not finished (queued); only a failed, aborted or cancelled job can be retried" {
				t.Fatalf("retry a queued job: %q", ae.Error)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	ct := e.createTask("t", nil)
	task := "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10)
	cases := []struct {
		name, method, path string
		body               any
		status             int
		field              string
	}{
		{"no title", "POST", "/api/v1/tasks", map[string]any{"body": "x"}, 422, "title"},
		{"unknown piece", "POST", "/api/v1/tasks", map[string]any{"title": "x", "piece": "nope"}, 422, "piece"},
		{"payload not object", "POST", "/api/v1/tasks", map[string]any{"title": "x", "payload": []int{1}}, 422, "payload"},
		{"store limit", "POST", "/api/v1/tasks", map[string]any{"title": "x", "max_attempts": 1000}, 422, "max_attempts"},
		{"unknown field", "POST", "/api/v1/tasks", map[string]any{"title": "x", "colour": "red"}, 400, "colour"},
		{"wrong type", "POST", "/api/v1/tasks", map[string]any{"title": 3}, 400, "title"},
		{"not json", "POST", "/api/v1/tasks", "{", 400, ""},
		{"brace after the object", "POST", "/api/v1/tasks", `{"title": "x"}}`, 400, ""},
		{"empty body", "POST", "/api/v1/tasks", nil, 400, ""},
		{"bad id", "GET", "/api/v1/tasks/abc", nil, 400, "id"},
		{"no task", "GET", "/api/v1/tasks/999", nil, 404, ""},
		{"bad limit", "GET", "/api/v1/tasks?limit=5000", nil, 400, "limit"},
		{"bad before", "GET", "/api/v1/tasks?before=x", nil, 400, "before"},
		{"empty comment", "POST", task + "/comments", map[string]string{"body": " "}, 422, "body"},
		{"comment no task", "POST", "/api/v1/tasks/999/comments", map[string]string{"body": "x"}, 404, ""},
		{"bad state", "GET", "/api/v1/jobs?state=sleeping", nil, 400, "state"},
		{"no job", "GET", "/api/v1/jobs/999", nil, 404, ""},
		{"cancel no job", "POST", "/api/v1/jobs/999/cancel", nil, 404, ""},
		{"retry extra", "POST", "/api/v1/jobs/1/retry", map[string]int{"extra": -1}, 422, "extra"},
		{"no route", "GET", "/api/v1/nothing", nil, 404, ""},
		{"no piece", "GET", "/api/v1/pieces/nope", nil, 404, ""},
		{"no schedule", "GET", "/api/v1/schedules/5", nil, 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ae := e.wantError(c.status, c.method, c.path, c.body, "Content-Type", "application/json")
			if ae.Field != c.field {
				t.Fatalf("field %q, want %q (error %q)", ae.Field, c.field, ae.Error)
			}
		})
	}
}

// TestWrongMethod: a route's path with a method it does not answer is a
// 405 naming the methods it does, with Allow; it was the 404 "no route"
// that an unknown path gets, so DELETE /api/v1/tasks/1 read as "no such
// task".
func TestWrongMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	for _, c := range []struct{ method, path, allow, says string }{
		{"DELETE", "/api/v1/tasks/1", "GET, HEAD", "method DELETE not allowed: /api/v1/tasks/1 answers GET and HEAD"},
		{"PATCH", "/api/v1/tasks", "GET, HEAD, POST", "/api/v1/tasks answers GET, HEAD and POST"},
		{"GET", "/api/v1/jobs/1/cancel", "POST", "/api/v1/jobs/1/cancel answers POST"},
		{"POST", "/api/v1/schedules/1", "GET, HEAD, PUT, DELETE", "answers GET, HEAD, PUT and DELETE"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), c.method, e.ts.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var ae apiError
		err = json.NewDecoder(resp.Body).Decode(&ae)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow || err != nil || !strings.Contains(ae.Error, c.says) {
			t.Errorf("%s %s: %d Allow %q %+v (%v); want 405 Allow %q saying %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), ae, err, c.allow, c.says)
		}
	}
	// A path no route has is still the 404.
	if ae := e.wantError(http.StatusNotFound, "DELETE", "/api/v1/nothing/1", nil); !strings.Contains(ae.Error, "no route DELETE /api/v1/nothing/1") {
		t.Errorf("unknown path: %+v", ae)
	}
}

// TestCreateTaskPayloadChecked: the payload fields a worker reads with a
// type (task, no_piece) and a replay scenario are checked when the task is
// created, a 422 naming the field, rather than taken and failing the job
// once a worker claims it; a scenario that parses is taken, as an object
// or as text.
func TestCreateTaskPayloadChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	const scenario = `{"schemaVersion": "evalops.maestro.scripted-scenario.v1", "id": "s", "description": "d",
 "metadata": {"recordedAt": "2026-11-27T00:00:00Z", "toolsExpected": ["complete"]},
 "frames": [{"index": 0, "statements": [{"kind": "tool_call", "tool": "complete", "input": {"status": "success", "result": "ok"}}]}]}`
	for _, c := range []struct {
		payload, field, says string
	}{
		{`{"no_piece": "yes"}`, "payload.no_piece", "payload.no_piece: expected true or false, found JSON string"},
		{`{"task": 3}`, "payload.task", "payload.task: expected a string, found JSON number"},
		{`{"replay": 5}`, "payload.replay", "payload.replay: 1:1: expected a scripted scenario object"},
		{`{"replay": {"frames": []}}`, "payload.replay", "schemaVersion: required field is missing"},
		{`{"replay": "frames: ["}`, "payload.replay", "invalid YAML"},
	} {
		ae := e.wantError(http.StatusUnprocessableEntity, "POST", "/api/v1/tasks", `{"title": "t", "payload": `+c.payload+`}`, "Content-Type", "application/json")
		if ae.Field != c.field || !strings.Contains(ae.Error, c.says) {
			t.Errorf("payload %s: field %q, error %q; want field %q saying %q", c.payload, ae.Field, ae.Error, c.field, c.says)
		}
	}
	text, _ := json.Marshal(scenario)
	for _, payload := range []string{`{"replay": ` + scenario + `}`, `{"replay": ` + string(text) + `, "no_piece": true}`, `{"replay": null}`} {
		if code, body := e.do("POST", "/api/v1/tasks", `{"title": "t", "payload": `+payload+`}`, "Content-Type", "application/json"); code != http.StatusCreated {
			t.Errorf("payload %s: %d %s, want 201", payload, code, body)
		}
	}
}

// TestDecodeErrorsInJSONWords: a body of the wrong JSON type is answered
// in JSON's words, naming the field (or the request body), never with a Go
// type name such as api.CreateTaskRequest, int or bool.
func TestDecodeErrorsInJSONWords(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	cases := []struct {
		path, body, field, want string
	}{
		{"/api/v1/tasks", `[]`, "", "request body: expected a JSON object, found JSON array"},
		{"/api/v1/tasks", `"do it"`, "", "request body: expected a JSON object, found JSON string"},
		{"/api/v1/tasks", `{"title":"x","priority":"high"}`, "priority", "priority: expected an integer, found JSON string"},
		{"/api/v1/tasks", `{"title":"x","max_attempts":1.5}`, "max_attempts", "max_attempts: expected an integer, found JSON number 1.5"},
		{"/api/v1/tasks", `{"title":["x"]}`, "title", "title: expected a string, found JSON array"},
		{"/api/v1/tasks", "{\n \"title\": \"x\",\n}", "", "request body: expected a JSON object: invalid character '}' looking for beginning of object key string at line 3, column 1"},
		{"/api/v1/tasks", "\ufeff[]", "", "request body: expected a JSON object, found JSON array"},
		{"/api/v1/schedules", `{"name":"n","cron_expr":"@daily","title":"t","enabled":"yes"}`, "enabled", "enabled: expected true or false, found JSON string"},
	}
	for _, c := range cases {
		ae := e.wantError(http.StatusBadRequest, "POST", c.path, c.body, "Content-Type", "application/json")
		if ae.Field != c.field || ae.Error != c.want {
			t.Errorf("POST %s %s: field %q, error %q; want field %q, error %q", c.path, c.body, ae.Field, ae.Error, c.field, c.want)
		}
	}
}

// TestNameTaken: creating (or renaming to) a name another schedule, MCP
// server, SSH connection or skill holds is a 409 naming the field and the
// name, on both stores; the database's constraint text ("UNIQUE
// constraint failed: schedules.name (2067)") is not the answer.
func TestNameTaken(t *testing.T) {
	box := secretstest.Box(t, 3)
	_, hostKey := sshKeys(t)
	onEachBackendWith(t, func(c *server.Config) { c.Secrets = box }, func(t *testing.T, e *env) {
		sched := func(name string) map[string]any {
			return map[string]any{"name": name, "cron_expr": "* * * * *", "title": "t"}
		}
		e.must(http.StatusCreated, "POST", "/api/v1/schedules", sched("weekly"), nil)
		var other struct{ Schedule store.Schedule }
		e.must(http.StatusCreated, "POST", "/api/v1/schedules", sched("daily"), &other)
		mcp := api.MCPServerRequest{Slug: "gh", Transport: "stdio", Command: "gh-mcp"}
		e.must(http.StatusCreated, "POST", api.MCPServersPath, mcp, nil)
		skill := map[string]any{"files": map[string]string{"SKILL.md": "---\nname: pdf\ndescription: Fill PDF forms\n---\nbody\n"}}
		e.must(http.StatusCreated, "POST", api.SkillsPath, skill, nil)
		ssh := api.SSHConnectionRequest{ID: "0b5e1d2c-0009", Host: "10.0.0.5", User: "ops", HostKey: hostKey, Password: "pw"}
		e.must(http.StatusCreated, "POST", api.SSHConnectionsPath, ssh, nil)
		cases := []struct {
			method, path string
			body         any
			field, name  string
		}{
			{"POST", "/api/v1/schedules", sched("weekly"), "name", `"weekly"`},
			{"PUT", "/api/v1/schedules/" + strconv.FormatInt(other.Schedule.ID, 10), sched("weekly"), "name", `"weekly"`},
			{"POST", api.MCPServersPath, mcp, "slug", `"gh"`},
			{"POST", api.SkillsPath, skill, "files.SKILL.md", `"pdf"`},
			{"POST", api.SSHConnectionsPath, ssh, "id", `"0b5e1d2c-0009"`},
		}
		for _, c := range cases {
			ae := e.wantError(http.StatusConflict, c.method, c.path, c.body)
			if ae.Field != c.field || !strings.Contains(ae.Error, c.name) || strings.Contains(ae.Error, "constraint") {
				t.Errorf("%s %s again: field %q, error %q; want field %q, the name %s and no database text", c.method, c.path, ae.Field, ae.Error, c.field, c.name)
			}
		}
	})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token-value"
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.Token, c.RequireAuth = token, true })
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic " + token}, {"Authorization", "Bearer "}} {
		for _, path := range []string{"/api/v1/tasks", "/metrics", "/api/v1/nothing"} {
			ae := e.wantError(http.StatusUnauthorized, "GET", path, nil, hdr...)
			if ae.Error != "missing or invalid bearer token" {
				t.Fatalf("401 body %q", ae.Error)
			}
		}
	}
	e.wantError(http.StatusUnauthorized, "POST", "/api/v1/tasks", map[string]string{"title": "x"})
	// Probes are open.
	e.must(http.StatusOK, "GET", "/healthz", nil, nil)
	e.must(http.StatusOK, "GET", "/readyz", nil, nil)

	e.token = token
	ct := e.createTask("authed", nil)
	if !strings.HasPrefix(ct.Task.Owner, "token:") {
		t.Fatalf("owner %q, want the token's identity", ct.Task.Owner)
	}
	var audit struct {
		Entries []store.AuditEntry `json:"entries"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/audit", nil, &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Actor != ct.Task.Owner || audit.Entries[0].Action != "task.create" {
		t.Fatalf("audit %+v", audit)
	}
	if strings.Contains(e.logs.String(), token) || strings.Contains(string(audit.Entries[0].Details), token) {
		t.Fatal("the token appears in the logs or the audit log")
	}
	if !strings.Contains(e.logs.String(), "status=401") {
		t.Fatalf("the request log misses the 401s:\n%s", e.logs.String())
	}

	// Without RequireAuth a configured token is still checked when sent.
	open := newEnv(t, sqliteStore(t), func(c *server.Config) { c.Token = token })
	open.must(http.StatusOK, "GET", "/api/v1/tasks", nil, nil)
	open.wantError(http.StatusUnauthorized, "GET", "/api/v1/tasks", nil, "Authorization", "Bearer wrong")
	if _, err := server.New(server.Config{Store: e.st, RequireAuth: true}); err == nil {
		t.Fatal("RequireAuth without a token was accepted")
	}
}

// TestCrossOrigin: a browser page of another origin cannot mutate.
func TestCrossOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	code, _ := e.do("POST", "/api/v1/tasks", map[string]string{"title": "csrf"}, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
	if code != http.StatusForbidden {
		t.Fatalf("cross-site POST: status %d, want 403", code)
	}
	tasks, err := e.st.ListTasks(t.Context(), store.TaskFilter{})
	if err != nil || len(tasks) != 0 {
		t.Fatalf("tasks after a refused POST: %v %v", tasks, err)
	}
}

const validPiece = `name: %s
description: A test piece that answers once.
max_movements: 3
initial_movement: answer
movements:
  - name: answer
    edit: false
    persona: You answer.
    instruction: Answer the task.
    allowed_tools: [Read]
    rules: []
`

func pieceYAML(name string) string { return strings.Replace(validPiece, "%s", name, 1) }

func TestPieces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	type detail struct {
		Name, Source, YAML string
		Builtin, Deletable bool
		Version            int64
		Movements          []string
	}
	var list struct {
		Pieces []detail `json:"pieces"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/pieces", nil, &list)
	names := map[string]detail{}
	for _, p := range list.Pieces {
		names[p.Name] = p
	}
	for _, n := range []string{"general", "chat", "code"} {
		if p, ok := names[n]; !ok || p.Source != "builtin" || !p.Builtin || p.Deletable {
			t.Fatalf("built-in %s: %+v", n, p)
		}
	}
	var d detail
	e.must(http.StatusOK, "GET", "/api/v1/pieces/general", nil, &d)
	if d.Name != "general" || !strings.Contains(d.YAML, "name: general") {
		t.Fatalf("GET general: %+v", d)
	}

	// Create (PUT of a new name), then replace.
	e.must(http.StatusCreated, "PUT", "/api/v1/pieces/mine", pieceYAML("mine"), &d)
	if d.Source != "store" || d.Version != 1 || d.Builtin || !d.Deletable {
		t.Fatalf("created: %+v", d)
	}
	updated := strings.Replace(pieceYAML("mine"), "You answer.", "You answer briefly.", 1)
	e.must(http.StatusOK, "PUT", "/api/v1/pieces/mine", updated, &d)
	if d.Version != 2 || d.YAML != updated {
		t.Fatalf("updated: %+v", d)
	}
	// Optimistic concurrency through the JSON form.
	e.wantError(http.StatusConflict, "PUT", "/api/v1/pieces/mine", map[string]any{"yaml": updated, "if_version": 1})
	e.must(http.StatusOK, "PUT", "/api/v1/pieces/mine", map[string]any{"yaml": updated, "if_version": 2}, &d)

	// An invalid piece: 422 with line:col, the stored piece unchanged.
	before, err := e.st.GetPiece(t.Context(), "mine")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(updated, "max_movements: 3", "max_movements: -1", 1)
	bad = strings.Replace(bad, "allowed_tools: [Read]", "allowed_tools: [Reed]", 1)
	ae := e.wantError(http.StatusUnprocessableEntity, "PUT", "/api/v1/pieces/mine", bad)
	if len(ae.Errors) != 2 || ae.Errors[0].Line != 3 || ae.Errors[0].Field != "max_movements" || ae.Errors[1].Line != 10 ||
		ae.Errors[1].Col != 21 || ae.Errors[1].Field != "movements[0].allowed_tools[0]" {
		t.Fatalf("validator errors %+v", ae)
	}
	after, err := e.st.GetPiece(t.Context(), "mine")
	if err != nil || after.YAML != before.YAML || after.Version != before.Version {
		t.Fatalf("stored piece changed by an invalid PUT: %+v", after)
	}
	// Name mismatch and syntax errors name a position too.
	ae = e.wantError(http.StatusUnprocessableEntity, "PUT", "/api/v1/pieces/mine", pieceYAML("other"))
	if len(ae.Errors) != 1 || ae.Errors[0].Field != "name" || ae.Errors[0].Line != 1 || ae.Errors[0].Col != 7 {
		t.Fatalf("name mismatch %+v", ae)
	}
	ae = e.wantError(http.StatusUnprocessableEntity, "POST", "/api/v1/pieces/validate", "name: [unclosed\n")
	if len(ae.Errors) == 0 || ae.Errors[0].Line == 0 {
		t.Fatalf("syntax error %+v", ae)
	}
	e.must(http.StatusOK, "POST", "/api/v1/pieces/validate", pieceYAML("whatever"), nil)
	e.wantError(http.StatusUnprocessableEntity, "PUT", "/api/v1/pieces/Bad_Name", pieceYAML("Bad_Name"))

	// POST creates; a taken or built-in name conflicts.
	e.must(http.StatusCreated, "POST", "/api/v1/pieces", map[string]string{"yaml": pieceYAML("posted")}, &d)
	e.wantError(http.StatusConflict, "POST", "/api/v1/pieces", pieceYAML("posted"))
	// if_version is PUT's: a create would take it and ignore it.
	if ae := e.wantError(http.StatusUnprocessableEntity, "POST", "/api/v1/pieces", map[string]any{"yaml": pieceYAML("versioned"), "if_version": 3}); ae.Field != "if_version" {
		t.Errorf("POST with if_version: %+v", ae)
	}
	e.wantError(http.StatusConflict, "POST", "/api/v1/pieces", pieceYAML("code"))

	// Override a built-in, then delete the override.
	e.must(http.StatusCreated, "PUT", "/api/v1/pieces/code", pieceYAML("code"), &d)
	if d.Source != "store" || !d.Builtin {
		t.Fatalf("override: %+v", d)
	}
	var del struct {
		Deleted         string `json:"deleted"`
		BuiltinRestored bool   `json:"builtin_restored"`
	}
	e.must(http.StatusOK, "DELETE", "/api/v1/pieces/code", nil, &del)
	if !del.BuiltinRestored {
		t.Fatalf("delete override: %+v", del)
	}
	e.must(http.StatusOK, "GET", "/api/v1/pieces/code", nil, &d)
	if d.Source != "builtin" {
		t.Fatalf("after deleting the override: %+v", d)
	}
	// Built-ins cannot be deleted; general and chat not even overridden.
	for _, n := range []string{"general", "chat"} {
		ae = e.wantError(http.StatusConflict, "DELETE", "/api/v1/pieces/"+n, nil)
		if !strings.Contains(ae.Error, "cannot be deleted") {
			t.Fatalf("delete %s: %q", n, ae.Error)
		}
	}
	e.must(http.StatusCreated, "PUT", "/api/v1/pieces/chat", pieceYAML("chat"), nil)
	e.wantError(http.StatusConflict, "DELETE", "/api/v1/pieces/chat", nil)
	e.wantError(http.StatusConflict, "DELETE", "/api/v1/pieces/code", nil)
	e.wantError(http.StatusNotFound, "DELETE", "/api/v1/pieces/nope", nil)
	// A stale version names the parameter and says what to do, as a
	// stale if_version does (it said "expected version 1, found 3:
	// conflict").
	if ae := e.wantError(http.StatusConflict, "DELETE", "/api/v1/pieces/mine?version=1", nil); ae.Field != "version" || !strings.Contains(ae.Error, `piece "mine" is no longer at version 1`) {
		t.Errorf("stale delete: %+v", ae)
	}
	e.must(http.StatusOK, "DELETE", "/api/v1/pieces/mine", nil, nil)
	e.wantError(http.StatusNotFound, "GET", "/api/v1/pieces/mine", nil)

	// A task may name a stored piece.
	e.createTask("with a stored piece", map[string]any{"piece": "posted"})

	var audit struct {
		Entries []store.AuditEntry `json:"entries"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/audit?target=piece:mine", nil, &audit)
	var actions []string
	for _, a := range audit.Entries {
		actions = append(actions, a.Action)
	}
	if got := strings.Join(actions, ","); got != "piece.delete,piece.update,piece.update,piece.create" {
		t.Fatalf("audit of piece:mine: %s", got)
	}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	var sc struct {
		Schedule store.Schedule `json:"schedule"`
	}
	e.must(http.StatusCreated, "POST", "/api/v1/schedules", map[string]any{"name": "nightly", "cron_expr": "* * * * *", "title": "report", "piece": "general"}, &sc)
	if sc.Schedule.Name != "nightly" || !sc.Schedule.Enabled || sc.Schedule.NextRunAt.IsZero() {
		t.Fatalf("created %+v", sc)
	}
	id := strconv.FormatInt(sc.Schedule.ID, 10)
	e.must(http.StatusOK, "PUT", "/api/v1/schedules/"+id, map[string]any{"name": "nightly", "cron_expr": "* * * * *", "title": "report 2", "enabled": false}, &sc)
	if sc.Schedule.Title != "report 2" || sc.Schedule.Enabled {
		t.Fatalf("updated %+v", sc)
	}
	e.must(http.StatusOK, "GET", "/api/v1/schedules/"+id, nil, &sc)
	var list struct {
		Schedules []store.Schedule `json:"schedules"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/schedules", nil, &list)
	if len(list.Schedules) != 1 {
		t.Fatalf("list %+v", list)
	}
	for _, c := range []struct {
		body   map[string]any
		status int
		field  string
	}{
		{map[string]any{"name": "x", "cron_expr": "61 * * *", "title": "t"}, 422, "cron_expr"},
		{map[string]any{"name": "x", "title": "t"}, 422, "cron_expr"},
		{map[string]any{"name": "x", "cron_expr": "* * * * *"}, 422, "title"},
		{map[string]any{"name": "Bad Name", "cron_expr": "* * * * *", "title": "t"}, 422, "name"},
		{map[string]any{"name": "x", "cron_expr": "* * * * *", "title": "t", "piece": "nope"}, 422, "piece"},
		{map[string]any{"name": "nightly", "cron_expr": "* * * * *", "title": "t"}, 409, "name"},
	} {
		ae := e.wantError(c.status, "POST", "/api/v1/schedules", c.body)
		if ae.Field != c.field {
			t.Fatalf("%v: field %q, want %q (%s)", c.body, ae.Field, c.field, ae.Error)
		}
	}
	e.wantError(http.StatusNotFound, "PUT", "/api/v1/schedules/99", map[string]any{"name": "x", "cron_expr": "* * * * *", "title": "t"})
	e.must(http.StatusNoContent, "DELETE", "/api/v1/schedules/"+id, nil, nil)
	e.wantError(http.StatusNotFound, "DELETE", "/api/v1/schedules/"+id, nil)
	var audit struct {
		Entries []store.AuditEntry `json:"entries"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/audit?target=schedule:"+id, nil, &audit)
	if len(audit.Entries) != 3 || audit.Entries[0].Action != "schedule.delete" || audit.Entries[2].Action != "schedule.create" || audit.Entries[0].Actor != "local" {
		t.Fatalf("audit %+v", audit)
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.MaxUpload = 1000 })
	ct := e.createTask("files", nil)
	task := "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10)
	dir := filepath.Join(e.dataDir, "tasks", strconv.FormatInt(ct.Task.ID, 10), "work")

	// Uploads.
	var up struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
	}
	e.must(http.StatusCreated, "PUT", task+"/uploads/docs/spec.md", "# spec\n", &up)
	if up.Path != "docs/spec.md" || up.Size != 7 {
		t.Fatalf("upload %+v", up)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "input", "docs", "spec.md")); err != nil || string(data) != "# spec\n" {
		t.Fatalf("uploaded file: %q %v", data, err)
	}
	e.must(http.StatusCreated, "PUT", task+"/uploads/docs/spec.md", "# spec v2\n", nil)
	ae := e.wantError(http.StatusRequestEntityTooLarge, "PUT", task+"/uploads/big.bin", strings.Repeat("x", 1001))
	if !strings.Contains(ae.Error, "1000 bytes") {
		t.Fatalf("413 body %q", ae.Error)
	}
	if _, err := os.Stat(filepath.Join(dir, "input", "big.bin")); err == nil {
		t.Fatal("the oversized upload was stored")
	}
	// A chunked body (no Content-Length) is cut off at the limit too.
	req, _ := http.NewRequestWithContext(t.Context(), "PUT", e.ts.URL+task+"/uploads/chunked.bin", io.MultiReader(strings.NewReader(strings.Repeat("y", 800)), strings.NewReader(strings.Repeat("y", 800))))
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked oversized upload: %d", resp.StatusCode)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "input"))
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), ".upload-") || en.Name() == "chunked.bin" {
			t.Fatalf("left behind %s", en.Name())
		}
	}
	e.wantError(http.StatusNotFound, "PUT", "/api/v1/tasks/999/uploads/a.txt", "x")

	// Deliverables.
	out := filepath.Join(dir, "output")
	os.MkdirAll(filepath.Join(out, "sub"), 0o755)
	os.WriteFile(filepath.Join(out, "report.md"), []byte("# report\n"), 0o644)
	os.WriteFile(filepath.Join(out, "sub", "data.json"), []byte(`{"a":1}`), 0o644)
	secret := filepath.Join(e.dataDir, "secret.txt")
	os.WriteFile(secret, []byte("secret"), 0o600)
	os.Symlink(secret, filepath.Join(out, "escape.txt"))
	os.Symlink("report.md", filepath.Join(out, "alias.md"))
	os.Symlink(filepath.Join(e.dataDir), filepath.Join(out, "up"))

	var files api.DeliverableList
	e.must(http.StatusOK, "GET", task+"/deliverables", nil, &files)
	var listed []string
	for _, f := range files.Files {
		listed = append(listed, f.Path)
	}
	// Links are never followed, not even one that stays inside output/
	// (issue 14: the agent can swap any directory for a link).
	if got := strings.Join(listed, ","); got != "report.md,sub/data.json" {
		t.Fatalf("deliverables %s", got)
	}
	code, body := e.do("GET", task+"/deliverables/sub/data.json", nil)
	if code != 200 || string(body) != `{"a":1}` {
		t.Fatalf("download: %d %s", code, body)
	}
	// ServeContent's own errors are the API's JSON too (they were plain
	// text, "invalid range: failed to overlap", or no body).
	if ae := e.wantError(http.StatusRequestedRangeNotSatisfiable, "GET", task+"/deliverables/sub/data.json", nil, "Range", "bytes=99-"); ae.Field != "Range" || !strings.Contains(ae.Error, "within the file's 7 bytes, found \"bytes=99-\"") {
		t.Errorf("range past the end: %+v", ae)
	}
	if ae := e.wantError(http.StatusPreconditionFailed, "GET", task+"/deliverables/sub/data.json", nil, "If-Unmodified-Since", "Mon, 01 Jan 2001 00:00:00 GMT"); !strings.Contains(ae.Error, "the file changed") {
		t.Errorf("If-Unmodified-Since before the file: %+v", ae)
	}
	code, body = e.do("GET", task+"/deliverables/alias.md", nil)
	if code != 400 {
		t.Fatalf("download through an inner symlink: %d %s", code, body)
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/deliverables/..%2F..%2F..%2Fsecret.txt", 400},
		{"/deliverables/%2e%2e/input/docs/spec.md", 400},
		{"/deliverables/sub/..%2F..%2Finput%2Fdocs%2Fspec.md", 400},
		{"/deliverables/%2Fetc%2Fpasswd", 400},
		{"/deliverables/escape.txt", 400},
		{"/deliverables/up/secret.txt", 400},
		{"/deliverables/missing.txt", 404},
		{"/deliverables/sub", 400},
		{"/uploads/..%2Fescape.txt", 400},
		{"/uploads/%2Ftmp%2Fx", 400},
	} {
		code, body := e.do("GET", task+c.path, nil)
		if strings.HasPrefix(c.path, "/uploads/") {
			code, body = e.do("PUT", task+c.path, "x")
		}
		if code != c.status || strings.Contains(string(body), "secret\n") || string(body) == "secret" {
			t.Fatalf("%s: status %d, want %d; body %s", c.path, code, c.status, body)
		}
	}
	// The upload refused above wrote nothing outside input/.
	if _, err := os.Stat(filepath.Join(dir, "escape.txt")); err == nil {
		t.Fatal("an upload escaped input/")
	}
	var audit struct {
		Entries []store.AuditEntry `json:"entries"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/audit?target=task:"+strconv.FormatInt(ct.Task.ID, 10), nil, &audit)
	if len(audit.Entries) != 3 || audit.Entries[0].Action != "task.upload" {
		t.Fatalf("audit %+v", audit)
	}
}

// fakeMetrics stands in for the queue's metrics.
type fakeMetrics struct{}

func (fakeMetrics) WritePrometheus(w io.Writer) { io.WriteString(w, "maestro_claims_total 7\n") }

func TestProbesAndMetrics(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := newEnv(t, st, func(c *server.Config) { c.Metrics = fakeMetrics{} })
	e.createTask("a", nil)
	e.createTask("b", nil)
	j := claim(t, st, "w")
	if _, err := st.Complete(t.Context(), j.Lease(), "ok"); err != nil {
		t.Fatal(err)
	}
	code, body := e.do("GET", "/metrics", nil)
	text := string(body)
	for _, want := range []string{`maestro_jobs{state="queued"} 1`, `maestro_jobs{state="succeeded"} 1`, `maestro_jobs{state="running"} 0`, "# TYPE maestro_jobs gauge", "maestro_claims_total 7"} {
		if code != 200 || !strings.Contains(text, want) {
			t.Fatalf("metrics (status %d) lack %q:\n%s", code, want, text)
		}
	}
	var h map[string]string
	e.must(http.StatusOK, "GET", "/healthz", nil, &h)
	e.must(http.StatusOK, "GET", "/readyz", nil, &h)
	if h["status"] != "ready" {
		t.Fatalf("readyz %v", h)
	}
	if !strings.Contains(text, "maestro_store_up 1\n") {
		t.Errorf("metrics lack maestro_store_up 1:\n%s", text)
	}
	st.Close()
	code, body = e.do("GET", "/readyz", nil)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("readyz on a closed store: %d %s", code, body)
	}
	e.must(http.StatusOK, "GET", "/healthz", nil, nil)
	// The store down (a database outage), the queue's counters are still
	// scraped, with the store said down; it answered 500 and nothing.
	code, body = e.do("GET", "/metrics", nil)
	if text := string(body); code != http.StatusOK || !strings.Contains(text, "maestro_store_up 0\n") || !strings.Contains(text, "maestro_claims_total 7") || strings.Contains(text, "maestro_jobs{") {
		t.Errorf("metrics on a closed store: %d\n%s", code, text)
	}
}

// TestAuditOfMutations: every mutating route leaves an audit entry.
func TestAuditOfMutations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	ct := e.createTask("audited", nil)
	tid, jid := strconv.FormatInt(ct.Task.ID, 10), strconv.FormatInt(ct.Job.ID, 10)
	e.must(http.StatusCreated, "POST", "/api/v1/tasks/"+tid+"/comments", map[string]string{"body": "hi"}, nil)
	e.must(http.StatusCreated, "PUT", "/api/v1/tasks/"+tid+"/uploads/a.txt", "a", nil)
	e.must(http.StatusOK, "POST", "/api/v1/jobs/"+jid+"/cancel", nil, nil)
	e.must(http.StatusOK, "POST", "/api/v1/jobs/"+jid+"/retry", nil, nil)
	e.must(http.StatusCreated, "POST", "/api/v1/pieces", pieceYAML("p1"), nil)
	e.must(http.StatusOK, "PUT", "/api/v1/pieces/p1", pieceYAML("p1"), nil)
	e.must(http.StatusOK, "DELETE", "/api/v1/pieces/p1", nil, nil)
	var sc struct {
		Schedule store.Schedule `json:"schedule"`
	}
	e.must(http.StatusCreated, "POST", "/api/v1/schedules", map[string]any{"name": "s", "cron_expr": "* * * * *", "title": "t"}, &sc)
	sid := strconv.FormatInt(sc.Schedule.ID, 10)
	e.must(http.StatusOK, "PUT", "/api/v1/schedules/"+sid, map[string]any{"name": "s", "cron_expr": "* * * * *", "title": "t"}, nil)
	e.must(http.StatusNoContent, "DELETE", "/api/v1/schedules/"+sid, nil, nil)
	// Refused mutations leave no entry.
	e.wantError(http.StatusConflict, "DELETE", "/api/v1/pieces/general", nil)
	e.wantError(http.StatusUnprocessableEntity, "PUT", "/api/v1/pieces/p2", "name: p2\n")

	var audit struct {
		Entries []store.AuditEntry `json:"entries"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/audit", nil, &audit)
	var got []string
	for i := len(audit.Entries) - 1; i >= 0; i-- {
		a := audit.Entries[i]
		got = append(got, a.Action+" "+a.Target)
		if a.Actor != "local" || !json.Valid(a.Details) {
			t.Fatalf("entry %+v", a)
		}
		// A comment that resumed nothing lists no job: [], as documented.
		if a.Action == "task.comment" && !strings.Contains(string(a.Details), `"resumed_jobs":[]`) {
			t.Errorf("task.comment details %s, want resumed_jobs []", a.Details)
		}
	}
	want := []string{
		"task.create task:" + tid, "task.comment task:" + tid, "task.upload task:" + tid,
		"job.cancel job:" + jid, "job.retry job:" + jid,
		"piece.create piece:p1", "piece.update piece:p1", "piece.delete piece:p1",
		"schedule.create schedule:" + sid, "schedule.update schedule:" + sid, "schedule.delete schedule:" + sid,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoopbackHostOnly: without a token, requests for another host name
// (DNS rebinding) are refused; with a token, the token decides.
func TestLoopbackHostOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	for _, host := range []string{"evil.example", "evil.example:7878", "192.168.1.5:7878"} {
		ae := e.wantError(http.StatusForbidden, "GET", "/api/v1/tasks", nil, "Host", host)
		if !strings.Contains(ae.Error, "localhost") {
			t.Fatalf("host %s: %q", host, ae.Error)
		}
	}
	for _, host := range []string{"localhost:7878", "LOCALHOST", "127.0.0.1", "[::1]:7878"} {
		if code, body := e.do("GET", "/api/v1/tasks", nil, "Host", host); code != http.StatusOK {
			t.Fatalf("host %s: %d %s", host, code, body)
		}
	}
	e.must(http.StatusOK, "GET", "/healthz", nil, nil)
	// With a token, a public name must be listed (--allowed-host); an IP
	// literal cannot be rebound, so it is accepted.
	authed := newEnv(t, sqliteStore(t), func(c *server.Config) {
		c.Token, c.RequireAuth, c.AllowedHosts = "tok", true, []string{"maestro.example.com"}
	})
	authed.token = "tok"
	for _, host := range []string{"maestro.example.com", "MAESTRO.example.com.:443", "192.168.1.5:7878"} {
		if code, body := authed.do("GET", "/api/v1/tasks", nil, "Host", host); code != http.StatusOK {
			t.Fatalf("authenticated request for %s: %d %s", host, code, body)
		}
	}
	authed.wantError(http.StatusForbidden, "GET", "/api/v1/tasks", nil, "Host", "attacker.example")
}

// TestPieceFiles: a catalog with an override directory (the user's piece
// files) is listed with source "file", accepted for tasks, and not
// deletable through the API.
func TestPieceFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte(pieceYAML("mine")), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := piece.Load(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.Pieces, c.Metrics = cat, (*queue.Metrics)(nil) })
	var list struct {
		Pieces []struct {
			Name, Source, File string
			Builtin            bool
		} `json:"pieces"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/pieces", nil, &list)
	found := false
	for _, p := range list.Pieces {
		if p.Name == "mine" {
			found = p.Source == "file" && p.File == filepath.Join(dir, "mine.yaml") && !p.Builtin
		}
		if p.Name == "general" && (p.Source != "builtin" || !p.Builtin) {
			t.Fatalf("general: %+v", p)
		}
	}
	if !found {
		t.Fatalf("the piece file is not listed as such: %+v", list)
	}
	e.createTask("file piece", map[string]any{"piece": "mine"})
	if ae := e.wantError(http.StatusConflict, "DELETE", "/api/v1/pieces/mine", nil); !strings.Contains(ae.Error, "remove the file") {
		t.Fatalf("delete a file piece: %q", ae.Error)
	}
	// A nil *queue.Metrics is no metrics, not a crash.
	if code, body := e.do("GET", "/metrics", nil); code != http.StatusOK || !strings.Contains(string(body), "maestro_jobs") {
		t.Fatalf("metrics: %d %s", code, body)
	}
}
