// Package hostedrunner is `maestro hosted-runner`: one headless session per
// process, served over HTTP + SSE to the controllers and viewers a control
// plane attaches (wire contract §11, §13, §14, §17 of
// docs/spec/headless-wire-contract.md). Around the session routes of
// internal/transport/httpattach it adds the remote-runner identity, health and
// readiness, drain with its snapshot manifest, restore from a manifest at
// start-up, and the fixture process contract's deterministic agent.
package hostedrunner

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/httpedge"
)

// Default listen address (the Rust runner's).
const (
	DefaultHost = "0.0.0.0"
	DefaultPort = "8080"
)

// Flags are the command-line values; empty means "not given". Port and
// RequireAuth are strings so that "not given" differs from a value.
type Flags struct {
	RunnerSessionID  string
	WorkspaceRoot    string
	Listen           string
	Host             string
	Port             string
	OwnerInstanceID  string
	WorkspaceID      string
	AgentRunID       string
	MaestroSessionID string
	AttachAudience   string
	SnapshotRoot     string
	StateDir         string
	AuthTokenFile    string
	// RequireAuth is "", "true" or "false".
	RequireAuth string
	// AllowedHosts are public names clients may use in Host (repeatable
	// --allowed-host).
	AllowedHosts []string
	// MaxConnections bounds the open connections (--max-connections).
	MaxConnections string
	// Fixture forces the deterministic agent.
	Fixture bool
}

// Config is the resolved configuration (wire contract §11.6): every value from
// its flag, else from the first environment variable set among its
// aliases, else the default.
type Config struct {
	RunnerSessionID string
	// WorkspaceRoot is absolute, cleaned and existing.
	WorkspaceRoot    string
	Listen           string // host:port
	OwnerInstanceID  string
	WorkspaceID      string
	AgentRunID       string
	MaestroSessionID string
	AttachAudience   string
	// SnapshotRoot is absolute (default <workspace>/.maestro/runner-snapshots).
	SnapshotRoot string
	// StateDir is the directory of Maestro's own live state (the session
	// log and its lock), absolute; default <MAESTRO_HOME>/hosted-runner,
	// out of the agent's workspace. A state dir inside the workspace is
	// allowed: it is then reached without following links and hidden from
	// file watches and searches.
	StateDir string
	// RestoreManifest is absolute when set (relative paths resolve under
	// the workspace root).
	RestoreManifest string
	// AuthToken is the bearer token /api/* requires when RequireAuth.
	AuthToken   string
	RequireAuth bool
	// AllowedHosts are the public names clients may use in Host besides
	// the loopback names and IP literals (DNS-rebinding protection, see
	// httpedge.Policy).
	AllowedHosts []string
	// MaxConns bounds the connections open at once, event streams
	// included (httpedge.ConnLimit; default httpedge.DefaultMaxConns).
	MaxConns int
	// Fixture selects the deterministic agent (MAESTRO_HOSTED_RUNNER_FIXTURE=1
	// or --fixture); the CLI also selects it when no model is configured.
	Fixture bool
}

