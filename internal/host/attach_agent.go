package host

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"

	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// createAgent is create for a body naming an agent CLI (agent, and
// agentSession to resume the CLI's own session or a Maestro session that
// ran on it): the session's prompts run on the CLI, as `maestro headless
// --agent` runs them (docs/protocol.md, "Headless sessions on an agent
// CLI"). The CLI brings its own model and thinking: thinkingLevel is
// refused; model, when set, is the CLI's.
func (a *attached) createAgent(ctx context.Context, req httpattach.CreateRequest) (*runtime.Runtime, string, error) {
	if req.ThinkingLevel != "" {
		return nil, "", badCreate("thinkingLevel applies to Maestro's own agent loop, not to agent %s; drop it", req.Agent)
	}
	root, herr := a.policy.open(req.WorkspaceRoot)
	if herr != nil {
		return nil, "", herr
	}
	dir := root.Dir()
	s, err := a.h.NewSession(ctx, Spec{Root: root, Agent: req.Agent, Resume: req.AgentSession, Model: req.Model,
		ApprovalMode: req.ApprovalMode, BufferFrames: req.ReplayRing})
	if err != nil {
		if req.WorkspaceRoot == "" {
			os.Remove(dir) // the fresh directory, still empty
		}
		if hh, ok := errors.AsType[*HoldsHomeError](err); ok {
			return nil, "", &httpattach.Error{Status: http.StatusForbidden, Code: httpattach.CodeWorkspaceViolation, Message: hh.Error()}
		}
		if se, ok := errors.AsType[*SpecError](err); ok {
			return nil, "", badCreate("%s", bodyWords.Replace(se.Msg))
		}
		return nil, "", createFailed("create the session on agent "+req.Agent, err)
	}
	a.onRefused(req, s)
	a.h.log.Info("headless session created", "session", s.ID(), "workspace", dir, "agent", req.Agent, "agent_session", req.AgentSession)
	return s.Runtime, s.ID(), nil
}

// bodyWords names the create body's fields where a spec error names the
// flags of maestro headless: over HTTP an unknown agent said '--agent
// "nope": unknown agent', a flag the client never used.
var bodyWords = strings.NewReplacer("--agent", "agent", "--resume", "agentSession", "--model", "model")
