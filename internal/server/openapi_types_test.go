package server_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/store"
)

// routeTypes are the Go types of one route's JSON bodies.
type routeTypes struct {
	// req is the JSON request body (nil: the route takes none in JSON).
	req any
	// ok maps a success status to its JSON answer (nil value: the status
	// answers no JSON: 204, a file, text). Error statuses answer api.Error
	// unless listed here.
	ok map[int]any
}

// restRoutes are the Go types of every REST route in docs/openapi.yaml:
// the routes of internal/server, all but the remote-attach API under
// /api/headless/ (internal/transport/httpattach, described by the wire
// contract).
var restRoutes = map[string]routeTypes{
	"POST /api/v1/tasks":                         {req: api.CreateTaskRequest{}, ok: map[int]any{201: api.CreateTaskResponse{}}},
	"GET /api/v1/tasks":                          {ok: map[int]any{200: api.TaskList{}}},
	"GET /api/v1/tasks/{id}":                     {ok: map[int]any{200: api.TaskDetail{}}},
	"POST /api/v1/tasks/{id}/comments":           {req: api.CommentRequest{}, ok: map[int]any{201: api.CommentResponse{}}},
	"GET /api/v1/tasks/{id}/deliverables":        {ok: map[int]any{200: api.DeliverableList{}}},
	"GET /api/v1/tasks/{id}/deliverables/{path}": {ok: map[int]any{200: nil, 206: nil}},
	"PUT /api/v1/tasks/{id}/uploads/{path}":      {ok: map[int]any{201: api.FileRef{}}},
	"GET /api/v1/jobs":                           {ok: map[int]any{200: api.JobList{}}},
	"GET /api/v1/jobs/{id}":                      {ok: map[int]any{200: api.JobResponse{}}},
	"POST /api/v1/jobs/{id}/cancel":              {req: api.CancelRequest{}, ok: map[int]any{200: api.JobResponse{}}},
	"POST /api/v1/jobs/{id}/retry":               {req: api.RetryRequest{}, ok: map[int]any{200: api.JobResponse{}}},
	"GET /api/v1/jobs/{id}/events":               {ok: map[int]any{200: api.JobEventPage{}}},
	"GET /api/v1/pieces":                         {ok: map[int]any{200: api.PieceList{}}},
	"POST /api/v1/pieces":                        {req: api.PieceRequest{}, ok: map[int]any{201: api.PieceDetail{}}},
	"POST /api/v1/pieces/validate":               {req: api.PieceRequest{}, ok: map[int]any{200: api.PieceValidation{}}},
	"GET /api/v1/pieces/{name}":                  {ok: map[int]any{200: api.PieceDetail{}}},
	"PUT /api/v1/pieces/{name}":                  {req: api.PieceRequest{}, ok: map[int]any{200: api.PieceDetail{}, 201: api.PieceDetail{}}},
	"DELETE /api/v1/pieces/{name}":               {ok: map[int]any{200: api.PieceDeleted{}}},
	"GET /api/v1/schedules":                      {ok: map[int]any{200: api.ScheduleList{}}},
	"POST /api/v1/schedules":                     {req: api.ScheduleRequest{}, ok: map[int]any{201: api.ScheduleResponse{}}},
	"GET /api/v1/schedules/{id}":                 {ok: map[int]any{200: api.ScheduleResponse{}}},
	"PUT /api/v1/schedules/{id}":                 {req: api.ScheduleRequest{}, ok: map[int]any{200: api.ScheduleResponse{}}},
	"DELETE /api/v1/schedules/{id}":              {ok: map[int]any{204: nil}},
	"GET /api/v1/audit":                          {ok: map[int]any{200: api.AuditList{}}},
	"GET /api/v1/usage":                          {ok: map[int]any{200: api.UsageReport{}}},
	"GET /api/v1/server":                         {ok: map[int]any{200: api.ServerInfo{}}},
	"GET /healthz":                               {ok: map[int]any{200: api.Health{}}},
	"GET /readyz":                                {ok: map[int]any{200: api.Health{}, 503: api.Health{}}},
	"GET /metrics":                               {ok: map[int]any{200: nil}},

	// The registry (internal/server/registry.go).
	"GET /api/v1/mcp-servers":                                     {ok: map[int]any{200: api.MCPServerList{}}},
	"POST /api/v1/mcp-servers":                                    {req: api.MCPServerRequest{}, ok: map[int]any{201: api.MCPServer{}}},
	"GET /api/v1/mcp-servers/{slug}":                              {ok: map[int]any{200: api.MCPServer{}}},
	"PUT /api/v1/mcp-servers/{slug}":                              {req: api.MCPServerRequest{}, ok: map[int]any{200: api.MCPServer{}}},
	"DELETE /api/v1/mcp-servers/{slug}":                           {ok: map[int]any{204: nil}},
	"GET /api/v1/ssh-connections":                                 {ok: map[int]any{200: api.SSHConnectionList{}}},
	"POST /api/v1/ssh-connections":                                {req: api.SSHConnectionRequest{}, ok: map[int]any{201: api.SSHConnection{}}},
	"GET /api/v1/ssh-connections/{id}":                            {ok: map[int]any{200: api.SSHConnection{}}},
	"PUT /api/v1/ssh-connections/{id}":                            {req: api.SSHConnectionRequest{}, ok: map[int]any{200: api.SSHConnection{}}},
	"DELETE /api/v1/ssh-connections/{id}":                         {ok: map[int]any{204: nil}},
	"GET /api/v1/ssh-connections/{id}/grants":                     {ok: map[int]any{200: api.SSHGrantList{}}},
	"POST /api/v1/ssh-connections/{id}/grants":                    {req: api.SSHGrantRequest{}, ok: map[int]any{201: store.SSHGrant{}}},
	"DELETE /api/v1/ssh-connections/{id}/grants/{kind}/{grantee}": {ok: map[int]any{204: nil}},
	"GET /api/v1/skills":                                          {ok: map[int]any{200: api.SkillList{}}},
	"POST /api/v1/skills":                                         {req: api.SkillRequest{}, ok: map[int]any{201: api.SkillResponse{}}},
	"GET /api/v1/agents":                                          {ok: map[int]any{200: api.AgentList{}}},
	"GET /api/v1/agents/{id}/sessions":                            {ok: map[int]any{200: api.AgentSessionList{}}},
	"GET /api/v1/agents/{id}/sessions/{session}":                  {ok: map[int]any{200: agentcli.Transcript{}}},
	"GET /api/v1/skills/{name}":                                   {ok: map[int]any{200: api.SkillResponse{}}},
	"DELETE /api/v1/skills/{name}":                                {ok: map[int]any{204: nil}},

	// The history of a stored piece (issue 18).
	"GET /api/v1/pieces/{name}/versions":           {ok: map[int]any{200: api.PieceVersionList{}}},
	"GET /api/v1/pieces/{name}/versions/{version}": {ok: map[int]any{200: store.PieceVersion{}}},
}

