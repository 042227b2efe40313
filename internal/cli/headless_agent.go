package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/maestro-run/maestro/internal/agentcli"
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
func startAgentHeadless(io *IOStreams, o headlessOptions, log *slog.Logger, store *session.Store) (*headless, error) {
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
		SessionID: o.Resume,
	}
	p := a.Provider()
	sess, err := store.Create(session.Meta{Workspace: root.Dir(), Provider: p.Name(), Model: p.Model(), ExecutorType: protocol.ExecutorLive})
	if err != nil {
		root.Close()
		return nil, err
	}
	rt, err := runtime.New(runtime.Config{
		Provider: p,
		Executor: protocol.ExecutorLive,
		Tools:    func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil },
		Turn:     a.Turn,
		Utilities: func(emit func(protocol.Message)) runtime.Utilities {
			return utility.New(utility.Config{Root: root, Emit: emit, Logger: log})
		},
		Log:                sess,
		SessionID:          sess.ID(),
		Cwd:                root.Dir(),
		GitBranch:          gitBranch(root.Dir()),
		System:             o.System,
		ApprovalMode:       protocol.ApprovalMode(o.ApprovalMode),
		MaxAttachmentBytes: envInt(io.Getenv, "MAESTRO_HEADLESS_MAX_ATTACHMENT_BYTES"),
		MaxAttachmentChars: int(envInt(io.Getenv, "MAESTRO_HEADLESS_MAX_TEXT_CHARS")),
		Logger:             log,
	})
	if err != nil {
		sess.Close()
		root.Close()
		return nil, err
	}
	// The CLI sandboxes its own tools: the probe only satisfies the
	// transport's start hook.
	sb := &sandboxProbe{cfg: sandbox.Config{Mode: sandbox.ModeOff, Logger: log}, done: make(chan struct{})}
	return &headless{rt: rt, sess: sess, root: root, sandbox: sb}, nil
}
