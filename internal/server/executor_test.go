package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/server"
)

// TestCreateTaskAgentNoneInstalled: a server that runs jobs (Worker set)
// with no agent CLI installed refuses an agent-cli task at once, naming the
// field, rather than queueing a job its workers can only fail; one that
// runs no workers takes the task for workers elsewhere.
func TestCreateTaskAgentNoneInstalled(t *testing.T) {
	t.Parallel()
	body := map[string]any{"title": "on codex", "executor": "agent-cli", "agent": "codex"}
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.Info.Worker = "host:1" })
	ae := e.wantError(http.StatusUnprocessableEntity, "POST", "/api/v1/tasks", body)
	if ae.Field != "agent" || !strings.Contains(ae.Error, "no agent CLI is installed") {
		t.Errorf("agent-cli task on a worker with none installed: %+v, want a 422 on agent saying none is installed", ae)
	}
	e = newEnv(t, sqliteStore(t), nil)
	e.must(http.StatusCreated, "POST", "/api/v1/tasks", body, nil)
}

// TestCreateTaskExecutor: POST /api/v1/tasks' executor and agent are
// checked against the allowed values (a 422 naming the field and what it
// may be) and land in the job payload, replacing the payload's own; GET
// /api/v1/server lists the agent CLIs a task may name.
func TestCreateTaskExecutor(t *testing.T) {
	e := newEnv(t, sqliteStore(t), func(c *server.Config) {
		c.Info.Agents = []string{"codex", "fake-move"}
	})
	var info struct {
		Agents []string `json:"agents"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/server", nil, &info)
	if strings.Join(info.Agents, ",") != "codex,fake-move" {
		t.Errorf("server agents = %v, want [codex fake-move]", info.Agents)
	}
	tests := []struct {
		name  string
		body  map[string]any
		field string   // the 422's field ("" when accepted)
		says  []string // in the 422's message
		// payload is the job payload when accepted.
		payload string
	}{
		{"default", map[string]any{}, "", nil, `{}`},
		{"native", map[string]any{"executor": "native"}, "", nil, `{"executor":"native"}`},
		{"replay over the payload's own", map[string]any{"executor": "replay", "payload": map[string]any{"executor": "native", "agent": "x", "task": "t"}},
			"", nil, `{"executor":"replay","task":"t"}`},
		{"agent CLI", map[string]any{"executor": "agent-cli", "agent": "fake-move"}, "", nil, `{"agent":"fake-move","executor":"agent-cli"}`},
		{"unknown executor", map[string]any{"executor": "gpt"}, "executor", []string{`"gpt"`, "native, agent-cli, replay"}, ""},
		{"agent CLI without agent", map[string]any{"executor": "agent-cli"}, "agent", []string{"required", "codex, fake-move"}, ""},
		{"agent not installed", map[string]any{"executor": "agent-cli", "agent": "gemini-cli"}, "agent", []string{`"gemini-cli"`, "codex, fake-move"}, ""},
		{"agent without agent CLI", map[string]any{"executor": "native", "agent": "codex"}, "agent", []string{"agent-cli"}, ""},
		{"agent alone", map[string]any{"agent": "codex"}, "agent", []string{"agent-cli"}, ""},
		{"resume an agent CLI session", map[string]any{"executor": "agent-cli", "agent": "fake-move", "agent_session": "s-1", "payload": map[string]any{"agent_session": "other"}},
			"", nil, `{"agent":"fake-move","agent_session":"s-1","executor":"agent-cli"}`},
		{"agent session without agent CLI", map[string]any{"executor": "native", "agent_session": "s-1"}, "agent_session", []string{"agent-cli"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			body := map[string]any{"title": "executor " + tc.name}
			for k, v := range tc.body {
				body[k] = v
			}
			if tc.field != "" {
				ae := e.wantError(http.StatusUnprocessableEntity, "POST", "/api/v1/tasks", body)
				if ae.Field != tc.field {
					t.Errorf("field %q, want %q (%s)", ae.Field, tc.field, ae.Error)
				}
				for _, s := range tc.says {
					if !strings.Contains(ae.Error, s) {
						t.Errorf("error %q does not say %q", ae.Error, s)
					}
				}
				return
			}
			var out createdTask
			e.must(http.StatusCreated, "POST", "/api/v1/tasks", body, &out)
			var got, want any
			if err := json.Unmarshal(out.Job.Payload, &got); err != nil {
				t.Fatal(err)
			}
			json.Unmarshal([]byte(tc.payload), &want)
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("job payload %s, want %s", g, w)
			}
		})
	}
}