// opaqueTypes are described in the document as a bare object: a parsed
// piece is documented by docs/pieces.md, not field by field here.
var opaqueTypes = []reflect.Type{reflect.TypeFor[piece.Piece]()}

// TestOpenAPIMatchesTypes checks docs/openapi.yaml against the types of
// internal/api (and the store rows they carry): for every REST route and
// every status it documents, the JSON schema of the request and of the
// answer has exactly the Go type's JSON fields (names; required exactly
// when the field is never omitted; types, through arrays, nested objects,
// allOf and $ref), error answers are api.Error, and the job states are the
// store's. Every REST route the document describes has its types listed
// in restRoutes, and every status listed there is documented.
func TestOpenAPIMatchesTypes(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	s := schemaChecker{doc: doc}
	paths, _ := doc["paths"].(map[string]any)
	seen := map[string]bool{}
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		if strings.HasPrefix(path, "/api/headless/") {
			continue
		}
		item := s.node(paths[path])
		for _, method := range []string{"get", "put", "post", "delete", "patch"} {
			op, ok := item[method]
			if !ok {
				continue
			}
			route := strings.ToUpper(method) + " " + path
			seen[route] = true
			types, ok := restRoutes[route]
			if !ok {
				t.Errorf("%s: documented, but restRoutes names no Go types for it", route)
				continue
			}
			s.checkOperation(t, route, s.node(op), types)
		}
	}
	for route := range restRoutes {
		if !seen[route] {
			t.Errorf("%s: listed in restRoutes, not in docs/openapi.yaml", route)
		}
	}
	// The job states, as the store has them.
	state := s.resolve(map[string]any{"$ref": "#/components/schemas/State"})
	var enum []string
	for _, v := range state["enum"].([]any) {
		enum = append(enum, fmt.Sprint(v))
	}
	var states []string
	for _, st := range store.States() {
		states = append(states, string(st))
	}
	if !slices.Equal(enum, states) {
		t.Errorf("components.schemas.State enum %v, want the store's states %v", enum, states)
	}
}

