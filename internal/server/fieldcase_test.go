package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/server"
)

// TestFieldNamesExact: every JSON body the API reads takes its fields by
// their exact names, as docs/api.md writes them. encoding/json took a
// name in another case ({"Title": …} for title) although an unknown field
// is refused, so a client's misspelt case worked by chance; it is now the
// unknown field it is, a 400 naming it (with its path) and the field it
// looks like.
func TestFieldNamesExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	task, job := e.createTask("t", nil).paths()
	var sched struct{ Schedule struct{ ID int64 } }
	e.must(http.StatusCreated, "POST", "/api/v1/schedules", map[string]any{"name": "n", "cron_expr": "* * * * *", "title": "t"}, &sched)
	// The PUT below needs a server to replace.
	e.must(http.StatusCreated, "POST", api.MCPServersPath, map[string]any{"slug": "web", "transport": "stdio", "command": "x"}, nil)
	for _, c := range []struct {
		method, path, body, field, known string
	}{
		{"POST", "/api/v1/tasks", `{"Title": "x"}`, "Title", "title"},
		{"POST", "/api/v1/tasks", `{"title": "x", "MAX_ATTEMPTS": 2}`, "MAX_ATTEMPTS", "max_attempts"},
		{"POST", "/api/v1/tasks", `{"title": "x", "Priority": "high"}`, "Priority", "priority"},
		{"POST", task + "/comments", `{"Body": "x"}`, "Body", "body"},
		{"POST", job + "/cancel", `{"Reason": "x"}`, "Reason", "reason"},
		{"POST", job + "/retry", `{"EXTRA": 1}`, "EXTRA", "extra"},
		{"POST", "/api/v1/pieces", `{"YAML": "name: x"}`, "YAML", "yaml"},
		{"PUT", "/api/v1/pieces/x", `{"yaml": "name: x", "If_Version": 1}`, "If_Version", "if_version"},
		{"POST", "/api/v1/schedules", `{"name": "n", "cron_expr": "@daily", "Title": "t"}`, "Title", "title"},
		{"PUT", "/api/v1/schedules/" + strconv.FormatInt(sched.Schedule.ID, 10), `{"Name": "n"}`, "Name", "name"},
		{"POST", api.MCPServersPath, `{"slug": "x", "Transport": "stdio"}`, "Transport", "transport"},
		{"PUT", api.MCPServersPath + "/web", `{"transport": "stdio", "Command": "x"}`, "Command", "command"},
		{"POST", api.SSHConnectionsPath, `{"Host": "h"}`, "Host", "host"},
		{"POST", api.SkillsPath, `{"Files": {}}`, "Files", "files"},
		// A key of a map is free; a key no field has in any case is
		// unknown as before, without a suggestion.
		{"POST", "/api/v1/tasks", `{"title": "x", "colour": "red"}`, "colour", ""},
	} {
		ae := e.wantError(http.StatusBadRequest, c.method, c.path, c.body, "Content-Type", "application/json")
		want := "unknown field; see docs/api.md"
		if c.known != "" {
			want = `unknown field; did you mean "` + c.known + `"?`
		}
		if ae.Field != c.field || !strings.HasPrefix(ae.Error, c.field+": "+want) {
			t.Errorf("%s %s %s: field %q, error %q; want field %q saying %q", c.method, c.path, c.body, ae.Field, ae.Error, c.field, want)
		}
	}
}

// TestPayloadFieldNamesExact: a payload key that names a field a worker
// reads only in another case is refused, naming it; the worker's decoder
// folds case, so {"No_Piece": true} ran the task without its piece.
// Keys of the client's own, in any case, are kept.
func TestPayloadFieldNamesExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	for _, c := range []struct{ payload, field, name string }{
		{`{"No_Piece": true}`, "payload.No_Piece", "no_piece"},
		{`{"Task": "x", "mine": 1}`, "payload.Task", "task"},
		{`{"MCP_SERVERS": []}`, "payload.MCP_SERVERS", "mcp_servers"},
	} {
		ae := e.wantError(http.StatusUnprocessableEntity, "POST", "/api/v1/tasks", `{"title": "t", "payload": `+c.payload+`}`, "Content-Type", "application/json")
		if ae.Field != c.field || !strings.HasPrefix(ae.Error, c.field+`: did you mean "`+c.name+`"?`) {
			t.Errorf("payload %s: field %q, error %q; want field %q", c.payload, ae.Field, ae.Error, c.field)
		}
	}
	e.must(http.StatusCreated, "POST", "/api/v1/tasks", map[string]any{"title": "t", "payload": map[string]any{"Mine": 1, "MINE": 2, "no_piece": true}}, nil)
	// The list is the worker's.
	var names []string
	for f := range reflect.TypeFor[queue.Payload]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
	}
	if got := server.WorkerPayloadFields(); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(names))) {
		t.Errorf("workerPayloadFields %v, queue.Payload's %v", got, names)
	}
}

// TestRequestTypesDecodeExactly: each request type a route decodes takes
// every field by the name it is written with (all fields set, as the
// client package writes them), and refuses each in upper case.
func TestRequestTypesDecodeExactly(t *testing.T) {
	t.Parallel()
	for _, v := range []any{api.CreateTaskRequest{}, api.CancelRequest{}, api.RetryRequest{}, api.CommentRequest{},
		api.PieceRequest{}, api.ScheduleRequest{}, api.MCPServerRequest{}, api.SSHConnectionRequest{},
		api.SSHGrantRequest{}, api.SkillRequest{}} {
		typ := reflect.TypeOf(v)
		full := reflect.New(typ).Elem()
		fill(full)
		data, err := json.Marshal(full.Interface())
		if err != nil {
			t.Fatal(err)
		}
		if err := httpedge.DecodeJSON(data, reflect.New(typ).Interface()); err != nil {
			t.Errorf("%s %s: %v", typ, data, err)
		}
		var fields map[string]json.RawMessage
		json.Unmarshal(data, &fields)
		for name, value := range fields {
			upper := `{"` + strings.ToUpper(name) + `":` + string(value) + `}`
			err := httpedge.DecodeJSON([]byte(upper), reflect.New(typ).Interface())
			if ue, ok := errors.AsType[*httpedge.UnknownFieldError](err); !ok || ue.Field != strings.ToUpper(name) || ue.Known != name {
				t.Errorf("%s %s: %v, want the unknown field %s (%s)", typ, upper, err, strings.ToUpper(name), name)
			}
		}
	}
}

// fill sets every field of v to a value that is not its zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"Any":{"Case":[1]}}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	}
}