// Environment variable names, in precedence order per setting.
var (
	EnvRunnerSessionID  = []string{"MAESTRO_RUNNER_SESSION_ID", "REMOTE_RUNNER_SESSION_ID"}
	EnvWorkspaceRoot    = []string{"MAESTRO_WORKSPACE_ROOT", "WORKSPACE_ROOT"}
	EnvListen           = []string{"MAESTRO_HOSTED_RUNNER_LISTEN"}
	EnvHost             = []string{"MAESTRO_HOSTED_RUNNER_HOST"}
	EnvPort             = []string{"MAESTRO_HOSTED_RUNNER_PORT", "PORT"}
	EnvOwnerInstanceID  = []string{"MAESTRO_REMOTE_RUNNER_OWNER_INSTANCE_ID", "REMOTE_RUNNER_OWNER_INSTANCE_ID"}
	EnvWorkspaceID      = []string{"MAESTRO_REMOTE_RUNNER_WORKSPACE_ID", "MAESTRO_WORKSPACE_ID"}
	EnvAgentRunID       = []string{"MAESTRO_AGENT_RUN_ID"}
	EnvMaestroSessionID = []string{"MAESTRO_SESSION_ID"}
	EnvAttachAudience   = []string{"MAESTRO_ATTACH_AUDIENCE"}
	EnvSnapshotRoot     = []string{"MAESTRO_REMOTE_RUNNER_SNAPSHOT_ROOT", "REMOTE_RUNNER_SNAPSHOT_ROOT"}
	EnvStateDir         = []string{"MAESTRO_HOSTED_RUNNER_STATE_DIR"}
	EnvRestoreManifest  = []string{"MAESTRO_REMOTE_RUNNER_RESTORE_MANIFEST", "REMOTE_RUNNER_RESTORE_MANIFEST"}
	EnvAuthToken        = []string{"MAESTRO_HOSTED_RUNNER_AUTH_TOKEN", "MAESTRO_WEB_API_KEY"}
	EnvAuthTokenFile    = []string{"MAESTRO_HOSTED_RUNNER_AUTH_TOKEN_FILE", "MAESTRO_WEB_API_KEY_FILE"}
	EnvRequireAuth      = []string{"MAESTRO_WEB_REQUIRE_KEY"}
	EnvAllowedHosts     = []string{"MAESTRO_HOSTED_RUNNER_ALLOWED_HOSTS"}
	EnvMaxConnections   = []string{"MAESTRO_HOSTED_RUNNER_MAX_CONNECTIONS"}
	EnvFixture          = []string{"MAESTRO_HOSTED_RUNNER_FIXTURE", "MAESTRO_RUST_HOSTED_CONFORMANCE"}
)

// pick returns the flag value, else the first non-empty variable.
func pick(flag string, getenv func(string) string, names []string) string {
	if flag != "" {
		return flag
	}
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

func either(flag string, names []string) string {
	return flag + " or " + strings.Join(names, " / ")
}

// MaxRunnerSessionID bounds the runner session id, which names the
// drain's files (<id>-<time>.session.jsonl within 255 bytes); a longer
// one was accepted and every drain failed. MaxLaunchID bounds the Maestro
// session id and the agent run id, as maestro headless does.
const (
	MaxRunnerSessionID = 200
	MaxLaunchID        = 256
)

// checkID refuses an id longer than max bytes, or with control
// characters or spaces (it goes into URLs, file names and logs): maestro
// headless refuses them in MAESTRO_SESSION_ID, the runner took them.
func checkID(v string, max int) error {
	switch {
	case len(v) > max:
		return fmt.Errorf("expected an id of at most %d bytes, found %d", max, len(v))
	case strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || r == utf8.RuneError }) >= 0:
		return fmt.Errorf("%q: expected an id without spaces or control characters (UTF-8)", v)
	}
	return nil
}

