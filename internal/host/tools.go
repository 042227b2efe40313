package host

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// SandboxMode is the Bash sandbox mode of a session: the flag, else the
// configuration file's, else auto.
func SandboxMode(flag string, cfg config.Config) (sandbox.Mode, error) {
	return sandbox.ParseMode(cmp.Or(flag, cfg.Sandbox, "auto"))
}

// FileLimits is the file tools' limits from the configuration file.
func FileLimits(cfg config.Config) tool.FileLimits {
	return tool.FileLimits{MaxFileBytes: cfg.MaxFileBytes}
}

// SandboxConfig is the sandbox configuration of every session: the mode,
// and Maestro's own executable as the sandbox helper (main calls
// sandbox.RunHelperIfRequested), which Landlock and the per-command
// limits need.
func SandboxConfig(mode sandbox.Mode, log *slog.Logger) sandbox.Config {
	exe, _ := os.Executable() // empty on failure: no helper, which New logs
	cfg := sandbox.Config{Mode: mode, HelperPath: exe, Logger: log}
	if home, err := config.Home(nil); err == nil {
		cfg.Protected = []string{home} // model keys and session logs
	}
	return cfg
}

// Probe sets a sandbox up in the background, once: after the startup
// frames are written (Start), or when first needed (Wait). One probe may
// serve many sessions (maestro serve).
type Probe struct {
	cfg  sandbox.Config
	once sync.Once
	done chan struct{}
	sb   *sandbox.Sandbox
	err  error
}

// NewProbe returns a probe of cfg, not started.
func NewProbe(cfg sandbox.Config) *Probe {
	return &Probe{cfg: cfg, done: make(chan struct{})}
}

// Start starts the probe if it has not started yet.
func (p *Probe) Start() {
	p.once.Do(func() {
		go func() {
			defer close(p.done)
			p.sb, p.err = sandbox.New(context.Background(), p.cfg)
		}()
	})
}

// Wait starts the probe if needed and returns its sandbox.
func (p *Probe) Wait(ctx context.Context) (*sandbox.Sandbox, error) {
	p.Start()
	select {
	case <-p.done:
		return p.sb, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lazyTools is WorkspaceTools once the probe is done, with extra (the web
// tools of web.sessions) and the tools of
// every configured MCP server (those that start; the others are
// reported): the first call waits for them, later calls return the same
// set.
func lazyTools(root *workspace.Root, probe *Probe, lim tool.FileLimits, mcps *mcp.Manager, extra ...tool.Tool) func(context.Context) (*tool.Set, error) {
	tools := sync.OnceValues(func() (*tool.Set, error) {
		sb, err := probe.Wait(context.Background())
		if err != nil {
			return nil, err
		}
		set := tool.NewWorkspaceSet(root, sb, lim)
		for _, t := range extra {
			set.Add(t)
		}
		remote, err := mcps.All(context.Background())
		if err != nil {
			return nil, err
		}
		for _, t := range remote {
			set.Add(t)
		}
		return set, nil
	})
	// A caller stops waiting when its context ends (Ctrl-C during a slow
	// MCP server's start, which runs under no caller's context since its
	// result is shared); the start goes on, and ends with the session.
	return func(ctx context.Context) (*tool.Set, error) {
		type result struct {
			set *tool.Set
			err error
		}
		done := make(chan result, 1)
		go func() {
			set, err := tools()
			done <- result{set, err}
		}()
		select {
		case r := <-done:
			return r.set, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// lazySystemPrompt is the default system prompt of a session whose tools
// come from lazyTools: it names the sandbox and the tools once the probe
// is done (empty when it failed).
func lazySystemPrompt(root *workspace.Root, probe *Probe, tools func(context.Context) (*tool.Set, error)) func(context.Context) string {
	return func(ctx context.Context) string {
		kind := ""
		if sb, err := probe.Wait(context.Background()); err == nil {
			kind = sb.Kind()
		}
		var names []string
		if set, err := tools(ctx); err == nil {
			names = set.Names()
		}
		return agent.SystemPrompt(agent.Environment{Workspace: root.Dir(), Sandbox: kind, Tools: names, Date: time.Now().Format("2006-01-02")})
	}
}

// WorkspaceDir resolves a workspace flag: the directory (default: the
// current one), absolute, which must exist.
func WorkspaceDir(flag string) (string, error) {
	dir := flag
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("current directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--workspace %q: %w", flag, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("--workspace %q: %w", dir, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("--workspace %q is not a directory", dir)
	}
	return abs, nil
}

// OpenWorkspace opens dir as an agent's workspace, refusing one that is
// or holds Maestro's home: the file tools run outside the sandbox, so the
// agent could read the model keys in config.yaml and change the session
// logs (maestro run started in the home directory).
func OpenWorkspace(dir, home string) (*workspace.Root, error) {
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := checkHome(root, home); err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// HoldsHomeError is the refusal of a workspace that is or holds Maestro's
// home, or the data directory (Home names the one it holds).
type HoldsHomeError struct{ Dir, Home string }

func (e *HoldsHomeError) Error() string {
	return fmt.Sprintf("workspace %s holds Maestro's home %s (model keys, session logs), which the agent could read and change: run Maestro in a project directory, or set MAESTRO_HOME outside the workspace", e.Dir, e.Home)
}

// checkHome refuses root when it is or holds one of homes (Maestro's
// home, the data directory with the sessions' logs and serve's database).
// Every session's workspace passes it, the ones a caller opened under its
// own policy (a serve session's workspaceRoot) too.
func checkHome(root *workspace.Root, homes ...string) error {
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	for _, home := range homes {
		if home == "" {
			continue
		}
		if _, inside := workspace.Within(real(root.Dir()), real(home)); inside {
			return &HoldsHomeError{Dir: root.Dir(), Home: home}
		}
	}
	return nil
}

// storeDirs is what utility watches and searches must not report: the
// session store holding the log at sessDir (Maestro's own log), should
// the user's MAESTRO_HOME or data directory lie inside the workspace.
func storeDirs(sessDir string) []string {
	dir := filepath.Dir(sessDir)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return []string{dir}
}

// envInt reads a positive integer from the environment (0 when unset or
// invalid).
func envInt(getenv func(string) string, key string) int64 {
	n, err := strconv.ParseInt(getenv(key), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
