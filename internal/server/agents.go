package server

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/httpedge"
)

// registerAgents adds the agent CLI routes (docs/api.md, "Agent CLIs"):
// the definitions with their detected binaries, and the sessions each CLI
// stored on this machine, read and never written.
func (s *Server) registerAgents() {
	s.handle("GET "+api.AgentsPath, s.listAgents)
	s.handle("GET "+api.AgentsPath+"/{id}/sessions", s.listAgentSessions)
	s.handle("GET "+api.AgentsPath+"/{id}/sessions/{session}", s.getAgentSession)
}

// getenv is Config.Getenv, else the process environment.
func (s *Server) getenv(k string) string {
	if s.cfg.Getenv != nil {
		return s.cfg.Getenv(k)
	}
	return os.Getenv(k)
}

// agentRegistry loads the built-in definitions and Config.AgentsDir's; the
// second result lists the user files left out (file:line:col).
func (s *Server) agentRegistry() (*agentcli.Registry, []string, error) {
	reg, problems := agentcli.Load(s.cfg.AgentsDir)
	if reg == nil {
		return nil, nil, problems
	}
	invalid := []string{}
	if problems != nil {
		invalid = strings.Split(problems.Error(), "\n")
	}
	return reg, invalid, nil
}

// listAgents answers GET /api/v1/agents.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	reg, invalid, err := s.agentRegistry()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "load the agent CLI definitions: "+err.Error())
		return
	}
	infos, _ := s.agentProbes.DescribeAll(r.Context(), reg.All(), s.getenv("PATH"))
	out := api.AgentList{Agents: append([]agentcli.Info{}, infos...), Invalid: invalid}
	writeJSON(w, http.StatusOK, out)
}

// agentSessions resolves {id} to its definition's session reader; on an
// error it writes the answer and returns false.
func (s *Server) agentSessions(w http.ResponseWriter, r *http.Request) (*agentcli.Definition, agentcli.SessionStore, bool) {
	reg, _, err := s.agentRegistry()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "load the agent CLI definitions: "+err.Error())
		return nil, nil, false
	}
	id := r.PathValue("id")
	def, ok := reg.Get(id)
	if !ok {
		writeError(w, http.StatusNotFound, "agent "+id+": unknown agent (known: "+strings.Join(reg.IDs(), ", ")+")")
		return nil, nil, false
	}
	if def.SessionStorage == "" || def.SessionStorage == "none" {
		writeError(w, http.StatusNotFound, "agent "+id+": its definition has session_storage: none, so its sessions cannot be read")
		return nil, nil, false
	}
	st, err := agentcli.NewSessionStore(def.SessionStorage, s.getenv)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "agent "+id+": "+err.Error())
		return nil, nil, false
	}
	return def, st, true
}

// listAgentSessions answers GET /api/v1/agents/{id}/sessions?project=DIR:
// the sessions the CLI stored for the project directory DIR (absolute).
// DIR is only compared with the directories the CLI recorded (and mapped
// to its storage names, which hold no separators): nothing under it is
// read.
func (s *Server) listAgentSessions(w http.ResponseWriter, r *http.Request) {
	def, st, ok := s.agentSessions(w, r)
	if !ok {
		return
	}
	project := r.URL.Query().Get("project")
	if !filepath.IsAbs(project) {
		found := "nothing (?project=DIR)"
		if project != "" {
			found = httpedge.Echo(project)
		}
		writeFieldError(w, http.StatusBadRequest, "project", "expected the absolute path of a project directory, found "+found)
		return
	}
	project = filepath.Clean(project)
	list, err := st.List(r.Context(), project)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "list the sessions of "+def.ID+": "+err.Error())
		return
	}
	if list == nil {
		list = []agentcli.SessionInfo{}
	}
	locs := st.Locations(project)
	if locs == nil {
		locs = []string{}
	}
	writeJSON(w, http.StatusOK, api.AgentSessionList{Agent: def.ID, Project: project, Locations: locs, Sessions: list})
}

// getAgentSession answers GET /api/v1/agents/{id}/sessions/{session}:
// the stored session's transcript.
func (s *Server) getAgentSession(w http.ResponseWriter, r *http.Request) {
	def, st, ok := s.agentSessions(w, r)
	if !ok {
		return
	}
	id := r.PathValue("session")
	tr, err := st.Read(r.Context(), id)
	switch {
	case errors.Is(err, agentcli.ErrSessionNotFound):
		writeError(w, http.StatusNotFound, "agent "+def.ID+": session "+id+" not found")
	case err != nil:
		writeError(w, http.StatusInternalServerError, "read session "+id+" of "+def.ID+": "+err.Error())
	default:
		writeJSON(w, http.StatusOK, tr)
	}
}
