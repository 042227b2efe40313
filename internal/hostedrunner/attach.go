package hostedrunner

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// boundSessions is the session API's view of a hosted runner: one runtime,
// bound to the runner's session (wire contract §11.6: a request naming another
// session is refused).
type boundSessions struct{ r *Runner }

// Sessions returns the runner's sessions for httpattach.Config.Sessions.
func (r *Runner) Sessions() httpattach.Sessions { return boundSessions{r} }

// Create returns the bound runtime. A workspaceRoot must exist (400) and
// be the runner's root (409 runtime_owned_elsewhere).
func (s boundSessions) Create(_ context.Context, req httpattach.CreateRequest) (*runtime.Runtime, string, error) {
	if req.WorkspaceRoot != "" {
		st, err := os.Stat(req.WorkspaceRoot)
		if err != nil || !st.IsDir() {
			return nil, "", &httpattach.Error{Status: http.StatusBadRequest, Code: httpattach.CodeBadRequest,
				Message: fmt.Sprintf("workspaceRoot %q is not an existing directory", req.WorkspaceRoot)}
		}
		if !sameDir(req.WorkspaceRoot, s.r.cfg.WorkspaceRoot) {
			return nil, "", &httpattach.Error{Status: http.StatusConflict, Code: httpattach.CodeRuntimeOwnedElsewhere,
				Message: fmt.Sprintf("Hosted runner is bound to workspace root %s", s.r.cfg.WorkspaceRoot)}
		}
	}
	return s.r.rt, s.r.sessionID, nil
}

// Get returns the bound runtime for the runner's session id only.
func (s boundSessions) Get(id string) (*runtime.Runtime, bool) {
	if id != s.r.sessionID {
		return nil, false
	}
	return s.r.rt, true
}

// MsgOwnedElsewhere starts the text of the 409 runtime_owned_elsewhere
// answer to a request naming another session than the runner's.
const MsgOwnedElsewhere = "Hosted runner is bound to another session"

// Missing implements httpattach.SessionMissing: a hosted runner serves
// one session, so any other session id is owned elsewhere (contract
// §11.6): 409 runtime_owned_elsewhere, with the reference server's
// ErrorInfo details naming the runner and both sessions (§11.5).
func (s boundSessions) Missing(id string) error {
	cfg := s.r.cfg
	_, draining, _ := s.r.Ready()
	md := map[string]string{
		"runner_session_id":            cfg.RunnerSessionID,
		"maestro_session_id":           s.r.sessionID,
		"requested_maestro_session_id": id,
		"draining":                     strconv.FormatBool(draining),
	}
	for k, v := range map[string]string{"owner_instance_id": cfg.OwnerInstanceID, "workspace_id": cfg.WorkspaceID, "agent_run_id": cfg.AgentRunID} {
		if v != "" {
			md[k] = v
		}
	}
	return &httpattach.Error{
		Status: http.StatusConflict, Code: httpattach.CodeRuntimeOwnedElsewhere,
		Message: fmt.Sprintf("%s: %s (this runner serves %s)", MsgOwnedElsewhere, id, s.r.sessionID),
		Details: []httpattach.ErrorInfo{{Type: httpattach.ErrorInfoType, Reason: httpattach.CodeRuntimeOwnedElsewhere,
			Domain: "maestro.hosted_runner", Metadata: md}},
	}
}

func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// NewAttach builds the session API of the runner (auth per the runner's
// configuration), tells it the restore outcome, and returns it; Close it
// after the runner.
func NewAttach(r *Runner, cfg httpattach.Config) *httpattach.Handler {
	cfg.Sessions = r.Sessions()
	cfg.Token = r.cfg.AuthToken
	cfg.RequireAuth = r.cfg.RequireAuth
	h := httpattach.NewHandler(cfg)
	r.SetAttach(h)
	return h
}