// Load resolves the configuration from flags and the environment. Errors
// name the flag and the variables that could have supplied the value.
func Load(f Flags, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var c Config
	c.RunnerSessionID = pick(f.RunnerSessionID, getenv, EnvRunnerSessionID)
	if c.RunnerSessionID == "" {
		return c, fmt.Errorf("runner session id is required: set %s", either("--runner-session-id", EnvRunnerSessionID))
	}
	root := pick(f.WorkspaceRoot, getenv, EnvWorkspaceRoot)
	if root == "" {
		return c, fmt.Errorf("workspace root is required: set %s", either("--workspace-root", EnvWorkspaceRoot))
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return c, fmt.Errorf("workspace root %q: %w", root, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return c, fmt.Errorf("workspace root %q (--workspace-root / MAESTRO_WORKSPACE_ROOT) must be an existing directory: %w", root, err)
	}
	if !st.IsDir() {
		return c, fmt.Errorf("workspace root %q (--workspace-root / MAESTRO_WORKSPACE_ROOT) must be an existing directory: it is a file", root)
	}
	c.WorkspaceRoot = abs

	if c.Listen, err = listenAddr(f, getenv); err != nil {
		return c, err
	}
	c.OwnerInstanceID = pick(f.OwnerInstanceID, getenv, EnvOwnerInstanceID)
	c.WorkspaceID = pick(f.WorkspaceID, getenv, EnvWorkspaceID)
	c.AgentRunID = pick(f.AgentRunID, getenv, EnvAgentRunID)
	c.MaestroSessionID = pick(f.MaestroSessionID, getenv, EnvMaestroSessionID)
	for _, id := range []struct {
		v, flag string
		env     []string
		max     int
	}{
		{c.RunnerSessionID, "--runner-session-id", EnvRunnerSessionID, MaxRunnerSessionID},
		{c.MaestroSessionID, "--maestro-session-id", EnvMaestroSessionID, MaxLaunchID},
		{c.AgentRunID, "--agent-run-id", EnvAgentRunID, MaxLaunchID},
	} {
		if err := checkID(id.v, id.max); err != nil {
			return c, fmt.Errorf("%s: %w", either(id.flag, id.env), err)
		}
	}
	c.AttachAudience = pick(f.AttachAudience, getenv, EnvAttachAudience)

	c.SnapshotRoot = pick(f.SnapshotRoot, getenv, EnvSnapshotRoot)
	if c.SnapshotRoot == "" {
		c.SnapshotRoot = filepath.Join(c.WorkspaceRoot, ".maestro", "runner-snapshots")
	} else if !filepath.IsAbs(c.SnapshotRoot) {
		c.SnapshotRoot = filepath.Join(c.WorkspaceRoot, c.SnapshotRoot)
	}
	if c.StateDir, err = stateDir(f, getenv); err != nil {
		return c, err
	}
	if m := pick("", getenv, EnvRestoreManifest); m != "" {
		if !filepath.IsAbs(m) {
			m = filepath.Join(c.WorkspaceRoot, m)
		}
		c.RestoreManifest = filepath.Clean(m)
	}

	if c.AuthToken, err = authToken(f, getenv); err != nil {
		return c, err
	}
	loopback, _ := httpedge.LoopbackListen(c.Listen)
	c.RequireAuth = !loopback
	if v := pick(f.RequireAuth, getenv, EnvRequireAuth); v != "" {
		b, err := parseBool(v)
		if err != nil {
			return c, fmt.Errorf("--require-auth / MAESTRO_WEB_REQUIRE_KEY %q: %w", v, err)
		}
		c.RequireAuth = b
	}
	if c.RequireAuth && c.AuthToken == "" {
		return c, fmt.Errorf("auth is required (listening on %s): set %s, or %s, or listen on 127.0.0.1",
			c.Listen, strings.Join(EnvAuthToken, " / "), either("--auth-token-file", EnvAuthTokenFile))
	}
	if !c.RequireAuth && !loopback {
		return c, fmt.Errorf("--require-auth=false / MAESTRO_WEB_REQUIRE_KEY=0: listening on %s (not loopback) without a token would let anyone who reaches the port run commands; set %s, or %s, or listen on 127.0.0.1",
			c.Listen, strings.Join(EnvAuthToken, " / "), either("--auth-token-file", EnvAuthTokenFile))
	}
	c.AllowedHosts = f.AllowedHosts
	if len(c.AllowedHosts) == 0 {
		if v := pick("", getenv, EnvAllowedHosts); v != "" {
			for _, h := range strings.Split(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					c.AllowedHosts = append(c.AllowedHosts, h)
				}
			}
		}
	}
	if err := c.Edge().Validate(); err != nil {
		return c, fmt.Errorf("%w (--allowed-host / MAESTRO_HOSTED_RUNNER_ALLOWED_HOSTS)", err)
	}
	c.MaxConns = httpedge.DefaultMaxConns
	if v := pick(f.MaxConnections, getenv, EnvMaxConnections); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("%s %q: expected a positive number of connections", either("--max-connections", EnvMaxConnections), v)
		}
		c.MaxConns = n
	}

	c.Fixture = f.Fixture
	if v := pick("", getenv, EnvFixture); v != "" {
		b, err := parseBool(v)
		if err != nil {
			return c, fmt.Errorf("MAESTRO_HOSTED_RUNNER_FIXTURE / MAESTRO_RUST_HOSTED_CONFORMANCE %q: %w", v, err)
		}
		c.Fixture = c.Fixture || b
	}
	return c, nil
}

