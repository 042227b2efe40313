package server_test

import (
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
