package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/gitinfo"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

// startAgentHeadless starts a headless session whose prompts run on the
// agent CLI o.Agent (runtime.AgentCLI). The CLI brings its own tools,
// sandbox and model: the flags of Maestro's own loop are refused.
//
// The CLI's session id is stored in the session's metadata (agent,
// agent_session) as soon as the CLI reports it. --resume takes a Maestro
// session id (resumed: sess when the caller opened it already), whose
// agent, model, workspace and CLI session are reused, and whose logged
// conversation seeds a fresh CLI session if the CLI lost its own; an id
// that is no Maestro session is taken as the CLI's own session id.
func startAgentHeadless(io *IOStreams, o headlessOptions, log *slog.Logger, store *session.Store, resumed *session.Session) (_ *headless, err error) {
	sess := resumed
	defer func() {
		if err != nil && sess != nil {
			sess.Close()
		}
	}()
	cliSession := ""
	if sess == nil && o.Resume != "" {
		s, err := store.Open(o.Resume)
		switch {
		case err == nil:
			sess = s
		case errors.Is(err, session.ErrNotFound):
			cliSession = o.Resume // the CLI's own session id
		default:
			return nil, fmt.Errorf("resume: %w", err)
		}
	}
	var history []llm.Message
	if sess != nil {
		m := sess.Meta()
		switch {
		case m.Agent == "":
			return nil, usageErr("--resume %s: the session ran on Maestro's own loop (%s/%s), not on an agent CLI; resume it without --agent", o.Resume, m.Provider, m.Model)
		case o.Agent != "" && o.Agent != m.Agent:
			return nil, usageErr("--resume %s: the session ran on --agent %s, not %s; drop --agent or give %s", o.Resume, m.Agent, o.Agent, m.Agent)
		case o.Model != "":
			return nil, usageErr("--resume continues a session with its own model (%s); drop --model", m.Model)
		}
		o.Agent = m.Agent
		if m.Model != "default" {
			o.Model = m.Model
		}
		if o.Workspace == "" {
			o.Workspace = m.Workspace
		}
		cliSession = m.AgentSession
		history = sess.History()
	}
	for flag, set := range map[string]bool{"--replay": o.Replay != "", "--client-tools": o.ClientTools != "",
		"--sandbox": o.Sandbox != "", "--max-iterations": o.MaxIterations != 0, "--thinking": o.Thinking != ""} {
		if set {
			return nil, usageErr("%s applies to Maestro's own agent loop, not to --agent %s; drop it", flag, o.Agent)
		}
	}
	reg, err := agentRegistry(io)
	if err != nil {
		return nil, err
	}
	def, ok := reg.Get(o.Agent)
	if !ok {
		return nil, usageErr("--agent %q: unknown agent (known: %s)", o.Agent, strings.Join(reg.IDs(), ", "))
	}
	model := o.Model
	if i := strings.IndexByte(model, '/'); i >= 0 && model[:i] == def.ID {
		model = model[i+1:]
	}
	bin, err := def.Resolve(io.Getenv("PATH"))
	if err != nil {
		return nil, fmt.Errorf("--agent %s: %w (install it, or see maestro agents list)", def.ID, err)
	}
	env := os.Environ()
	if p := io.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	dir, err := workspaceDir(o.Workspace)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	a := &runtime.AgentCLI{
		Executor:  &agentcli.Executor{Def: def, Path: bin, Env: env},
		Dir:       root.Dir(),
		Model:     model,
		SessionID: cliSession,
		History:   history,
	}
	p := a.Provider()
	if sess == nil {
		sess, err = store.Create(session.Meta{Workspace: root.Dir(), Provider: p.Name(), Model: p.Model(),
			ExecutorType: protocol.ExecutorLive, Agent: def.ID, AgentSession: cliSession})
		if err != nil {
			root.Close()
			return nil, err
		}
	}
	a.OnSession = func(id string) {
		if err := sess.SetAgentSession(id); err != nil {
			log.Warn("store the agent CLI's session id", "session", sess.ID(), "agent_session", id, "err", err)
		}
	}
	rt, err := runtime.New(runtime.Config{
		Provider: p,
		Executor: protocol.ExecutorLive,
		Tools:    func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil },
		Turn:     a.Turn,
		Utilities: func(emit func(protocol.Message)) runtime.Utilities {
			return utility.New(utility.Config{Root: root, Emit: emit, Logger: log, Hide: sessionStoreDirs(sess)})
		},
		Log:                sess,
		SessionID:          sess.ID(),
		Cwd:                root.Dir(),
		GitBranch:          gitinfo.Branch(root.Dir(), log),
		System:             o.System,
		ApprovalMode:       protocol.ApprovalMode(o.ApprovalMode),
		MaxAttachmentBytes: envInt(io.Getenv, "MAESTRO_HEADLESS_MAX_ATTACHMENT_BYTES"),
		MaxAttachmentChars: int(envInt(io.Getenv, "MAESTRO_HEADLESS_MAX_TEXT_CHARS")),
		Logger:             log,
	})
	if err != nil {
		root.Close()
		return nil, err
	}
	// The CLI sandboxes its own tools: the probe only satisfies the
	// transport's start hook.
	sb := &sandboxProbe{cfg: sandbox.Config{Mode: sandbox.ModeOff, Logger: log}, done: make(chan struct{})}
	return &headless{rt: rt, sess: sess, root: root, sandbox: sb}, nil
}