// TestOpenAPICheckerCatches: the checker reports a missing field, an extra
// field, a wrong type, a wrong required list and a wrong item type; a
// checker that accepted everything would pass TestOpenAPIMatchesTypes.
func TestOpenAPICheckerCatches(t *testing.T) {
	t.Parallel()
	type inner struct {
		N int `json:"n"`
	}
	type body struct {
		Name  string    `json:"name"`
		Tags  []string  `json:"tags,omitempty"`
		At    time.Time `json:"at,omitzero"`
		Inner []inner   `json:"inner"`
	}
	good := `{type: object, required: [name, inner], properties: {name: {type: string}, tags: {type: array, items: {type: string}},
		at: {type: string, format: date-time}, inner: {type: array, items: {type: object, required: [n], properties: {n: {type: integer}}}}}}`
	for _, tc := range []struct {
		name, schema string
		wantErr      string
	}{
		{"matches", good, ""},
		{"missing field", strings.Replace(good, "tags: {type: array, items: {type: string}},", "", 1), "tags: a field of the Go type, not in the schema"},
		{"extra field", strings.Replace(good, "name: {type: string},", "name: {type: string}, colour: {type: string},", 1), "colour: in the schema, not a field of the Go type"},
		{"wrong type", strings.Replace(good, "name: {type: string}", "name: {type: integer}", 1), `name: schema type "integer", Go type string`},
		{"required", strings.Replace(good, "required: [name, inner]", "required: [name]", 1), "required [name], want [inner name]"},
		{"item type", strings.Replace(good, "n: {type: integer}", "n: {type: string}", 1), `inner[].n: schema type "string", Go type int`},
		{"time format", strings.Replace(good, "format: date-time", "format: date", 1), "at: a time.Time is {type: string, format: date-time}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sch map[string]any
			if err := yaml.Unmarshal([]byte(tc.schema), &sch); err != nil {
				t.Fatal(err)
			}
			var errs []string
			(&schemaChecker{}).compare(func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }, "body", sch, reflect.TypeFor[body]())
			got := strings.Join(errs, "\n")
			if (tc.wantErr == "") != (got == "") || !strings.Contains(got, tc.wantErr) {
				t.Errorf("got errors %q, want %q", got, tc.wantErr)
			}
		})
	}
}

type schemaChecker struct{ doc map[string]any }

func (s *schemaChecker) node(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// resolve follows $ref (local references only) until a node without one.
func (s *schemaChecker) resolve(n map[string]any) map[string]any {
	for i := 0; i < 10; i++ {
		ref, ok := n["$ref"].(string)
		if !ok {
			return n
		}
		var cur any = s.doc
		for _, p := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cur = s.node(cur)[p]
		}
		n = s.node(cur)
	}
	return n
}

func (s *schemaChecker) checkOperation(t *testing.T, route string, op map[string]any, types routeTypes) {
	t.Helper()
	errf := func(f string, a ...any) { t.Errorf(route+": "+f, a...) }
	if rb := s.resolve(s.node(op["requestBody"])); rb != nil {
		content := s.node(rb["content"])
		if js, ok := content["application/json"]; ok {
			if types.req == nil {
				errf("the document has a JSON request body, restRoutes no request type")
			} else {
				s.compare(errf, "request", s.node(s.node(js)["schema"]), reflect.TypeOf(types.req))
			}
		} else if types.req != nil {
			errf("restRoutes has a request type, the document no JSON request body")
		}
		// A multipart task holds the same JSON object in its "task" part.
		if mp, ok := content["multipart/form-data"]; ok {
			task := s.node(s.node(s.resolve(s.node(s.node(mp)["schema"]))["properties"])[api.TaskPart])
			s.compare(errf, "multipart "+api.TaskPart, task, reflect.TypeOf(types.req))
		}
	} else if types.req != nil {
		errf("restRoutes has a request type, the document no request body")
	}
	responses := s.node(op["responses"])
	for code := range types.ok {
		if _, ok := responses[strconv.Itoa(code)]; !ok {
			errf("status %d: listed in restRoutes, not documented", code)
		}
	}
	for _, code := range slices.Sorted(maps.Keys(responses)) {
		status, err := strconv.Atoi(code)
		if err != nil {
			errf("response %q: expected a status code", code)
			continue
		}
		goType, listed := types.ok[status]
		if !listed && status >= 400 {
			goType, listed = api.Error{}, true
		}
		if !listed {
			errf("status %d: documented, not listed in restRoutes", status)
			continue
		}
		js, isJSON := s.node(s.resolve(s.node(responses[code]))["content"])["application/json"]
		switch {
		case goType == nil && isJSON:
			errf("status %d: the document answers JSON, restRoutes no type", status)
		case goType != nil && !isJSON:
			errf("status %d: restRoutes has %T, the document no JSON answer", status, goType)
		case goType != nil:
			s.compare(errf, "status "+code, s.node(s.node(js)["schema"]), reflect.TypeOf(goType))
		}
	}
}

