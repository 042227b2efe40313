package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/server"
)

// A task's payload may name MCP servers the server knows
// (payload.mcp_servers, docs/mcp.md); anything else is refused before
// the task exists.
func TestCreateTaskMCPServers(t *testing.T) {
	t.Parallel()
	known := mcp.ConfigLookup(map[string]config.MCPServer{"web": {URL: "http://127.0.0.1:1/mcp"}})
	for _, tc := range []struct {
		name    string
		lookup  mcp.Lookup
		servers any
		status  int
		msg     string
	}{
		{"a known server", known, []string{"web"}, http.StatusCreated, ""},
		{"none", known, []string{}, http.StatusCreated, ""},
		{"an unknown server", known, []string{"web", "tracker"}, http.StatusUnprocessableEntity, `MCP server "tracker" is not configured`},
		{"not a list", known, "web", http.StatusUnprocessableEntity, "expected a list of MCP server names"},
		{"a server without MCP servers", nil, []string{"web"}, http.StatusUnprocessableEntity, `MCP server "web" is not configured`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.MCPLookup = tc.lookup })
			body := map[string]any{"title": "t", "payload": map[string]any{"mcp_servers": tc.servers}}
			if tc.status == http.StatusCreated {
				e.must(http.StatusCreated, "POST", "/api/v1/tasks", body, nil)
				return
			}
			ae := e.wantError(tc.status, "POST", "/api/v1/tasks", body)
			if ae.Field != "payload.mcp_servers" || !strings.Contains(ae.Error, tc.msg) {
				t.Errorf("error %+v, want field payload.mcp_servers and %q", ae, tc.msg)
			}
			var list struct{ Tasks []any }
			e.must(http.StatusOK, "GET", "/api/v1/tasks", nil, &list)
			if len(list.Tasks) != 0 {
				t.Errorf("a refused create made a task: %+v", list.Tasks)
			}
		})
	}
}
