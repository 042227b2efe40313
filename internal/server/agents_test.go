package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/server"
)

// agentsEnv serves the agent CLI routes with the user adapter of
// internal/agentcli's testdata (fake-agent, no resume of stored sessions)
// installed on PATH as a script that prints its version, and HOME at the
// Codex fixture home (two stored sessions of /home/dev/project).
func agentsEnv(t *testing.T) *env {
	t.Helper()
	bin := t.TempDir()
	script := "#!/bin/sh\necho x >> " + filepath.Join(bin, "probes") + "\necho 'fake-agent 1.2.3'\n"
	if err := os.WriteFile(filepath.Join(bin, "fake-agent"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	home, err := filepath.Abs("../agentcli/testdata/sessions/codex-0.169.0/home")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"PATH": bin, "HOME": home}
	return newEnv(t, sqliteStore(t), func(c *server.Config) {
		c.AgentsDir = "../agentcli/testdata/user-adapter"
		c.Getenv = func(k string) string { return vars[k] }
	})
}

// TestAgentsList: GET /api/v1/agents lists the built-in CLIs and the user
// file, with source, detected path and version, and every capability flag.
func TestAgentsList(t *testing.T) {
	t.Parallel()
	e := agentsEnv(t)
	var out api.AgentList
	e.must(http.StatusOK, "GET", "/api/v1/agents", nil, &out)
	byID := map[string]agentcli.Info{}
	for _, a := range out.Agents {
		byID[a.ID] = a
	}
	fake, ok := byID["fake-agent"]
	if !ok {
		t.Fatalf("fake-agent not listed: %+v", out.Agents)
	}
	if fake.Source != agentcli.SourceUserFile || !strings.HasSuffix(fake.File, "fake-agent.yaml") || fake.Version != "1.2.3" || !strings.HasSuffix(fake.Path, "/fake-agent") {
		t.Errorf("fake-agent: %+v", fake)
	}
	if !fake.Capabilities["resume"] || fake.Capabilities["read_only"] {
		t.Errorf("fake-agent capabilities: %v", fake.Capabilities)
	}
	codex, ok := byID["codex"]
	if !ok || codex.Source != agentcli.SourceBuiltin || codex.Path != "" || codex.SessionStorage != "codex-rollouts" {
		t.Errorf("codex (built-in, not installed on this PATH): %+v", codex)
	}
	if len(out.Invalid) != 0 {
		t.Errorf("invalid: %v", out.Invalid)
	}
}

// TestAgentSessions: the sessions a CLI stored for a project are listed,
// one is read as a transcript; wrong requests get 400 and 404.
func TestAgentSessions(t *testing.T) {
	t.Parallel()
	e := agentsEnv(t)
	var list api.AgentSessionList
	e.must(http.StatusOK, "GET", "/api/v1/agents/codex/sessions?project=/home/dev/project", nil, &list)
	if list.Agent != "codex" || list.Project != "/home/dev/project" || len(list.Sessions) != 2 || len(list.Locations) == 0 {
		t.Fatalf("sessions: %+v", list)
	}
	var other api.AgentSessionList
	e.must(http.StatusOK, "GET", "/api/v1/agents/codex/sessions?project=/home/dev/other", nil, &other)
	if other.Sessions == nil || len(other.Sessions) != 0 {
		t.Fatalf("another project: %+v, want an empty list", other)
	}
	var tr agentcli.Transcript
	e.must(http.StatusOK, "GET", "/api/v1/agents/codex/sessions/"+list.Sessions[0].ID, nil, &tr)
	if tr.Session.ID != list.Sessions[0].ID || len(tr.Messages) == 0 {
		t.Fatalf("transcript: %+v", tr)
	}
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/api/v1/agents/codex/sessions?project=relative", 400, `project: expected the absolute path of a project directory, found "relative"`},
		{"/api/v1/agents/codex/sessions", 400, "absolute path of a project directory, found nothing (?project=DIR)"},
		{"/api/v1/agents/nope/sessions?project=/x", 404, "unknown agent"},
		// The agent is checked first: fixing project would only lead to
		// the 404.
		{"/api/v1/agents/nope/sessions", 404, "unknown agent"},
		{"/api/v1/agents/fake-agent/sessions?project=/x", 404, "session_storage: none"},
		{"/api/v1/agents/codex/sessions/no-such-id", 404, "not found"},
	} {
		if ae := e.wantError(c.status, "GET", c.path, nil); !strings.Contains(ae.Error, c.want) {
			t.Errorf("%s: error %q, want it to say %q", c.path, ae.Error, c.want)
		}
	}
}

// TestCreateTaskAgentSession: POST /api/v1/tasks with an agent_session is
// checked against the stored sessions of the chosen agent CLI: an id the
// CLI stored is accepted and lands in the job payload, an unknown one is a
// 422 naming the field and the id; an agent whose sessions cannot be read
// (session_storage: none) takes the id unchecked.
func TestCreateTaskAgentSession(t *testing.T) {
	t.Parallel()
	e := agentsEnv(t)
	var list api.AgentSessionList
	e.must(http.StatusOK, "GET", "/api/v1/agents/codex/sessions?project=/home/dev/project", nil, &list)
	if len(list.Sessions) == 0 {
		t.Fatalf("no stored codex session in the fixture: %+v", list)
	}
	known := list.Sessions[0].ID
	tests := []struct {
		name, agent, session string
		ok                   bool
	}{
		{"a stored session", "codex", known, true},
		{"an unknown session", "codex", "0198-not-stored", false},
		{"a path as session", "codex", "../../etc/passwd", false},
		{"an agent without session storage", "fake-agent", "anything", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			body := map[string]any{"title": "resume " + tc.name, "executor": "agent-cli", "agent": tc.agent, "agent_session": tc.session}
			if !tc.ok {
				ae := e.wantError(http.StatusUnprocessableEntity, "POST", "/api/v1/tasks", body)
				if ae.Field != "agent_session" || !strings.Contains(ae.Error, tc.session) || !strings.Contains(ae.Error, tc.agent) {
					t.Errorf("422 %q on field %q, want the field agent_session and a message naming %s and %q", ae.Error, ae.Field, tc.agent, tc.session)
				}
				return
			}
			var out struct {
				Job struct {
					Payload struct {
						AgentSession string `json:"agent_session"`
					} `json:"payload"`
				} `json:"job"`
			}
			e.must(http.StatusCreated, "POST", "/api/v1/tasks", body, &out)
			if out.Job.Payload.AgentSession != tc.session {
				t.Errorf("job payload agent_session %q, want %q", out.Job.Payload.AgentSession, tc.session)
			}
		})
	}
}

// TestAgentsListProbesOnce: listing the CLIs again does not ask an
// unchanged CLI for its version again (each listing ran every CLI's
// probe: the Agent CLIs page waited about 3 s each time).
func TestAgentsListProbesOnce(t *testing.T) {
	t.Parallel()
	e := agentsEnv(t)
	for range 3 {
		var out api.AgentList
		e.must(http.StatusOK, "GET", "/api/v1/agents", nil, &out)
	}
	var fake agentcli.Info
	var out api.AgentList
	e.must(http.StatusOK, "GET", "/api/v1/agents", nil, &out)
	for _, a := range out.Agents {
		if a.ID == "fake-agent" {
			fake = a
		}
	}
	data, _ := os.ReadFile(filepath.Join(filepath.Dir(fake.Path), "probes"))
	if n := strings.Count(string(data), "x"); n != 1 || fake.Version != "1.2.3" {
		t.Errorf("fake-agent asked for its version %d times in 4 listings (want 1); version %q", n, fake.Version)
	}
}