// compare reports where schema and the Go type t differ, at path.
func (s *schemaChecker) compare(errf func(string, ...any), path string, schema map[string]any, t reflect.Type) {
	schema = s.resolve(schema)
	if schema == nil {
		errf("%s: no schema for %s", path, t)
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	typ, _ := schema["type"].(string)
	switch {
	case t == reflect.TypeFor[json.RawMessage]():
		// Any JSON: the document may say what it holds (an object).
		if typ != "" && typ != "object" {
			errf("%s: schema type %q for raw JSON, want object or none", path, typ)
		}
		return
	case t == reflect.TypeFor[time.Time]():
		if typ != "string" || schema["format"] != "date-time" {
			errf("%s: a time.Time is {type: string, format: date-time}", path)
		}
		return
	case slices.Contains(opaqueTypes, t):
		if typ != "object" || schema["properties"] != nil {
			errf("%s: %s is documented as a bare object", path, t)
		}
		return
	}
	want := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean",
		reflect.Int: "integer", reflect.Int64: "integer", reflect.Int32: "integer",
		reflect.Float64: "number", reflect.Slice: "array", reflect.Struct: "object", reflect.Map: "object"}[t.Kind()]
	if _, all := schema["allOf"]; all && t.Kind() == reflect.Struct {
		typ = "object"
	}
	if typ != want {
		errf("%s: schema type %q, Go type %s", path, typ, t)
		return
	}
	switch t.Kind() {
	case reflect.Slice:
		s.compare(errf, path+"[]", s.node(schema["items"]), t.Elem())
	case reflect.Struct:
		props, required := s.objectSchema(schema)
		fields := jsonFields(t)
		var wantRequired []string
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			f := fields[name]
			if !f.optional {
				wantRequired = append(wantRequired, name)
			}
			p, ok := props[name]
			if !ok {
				errf("%s.%s: a field of the Go type, not in the schema", path, name)
				continue
			}
			s.compare(errf, path+"."+name, s.node(p), f.typ)
		}
		for name := range props {
			if _, ok := fields[name]; !ok {
				errf("%s.%s: in the schema, not a field of the Go type %s", path, name, t)
			}
		}
		sort.Strings(required)
		if !slices.Equal(required, wantRequired) {
			errf("%s: required %v, want %v (the fields the Go type never omits)", path, required, wantRequired)
		}
	}
}

// objectSchema merges an object schema's properties and required lists
// (through allOf).
func (s *schemaChecker) objectSchema(schema map[string]any) (map[string]any, []string) {
	props := map[string]any{}
	var required []string
	parts := []map[string]any{schema}
	all, _ := schema["allOf"].([]any)
	for _, sub := range all {
		parts = append(parts, s.resolve(s.node(sub)))
	}
	for _, p := range parts {
		maps.Copy(props, s.node(p["properties"]))
		req, _ := p["required"].([]any)
		for _, r := range req {
			required = append(required, fmt.Sprint(r))
		}
	}
	return props, required
}

type jsonField struct {
	typ      reflect.Type
	optional bool
}

// jsonFields are the JSON fields of a struct type as encoding/json sees
// them: tagged names, embedded structs inlined, "-" left out; optional
// when omitempty or omitzero.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	var walk func(reflect.Type, int)
	walk = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, depth+1)
				continue
			}
			if name == "" {
				name = f.Name
			}
			if prev, ok := out[name]; ok && depth > 0 && prev.typ != nil {
				continue // a shallower field of the name wins
			}
			out[name] = jsonField{typ: f.Type, optional: strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")}
		}
	}
	walk(t, 0)
	return out
}
