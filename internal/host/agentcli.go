package host

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/workspace"
)

// AgentExecutor resolves the agent CLI id (a built-in or one of
// <home>/agents/*.yaml) to an executor of its binary on the PATH of the
// host's environment. from says where the id came from in errors
// (`--agent "x"`; for a resumed session, its stored agent).
func (h *Host) AgentExecutor(id, from string) (*agentcli.Executor, error) {
	// An invalid user file is left out: it fails only the run that asks
	// for an agent it would have defined.
	reg, problems := agentcli.Load(filepath.Join(h.home, "agents"))
	if reg == nil {
		return nil, problems
	}
	def, ok := reg.Get(id)
	if !ok && problems != nil {
		return nil, fmt.Errorf("%s: unknown agent (known: %s); definitions left out:\n%w", from, strings.Join(reg.IDs(), ", "), problems)
	}
	if !ok {
		return nil, specErr("%s: unknown agent (known: %s)", from, strings.Join(reg.IDs(), ", "))
	}
	bin, err := def.Resolve(h.getenv("PATH"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (install it, or see maestro agents list)", from, err)
	}
	env := os.Environ()
	if p := h.getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	return &agentcli.Executor{Def: def, Path: bin, Env: env, SlashCommandsDir: agentcli.SlashCommandsDir(filepath.Join(h.home, "agents"))}, nil
}

// AgentPermission is the permission level of agent CLIs: flag (a
// --permission value) when set, else the configuration's
// agent_permission, else the default (edit).
func (h *Host) AgentPermission(flag string) (agentcli.Permission, error) {
	p, err := agentcli.ParsePermission(cmp.Or(flag, h.cfg.AgentPermission))
	if err != nil {
		return "", specErr("--permission: %v", err)
	}
	return p, nil
}

// agentSession assembles a session whose prompts run on the agent CLI
// spec.Agent (runtime.AgentCLI). The CLI brings its own tools, sandbox
// and model: the settings of Maestro's own loop are refused.
//
// The CLI's session id is stored in the session's metadata (agent,
// agent_session) as soon as the CLI reports it. A resumed Maestro
// session (sess) gives its agent, model, workspace and CLI session, and
// its logged conversation seeds a fresh CLI session if the CLI lost its
// own; a Resume id that is no Maestro session is the CLI's own id.
//
// It sets *sessp and *rootp to the log and workspace it opens: the caller
// closes them should it fail.
func (h *Host) agentSession(spec Spec, sessp **session.Session, rootp **workspace.Root) (*Session, error) {
	cliSession := ""
	var history []llm.Message
	if sess := *sessp; sess != nil {
		m := sess.Meta()
		switch {
		case spec.Agent != "" && spec.Agent != m.Agent:
			return nil, specErr("--resume %s: the session ran on --agent %s, not %s; drop --agent or give %s", spec.Resume, m.Agent, spec.Agent, m.Agent)
		case spec.Model != "":
			return nil, specErr("--resume continues a session with its own model (%s); drop --model", m.Model)
		}
		spec.Agent = m.Agent
		if m.Model != "default" {
			spec.Model = m.Model
		}
		if spec.Workspace == "" {
			spec.Workspace = m.Workspace
		}
		cliSession = m.AgentSession
		history = sess.History()
	} else {
		cliSession = spec.Resume // the CLI's own session id
	}
	for flag, set := range map[string]bool{"--replay": spec.Replay != "", "--client-tools": len(spec.ClientTools) > 0,
		"--sandbox": spec.Sandbox != "", "--max-iterations": spec.MaxIterations != 0, "--thinking": spec.Thinking != ""} {
		if set {
			return nil, specErr("%s applies to Maestro's own agent loop, not to --agent %s; drop it", flag, spec.Agent)
		}
	}
	level, err := h.AgentPermission(spec.Permission)
	if err != nil {
		return nil, err
	}
	from := fmt.Sprintf("--agent %q", spec.Agent)
	if *sessp != nil {
		// The user may not have named it: say where it comes from.
		from = fmt.Sprintf("--resume %s: the session ran on agent CLI %q", spec.Resume, spec.Agent)
	}
	x, err := h.AgentExecutor(spec.Agent, from)
	if err != nil {
		return nil, err
	}
	model := spec.Model
	if i := strings.IndexByte(model, '/'); i >= 0 && model[:i] == x.Def.ID {
		model = model[i+1:]
	}
	if model != "" && len(x.Def.Args.Model) == 0 {
		// The run would say "model x/foo" and never pass it.
		return nil, specErr("--model: %s takes no model (its definition, %s, has no args.model); drop --model", x.Def.ID, x.Def.Source)
	}
	if *rootp == nil {
		dir, err := WorkspaceDir(spec.Workspace)
		if err != nil {
			return nil, specErr("%v", err)
		}
		if *rootp, err = OpenWorkspace(dir, h.home); err != nil { // refuses a workspace holding the home
			return nil, fmt.Errorf("open workspace: %w", err)
		}
	}
	root := *rootp
	a := &runtime.AgentCLI{Executor: x, Dir: root.Dir(), Model: model, Permission: level, SessionID: cliSession, History: history}
	if *sessp == nil {
		if *sessp, err = h.store.Create(session.Meta{Workspace: root.Dir(), Provider: a.ProviderName(), Model: a.ModelName(),
			ExecutorType: protocol.ExecutorLive, Agent: x.Def.ID, AgentSession: cliSession}); err != nil {
			return nil, err
		}
	}
	sess := *sessp
	a.OnSession = func(id string) {
		if err := sess.SetAgentSession(id); err != nil {
			h.log.Warn("store the agent CLI's session id", "session", sess.ID(), "agent_session", id, "err", err)
		}
	}
	rcfg := h.runtimeConfig(sess, root, spec)
	rcfg.ProviderName, rcfg.Model, rcfg.Executor, rcfg.Turn = a.ProviderName(), a.ModelName(), protocol.ExecutorLive, a.Turn
	// The CLI sandboxes its own tools: the probe only answers Started.
	// Its warnings (mode off, no helper) would be about a Bash this
	// session never runs, so they are not logged.
	probe := NewProbe(sandbox.Config{Mode: sandbox.ModeOff, Logger: slog.New(slog.DiscardHandler)})
	return h.assemble(rcfg, sess, root, nil, probe, nil)
}