// stateDir resolves the state directory: --state-dir, else
// MAESTRO_HOSTED_RUNNER_STATE_DIR, else <MAESTRO_HOME>/hosted-runner
// (MAESTRO_HOME defaulting to ~/.maestro).
func stateDir(f Flags, getenv func(string) string) (string, error) {
	dir := pick(f.StateDir, getenv, EnvStateDir)
	if dir == "" {
		home, err := config.Home(getenv)
		if err != nil {
			return "", fmt.Errorf("state directory: set %s or MAESTRO_HOME: %w", either("--state-dir", EnvStateDir), err)
		}
		dir = filepath.Join(home, "hosted-runner")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("state directory %q: %w", dir, err)
	}
	return abs, nil
}

// listenAddr resolves the listen address: --listen, else --host/--port
// (missing halves from the environment or the defaults), else
// MAESTRO_HOSTED_RUNNER_LISTEN, else the host and port variables. A bare
// port means all interfaces.
func listenAddr(f Flags, getenv func(string) string) (string, error) {
	var addr, from string
	switch {
	case f.Listen != "":
		addr, from = f.Listen, "--listen"
	case f.Host != "" || f.Port != "":
		host := cmpOr(pick(f.Host, getenv, EnvHost), DefaultHost)
		port := cmpOr(pick(f.Port, getenv, EnvPort), DefaultPort)
		addr, from = net.JoinHostPort(host, port), "--host/--port"
	case pick("", getenv, EnvListen) != "":
		addr, from = pick("", getenv, EnvListen), "MAESTRO_HOSTED_RUNNER_LISTEN"
	default:
		host := cmpOr(pick("", getenv, EnvHost), DefaultHost)
		port := cmpOr(pick("", getenv, EnvPort), DefaultPort)
		addr, from = net.JoinHostPort(host, port), "MAESTRO_HOSTED_RUNNER_HOST / MAESTRO_HOSTED_RUNNER_PORT / PORT"
	}
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		addr = net.JoinHostPort(DefaultHost, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("listen address %q (%s): expected host:port or a bare port: %v", addr, from, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("listen address %q (%s): port %q is not a number from 0 to 65535", addr, from, port)
	} else {
		port = strconv.FormatUint(n, 10)
	}
	if host == "" {
		host = DefaultHost
	}
	return net.JoinHostPort(host, port), nil
}

func authToken(f Flags, getenv func(string) string) (string, error) {
	if f.AuthTokenFile == "" {
		if t := pick("", getenv, EnvAuthToken); t != "" {
			return t, nil
		}
	}
	file := pick(f.AuthTokenFile, getenv, EnvAuthTokenFile)
	if file == "" {
		return "", nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("auth token file (%s): %w", either("--auth-token-file", EnvAuthTokenFile), err)
	}
	t := strings.TrimSpace(string(data))
	if t == "" {
		return "", fmt.Errorf("auth token file %s is empty", file)
	}
	return t, nil
}

// Edge is the runner's HTTP edge policy (internal/httpedge): the Host
// allowlist, cross-origin refusal and the token on /api/ and /debug/;
// /healthz, /readyz and /.well-known/… need no token (wire contract §13), and
// every error is in the headless contract's shape.
func (c Config) Edge() *httpedge.Policy {
	return &httpedge.Policy{
		Listen: c.Listen, AllowedHosts: c.AllowedHosts, Token: c.AuthToken, RequireAuth: c.RequireAuth || c.AuthToken != "",
		Open: func(r *http.Request) bool {
			p := r.URL.Path
			return !(strings.HasPrefix(p, "/api/") || p == "/api" || strings.HasPrefix(p, "/debug/"))
		},
		Surface: func(*http.Request) httpedge.Surface { return httpedge.Headless },
		MaxBody: func(*http.Request) int64 { return maxRequestBody },
	}
}

// maxRequestBody bounds every request body at the edge (the attach routes'
// 1 MB, wire contract §8.3; drain is bounded to MaxDrainBody on its own).
const maxRequestBody = 1 << 20

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errors.New("expected 1/0, true/false, yes/no or on/off")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
