package server_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/sessionowner"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// TestOpenAPICoversEveryRoute: every route registered in the mux is
// described in docs/openapi.yaml, and the document describes no route the
// server does not have.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi: %q, want 3.1.x", doc.OpenAPI)
	}
	methods := []string{"get", "put", "post", "delete", "patch", "head", "options"}
	var documented []string
	for path, ops := range doc.Paths {
		for m := range ops {
			if slices.Contains(methods, m) {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	// With the remote-attach session API mounted, as maestro serve does:
	// its routes are part of the document too, behind the routing among
	// serve processes (internal/sessionowner) that adds the listing.
	st := sqliteStore(t)
	owners, err := sessionowner.New(sessionowner.Config{Store: st, Local: httpattach.NewSessionMap(nil), Instance: "test", Address: "http://127.0.0.1:7878"})
	if err != nil {
		t.Fatal(err)
	}
	attach := httpattach.NewHandler(httpattach.Config{Sessions: owners, SweepInterval: -1})
	defer attach.Close()
	srv, err := server.New(server.Config{Store: st, Headless: owners.Handler(attach)})
	if err != nil {
		t.Fatal(err)
	}
	rest := regexp.MustCompile(`\{(\w+)\.\.\.\}`)
	var registered []string
	for _, r := range srv.Routes() {
		registered = append(registered, rest.ReplaceAllString(r, "{$1}"))
	}
	if !slices.Contains(registered, "POST /api/headless/sessions/{id}/messages") {
		t.Fatalf("the session API's routes are not registered: %v", registered)
	}
	if len(registered) < 36 {
		t.Fatalf("only %d routes registered: %v", len(registered), registered)
	}
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in docs/openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("docs/openapi.yaml describes %s, which the server does not register", d)
		}
	}
}

// TestQueryParamsDocumented: the query parameters each REST route takes
// (any other is a 400 naming it) are those docs/openapi.yaml lists, with
// that 400, and an unknown one is refused: GET /api/v1/tasks?status=failed
// answered every task, as if filtered.
func TestQueryParamsDocumented(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type param struct {
		Ref  string `yaml:"$ref"`
		Name string `yaml:"name"`
		In   string `yaml:"in"`
	}
	var doc struct {
		Paths      map[string]map[string]yaml.Node `yaml:"paths"`
		Components struct {
			Parameters map[string]param `yaml:"parameters"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	query := func(node yaml.Node) []string {
		var op struct {
			Parameters []param `yaml:"parameters"`
		}
		node.Decode(&op)
		var names []string
		for _, p := range op.Parameters {
			if p.Ref != "" {
				p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
			}
			if p.In == "query" {
				names = append(names, p.Name)
			}
		}
		return names
	}
	n := 0
	for path, ops := range doc.Paths {
		if !strings.HasPrefix(path, "/api/v1/") {
			continue
		}
		shared := query(ops["parameters"])
		for m, node := range ops {
			if m == "parameters" {
				continue
			}
			pattern := strings.ToUpper(m) + " " + path
			want := slices.Sorted(slices.Values(append(query(node), shared...)))
			got := slices.Sorted(slices.Values(server.QueryParams(pattern)))
			if !slices.Equal(got, want) {
				t.Errorf("%s: the server takes query parameters %v, docs/openapi.yaml lists %v", pattern, got, want)
			}
			// Any route answers 400 to a parameter it does not take.
			var op struct {
				Responses map[string]any `yaml:"responses"`
			}
			node.Decode(&op)
			if _, ok := op.Responses["400"]; !ok {
				t.Errorf("%s: docs/openapi.yaml lists no 400, which an unknown query parameter gets", pattern)
			}
			n++
		}
	}
	if n < 30 {
		t.Fatalf("only %d REST routes compared", n)
	}

	e := newEnv(t, sqliteStore(t), nil)
	for _, c := range []struct{ method, path, field, says string }{
		{"GET", "/api/v1/tasks?status=failed", "status", "status: unknown query parameter; GET /api/v1/tasks takes owner, state, q, before, limit"},
		{"GET", "/api/v1/audit?limit=5&action=task.create", "action", "GET /api/v1/audit takes target, before, limit"},
		{"GET", "/api/v1/tasks/1?verbose=1", "verbose", "GET /api/v1/tasks/{id} takes no query parameters"},
	} {
		if ae := e.wantError(http.StatusBadRequest, c.method, c.path, nil); ae.Field != c.field || !strings.Contains(ae.Error, c.says) {
			t.Errorf("%s %s: %+v, want field %s saying %q", c.method, c.path, ae, c.field, c.says)
		}
	}
	e.must(http.StatusOK, "GET", "/api/v1/tasks?state=failed&limit=5", nil, nil)
}
