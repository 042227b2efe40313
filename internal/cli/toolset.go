package cli

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/gitinfo"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

// sandboxMode is the Bash sandbox mode of a command: its --sandbox flag,
// else the config file's, else auto.
func sandboxMode(flag string, cfg config.Config) (sandbox.Mode, error) {
	return sandbox.ParseMode(cmp.Or(flag, cfg.Sandbox, "auto"))
}

// fileLimits is the file tools' limits from the configuration file.
func fileLimits(cfg config.Config) tool.FileLimits {
	return tool.FileLimits{MaxFileBytes: cfg.MaxFileBytes}
}

// sandboxConfig is the sandbox configuration of every command: the mode,
// and Maestro's own executable as the sandbox helper (main calls
// sandbox.RunHelperIfRequested), which Landlock and the per-command
// limits need.
func sandboxConfig(mode sandbox.Mode, log *slog.Logger) sandbox.Config {
	exe, _ := os.Executable() // empty on failure: no helper, which New logs
	cfg := sandbox.Config{Mode: mode, HelperPath: exe, Logger: log}
	if home, err := config.Home(nil); err == nil {
		cfg.Protected = []string{home} // model keys and session logs
	}
	return cfg
}

// workspaceTools is Maestro's tool set over root (Read, Write, Edit with
// lim, Glob, Grep, Bash in sb).
func workspaceTools(root *workspace.Root, sb *sandbox.Sandbox, lim tool.FileLimits) *tool.Set {
	return tool.NewWorkspaceSet(root, sb, lim)
}

// lazyWorkspaceTools is workspaceTools once the sandbox probe is done: the
// first call waits for it, later calls return the same set.
func lazyWorkspaceTools(root *workspace.Root, probe *sandboxProbe, lim tool.FileLimits) func() (*tool.Set, error) {
	return sync.OnceValues(func() (*tool.Set, error) {
		sb, err := probe.wait(context.Background())
		if err != nil {
			return nil, err
		}
		return workspaceTools(root, sb, lim), nil
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

// sessionRuntime is what every live session of Maestro's own loop shares
// (maestro headless, serve's session API): the chosen model, the
// workspace tools and utilities over root, the session log, the default
// system prompt, and the attachment limits from the environment. Callers
// set what differs (history, thinking, approval mode, limits).
func sessionRuntime(choice *providers.Choice, root *workspace.Root, probe *sandboxProbe, lim tool.FileLimits, sess *session.Session, getenv func(string) string, log *slog.Logger) runtime.Config {
	tools := lazyWorkspaceTools(root, probe, lim)
	return runtime.Config{
		Provider: choice.Provider,
		Executor: choice.Executor,
		Retry:    &llm.RetryPolicy{},
		Tools:    func(context.Context) (*tool.Set, error) { return tools() },
		Utilities: func(emit func(protocol.Message)) runtime.Utilities {
			return utility.New(utility.Config{Root: root, Emit: emit, Logger: log, Hide: sessionStoreDirs(sess)})
		},
		Log:                sess,
		SessionID:          sess.ID(),
		Cwd:                root.Dir(),
		GitBranch:          gitinfo.Branch(root.Dir(), log),
		SystemPrompt:       lazySystemPrompt(root, probe, tools),
		MaxAttachmentBytes: envInt(getenv, "MAESTRO_HEADLESS_MAX_ATTACHMENT_BYTES"),
		MaxAttachmentChars: int(envInt(getenv, "MAESTRO_HEADLESS_MAX_TEXT_CHARS")),
		Logger:             log,
	}
}

// sessionStoreDirs is what utility watches and searches must not report:
// the session store holding sess (Maestro's own log), should the user's
// MAESTRO_HOME or data directory lie inside the workspace.
func sessionStoreDirs(sess *session.Session) []string {
	dir := filepath.Dir(sess.Dir())
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return []string{dir}
}

// openAgentWorkspace opens dir as an agent's workspace, refusing one that
// is or holds Maestro's home: the file tools run outside the sandbox, so
// the agent could read the model keys in config.yaml and change the
// session logs (maestro run started in the home directory).
func openAgentWorkspace(dir, home string) (*workspace.Root, error) {
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, err
	}
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	if _, inside := workspace.Within(real(root.Dir()), real(home)); inside {
		root.Close()
		return nil, fmt.Errorf("workspace %s holds Maestro's home %s (model keys, session logs), which the agent could read and change: run Maestro in a project directory, or set MAESTRO_HOME outside the workspace", root.Dir(), home)
	}
	return root, nil
}
