package cli

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// sandboxMode is the Bash sandbox mode of a command: its --sandbox flag,
// else the config file's, else auto.
func sandboxMode(flag string, cfg config.Config) (sandbox.Mode, error) {
	return sandbox.ParseMode(cmp.Or(flag, cfg.Sandbox, "auto"))
}

// workspaceTools is Maestro's tool set over root (Read, Write, Edit, Glob,
// Grep, Bash in sb).
func workspaceTools(root *workspace.Root, sb *sandbox.Sandbox) *tool.Set {
	return tool.NewSet(
		tool.NewRead(root), tool.NewWrite(root), tool.NewEdit(root),
		tool.NewGlob(root), tool.NewGrep(root),
		tool.NewBash(sb, root.Dir(), tool.BashOptions{}),
	)
}

// lazyWorkspaceTools is workspaceTools once the sandbox probe is done: the
// first call waits for it, later calls return the same set.
func lazyWorkspaceTools(root *workspace.Root, probe *sandboxProbe) func() (*tool.Set, error) {
	return sync.OnceValues(func() (*tool.Set, error) {
		sb, err := probe.wait(context.Background())
		if err != nil {
			return nil, err
		}
		return workspaceTools(root, sb), nil
	})
}

// lazySystemPrompt is the default system prompt of a session whose tools
// come from lazyWorkspaceTools: it names the sandbox and the tools once
// the probe is done (empty when it failed).
func lazySystemPrompt(root *workspace.Root, probe *sandboxProbe, tools func() (*tool.Set, error)) func(context.Context) string {
	return func(context.Context) string {
		kind := ""
		if sb, err := probe.wait(context.Background()); err == nil {
			kind = sb.Kind()
		}
		var names []string
		if set, err := tools(); err == nil {
			names = set.Names()
		}
		return agent.SystemPrompt(agent.Environment{Workspace: root.Dir(), Sandbox: kind, Tools: names, Date: time.Now().Format("2006-01-02")})
	}
}
