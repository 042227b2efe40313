// Package sandbox runs shell commands for the Bash tool in isolation.
//
// A Sandbox is created once (New probes what this host offers) and then
// builds one fresh, isolated *exec.Cmd per command. Its kinds:
//
//   - "bwrap": bubblewrap gives every command a private root with read-only
//     system directories, the workspace bound read-write at its own path, a
//     private /tmp and /proc, new PID and network namespaces (no network
//     unless allowed), a cleared environment and no capabilities.
//   - "landlock": where bubblewrap is missing or cannot create namespaces,
//     a re-executed helper confines the command with Landlock: the
//     workspace and a private temporary directory read-write, the system
//     directories read-only, everything else (home, other tasks, Maestro's
//     state) denied; TCP bind and connect denied (ABI 4+); signals and
//     abstract unix sockets scoped to the command (ABI 6+); no_new_privs; a
//     scrubbed environment.
//   - "unavailable": mode auto found neither; every command is refused
//     with an *UnavailableError saying how to get a sandbox.
//   - "off": isolation was switched off by configuration; commands run on
//     the host with the host environment.
//
// With a helper (Config.HelperPath), every kind also applies Limits: a pids
// cgroup (or RLIMIT_NPROC), RLIMIT_FSIZE and RLIMIT_CPU, and the whole
// process tree, setsid daemons included, is killed when the command ends.
//
// In every kind, runtime package installs, privilege escalation, persistent
// system changes, downloads piped into interpreters and permission-loosening
// chmod are rejected with a *PolicyError before anything runs, and an
// explicit command allowlist is enforced. These rules are a policy layer,
// not a boundary: a determined command can get around a parser; what stops
// it is the sandbox (and, for downloads, its lack of network).
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Mode selects how commands are isolated (configuration key
// safety.bash_sandbox, flag --sandbox).
type Mode string

// The sandbox modes.
const (
	// ModeAuto uses the best sandbox available: bubblewrap, else Landlock,
	// else none, in which case Bash is refused (never run unconfined).
	ModeAuto Mode = "auto"
	// ModeBwrap requires bubblewrap; New fails when it is missing or broken.
	ModeBwrap Mode = "bwrap"
	// ModeLandlock requires Landlock and the helper; New fails without them.
	ModeLandlock Mode = "landlock"
	// ModeOff runs commands without isolation (a logged, explicit decision).
	ModeOff Mode = "off"
	// ModeAlways is the former name of ModeBwrap, still accepted.
	ModeAlways = ModeBwrap
)

// Modes lists the valid modes in display order.
func Modes() []Mode { return []Mode{ModeAuto, ModeBwrap, ModeLandlock, ModeOff} }

// ParseMode parses a mode name; the empty string means ModeAuto and
// "always" (the former name of bwrap) means ModeBwrap.
func ParseMode(s string) (Mode, error) {
	m := Mode(strings.ToLower(strings.TrimSpace(s)))
	switch {
	case m == "":
		return ModeAuto, nil
	case m == "always":
		return ModeBwrap, nil
	case slices.Contains(Modes(), m):
		return m, nil
	}
	return "", fmt.Errorf("invalid sandbox mode %q: valid modes are auto, bwrap, landlock and off (always is accepted for bwrap)", truncate(s, 64))
}

// truncate bounds user input echoed in an error.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Kinds reported by (*Sandbox).Kind.
const (
	KindBwrap       = "bwrap"
	KindLandlock    = "landlock"
	KindUnavailable = "unavailable"
	KindOff         = "off"
)

// bwrapSystemPaths are where bubblewrap is looked for when no path is
// configured. PATH is not searched: removing a directory from PATH must
// not silently downgrade the sandbox.
func bwrapSystemPaths() []string {
	return []string{"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"}
}

// Config configures New.
type Config struct {
	// Mode is auto, bwrap, landlock or off; empty means auto.
	Mode Mode
	// BwrapPath is the bubblewrap binary; empty means the first of
	// /usr/bin/bwrap, /bin/bwrap and /usr/local/bin/bwrap that exists
	// (never a PATH lookup).
	BwrapPath string
	// HelperPath is the executable re-executed as the sandbox helper: it
	// must call RunHelperIfRequested first thing (Maestro's main does;
	// pass os.Executable()). Landlock needs it, and so do the Limits in
	// every kind. Empty means no helper: no landlock kind, and bwrap and
	// off commands run without the limits (logged).
	HelperPath string
	// Limits bound each command; zero fields take the defaults.
	Limits Limits
	// AllowedCommands is an explicit command allowlist, enforced in every
	// kind (a policy, not a boundary). Nil means none. Entries are command
	// names ("grep") or a name and a subcommand ("git log"), which allows
	// only that subcommand.
	AllowedCommands []string
	// Network lets sandboxed commands use the host network. Without it
	// bwrap has no network at all and landlock denies TCP (Landlock) and
	// every other inet socket (Landlock from ABI 10, seccomp below it).
	Network bool
	// EnvAllow names host environment variables passed into the sandbox
	// (exact names, or a prefix ending in "*"). In off mode the whole host
	// environment is passed anyway.
	EnvAllow []string
	// Logger receives the sandbox decisions; nil discards them.
	Logger *slog.Logger
	// Protected are Maestro's own directories (its home: model keys in
	// config.yaml, session logs). A command whose workspace is one of them
	// or holds one (maestro run started in the home directory) is refused
	// in the bwrap and landlock kinds: the sandbox would hand them to the
	// command read-write.
	Protected []string
}

// Sandbox builds isolated commands. It is immutable after New and safe for
// concurrent use.
type Sandbox struct {
	kind         string
	bwrap        string   // bubblewrap binary (bwrap kind)
	bwrapVersion string   // "bubblewrap 0.8.0"
	systemArgs   []string // bwrap arguments for the system directories
	landlockABI  int      // landlock kind
	shell        string   // absolute path of bash (or sh)
	helper       string   // the helper executable, "" when none
	helperErr    error    // why there is no helper
	limits       Limits
	cgroup       *cgroupRoot // where per-command pids cgroups go, nil when none
	allowed      []string    // explicit allowlist from Config, nil if none
	network      bool
	envAllow     []string
	protected    []string
	log          *slog.Logger
	reason       string // why no sandbox is available (unavailable kind)
	notice       string // what the user should know of the kind chosen (Notice)
}

// probeTimeout bounds each probe run.
const probeTimeout = 5 * time.Second

// New checks the environment and returns a sandbox of the kind the mode
// asks for. Modes bwrap and landlock fail closed when their sandbox cannot
// run here; auto picks bwrap, else landlock, else the unavailable kind,
// which refuses every command.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	mode := cfg.Mode
	if mode == "" {
		mode = ModeAuto
	}
	mode, err := ParseMode(string(mode))
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	shell, err := findShell()
	if err != nil {
		return nil, fmt.Errorf("creating the bash sandbox: %w", err)
	}
	s := &Sandbox{
		shell:     shell,
		network:   cfg.Network,
		envAllow:  slices.Clone(cfg.EnvAllow),
		limits:    cfg.Limits.withDefaults(),
		protected: slices.Clone(cfg.Protected),
		log:       log,
	}
	if cfg.AllowedCommands != nil {
		s.allowed = slices.Clone(cfg.AllowedCommands)
	}
	s.setUpHelper(ctx, cfg.HelperPath)

	if mode == ModeOff {
		s.kind = KindOff
		log.Warn("bash sandbox disabled by configuration (mode off): commands run on the host without isolation, with the host environment; package installs are still rejected")
		return s, nil
	}
	var bwrapErr, landlockErr error
	if mode == ModeAuto || mode == ModeBwrap {
		if bwrapErr = s.useBwrap(ctx, cfg.BwrapPath); bwrapErr == nil {
			return s, nil
		}
		if mode == ModeBwrap {
			return nil, fmt.Errorf("bubblewrap is required by sandbox mode bwrap but %v; install it (apt-get install bubblewrap), or use --sandbox landlock or auto", bwrapErr)
		}
	}
	if landlockErr = s.useLandlock(ctx); landlockErr == nil {
		if mode == ModeAuto {
			log.Warn("bash sandbox: bubblewrap unavailable, using Landlock", "reason", bwrapErr.Error(), "abi", s.landlockABI)
			s.notice = fmt.Sprintf("Bash sandbox: bubblewrap is not used (%v), so commands are confined with Landlock, which isolates less (docs/sandbox.md); with bubblewrap working (apt-get install bubblewrap) commands get a private root", bwrapErr)
		}
		return s, nil
	}
	if mode == ModeLandlock {
		return nil, fmt.Errorf("Landlock is required by sandbox mode landlock but %v; use a kernel with Landlock enabled, or use --sandbox bwrap or auto", landlockErr)
	}
	s.kind = KindUnavailable
	s.reason = fmt.Sprintf("no sandbox can run here (bubblewrap: %v; Landlock: %v). Install bubblewrap (apt-get install bubblewrap) or use a kernel with Landlock enabled (Linux 5.13+, landlock in lsm=), or pass --sandbox off to run commands without isolation knowingly", bwrapErr, landlockErr)
	log.Error("bash sandbox unavailable: Bash commands will be refused", "reason", s.reason)
	s.notice = "Bash is unavailable, every command will be refused: " + s.reason
	return s, nil
}

// setUpHelper probes the helper and the pids cgroup; without them the
// limits cannot be applied, which is logged.
func (s *Sandbox) setUpHelper(ctx context.Context, path string) {
	if path == "" {
		s.helperErr = errors.New("no sandbox helper is configured (Config.HelperPath)")
		s.log.Warn("bash sandbox: no helper configured; per-command limits (processes, file size, CPU) and the process-tree kill are off, and Landlock cannot be used")
		return
	}
	if err := probeHelper(ctx, path); err != nil {
		s.helperErr = err
		s.log.Warn("bash sandbox: the helper does not run; per-command limits are off and Landlock cannot be used", "error", err.Error())
		return
	}
	s.helper = path
	root, err := findCgroupRoot()
	if err != nil {
		s.log.Info("bash sandbox: no writable pids cgroup; the process limit is RLIMIT_NPROC (which does not bind root)", "reason", err.Error())
	} else {
		s.cgroup = &root
	}
	sweepStale(s.cgroup)
}

func (s *Sandbox) useBwrap(ctx context.Context, path string) error {
	bin, version, err := probeBwrap(ctx, path, s.shell)
	if err != nil {
		return err
	}
	s.kind = KindBwrap
	s.bwrap = bin
	s.bwrapVersion = version
	s.systemArgs = systemBinds()
	s.log.Info("bash sandbox: bubblewrap", "path", bin, "version", version, "network", s.network)
	return nil
}

func (s *Sandbox) useLandlock(ctx context.Context) error {
	if s.helper == "" {
		return fmt.Errorf("the sandbox helper is not available: %w", s.helperErr)
	}
	abi, err := landlockABI()
	if err != nil {
		return err
	}
	s.kind = KindLandlock
	s.landlockABI = abi
	if err := s.trialRun(ctx); err != nil {
		s.kind, s.landlockABI = "", 0
		return fmt.Errorf("a trial confined run failed: %w", err)
	}
	s.log.Info("bash sandbox: Landlock", "abi", abi, "network", s.network)
	return nil
}

// trialRun runs `true` in the sandbox in a scratch workspace.
func (s *Sandbox) trialRun(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "maestro-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("creating a probe workspace: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd, err := s.Command(ctx, dir, "true", CommandOptions{})
	if err != nil {
		return err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, truncate(strings.TrimSpace(string(out)), 500))
	}
	return nil
}

// Kind reports how commands are isolated: "bwrap", "landlock",
// "unavailable" or "off".
func (s *Sandbox) Kind() string { return s.kind }

// Network reports whether sandboxed commands may reach the network. Off
// cannot block it; landlock blocks TCP only from ABI 4 on (and UDP only
// from ABI 10), so it reports true unless both are blocked.
func (s *Sandbox) Network() bool {
	switch s.kind {
	case KindBwrap:
		return s.network
	case KindLandlock:
		return s.network || s.landlockABI < 10
	case KindUnavailable:
		return false
	}
	return true
}

// TCPBlocked reports whether sandboxed commands are denied TCP connections.
func (s *Sandbox) TCPBlocked() bool {
	switch s.kind {
	case KindBwrap:
		return !s.network
	case KindLandlock:
		return !s.network && s.landlockABI >= 4
	}
	return false
}

// LandlockABI is the Landlock ABI level in use (landlock kind only).
func (s *Sandbox) LandlockABI() int { return s.landlockABI }

// Limited reports whether commands run under the Limits and have their
// process tree killed at the end (a helper is configured and works).
func (s *Sandbox) Limited() bool { return s.helper != "" }

// BwrapVersion is the probed bubblewrap version line (bwrap kind only).
func (s *Sandbox) BwrapVersion() string { return s.bwrapVersion }

// Notice is the warning a terminal shows its user at start-up, "" when
// there is none: in mode auto, that bubblewrap could not be used and why
// (the landlock and unavailable kinds). New logs it too, but a command
// without a logger (maestro run) showed only the kind, with no reason.
func (s *Sandbox) Notice() string { return s.notice }

// UnavailableReason says why no sandbox could be used (unavailable kind).
func (s *Sandbox) UnavailableReason() string { return s.reason }

// UnavailableError is a command refused because no sandbox is available.
// Its message is meant for the model and the user.
type UnavailableError struct {
	// Reason says what is missing and how to get it.
	Reason string
}

func (e *UnavailableError) Error() string { return "Bash is unavailable: " + e.Reason }

// CommandOptions are per-command settings.
type CommandOptions struct {
	// Env adds or overrides environment variables for this command.
	Env map[string]string
	// AllowedCommands, when non-nil, replaces the sandbox's allowlist for
	// this command (for example a workflow movement's allowed_commands). It
	// is enforced in every mode. An empty non-nil list allows only the safe
	// shell builtins.
	AllowedCommands []string
}

// PolicyError is a command rejected by the sandbox policy before it ran.
// Its message is meant for the model.
type PolicyError struct {
	// Reason says what was rejected and what to do instead.
	Reason string
}

func (e *PolicyError) Error() string { return "command rejected by the sandbox policy: " + e.Reason }

// AllowedCommands returns the allowlist in force for a command with the
// given options, or nil when no allowlist applies.
func (s *Sandbox) AllowedCommands(opts CommandOptions) []string {
	switch {
	case opts.AllowedCommands != nil:
		return slices.Clone(opts.AllowedCommands)
	case s.allowed != nil:
		return slices.Clone(s.allowed)
	}
	return nil
}

// Check applies the policy to a command without building it. The error is
// a *PolicyError for a rejection, another error for a bad workdir.
func (s *Sandbox) Check(workdir, command string, opts CommandOptions) error {
	ws, err := resolveWorkdir(workdir)
	if err != nil {
		return err
	}
	return s.check(ws, command, opts)
}

func (s *Sandbox) check(ws workspace, command string, opts CommandOptions) error {
	p := &policy{}
	if list := s.AllowedCommands(opts); list != nil {
		p.allow = newAllowlist(list)
	}
	if err := p.check(command); err != nil {
		s.log.Debug("bash sandbox: command rejected", "reason", err.Reason)
		return err
	}
	return nil
}

// checkProtected refuses a workspace that is or holds one of Maestro's own
// directories (Config.Protected), unless isolation is off.
func (s *Sandbox) checkProtected(ws workspace) error {
	if s.kind == KindOff {
		return nil
	}
	for _, p := range s.protected {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			real = filepath.Clean(p) // not created yet: compare as given
		}
		if rel, err := filepath.Rel(ws.real, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return &PolicyError{Reason: fmt.Sprintf("the workspace %s holds Maestro's own directory %s (model keys, session logs), which the sandbox would hand to the command; run Maestro in a project directory, or set MAESTRO_HOME outside the workspace", ws.path, p)}
		}
	}
	return nil
}

// Command builds the command to run command (bash syntax) in workdir, the
// workspace root. The returned command runs in its own process group;
// cancelling ctx kills the whole group and Wait returns within about half
// a second even if a descendant still holds the output pipes. A policy
// rejection is a *PolicyError (show it to the model); other errors mean the
// workdir is unusable.
func (s *Sandbox) Command(ctx context.Context, workdir, command string, opts CommandOptions) (*exec.Cmd, error) {
	ws, err := resolveWorkdir(workdir)
	if err != nil {
		return nil, err
	}
	if err := s.check(ws, command, opts); err != nil {
		return nil, err
	}
	if err := s.checkProtected(ws); err != nil {
		return nil, err
	}
	var prog string
	var args, env []string
	var ll *landlockSpec
	switch s.kind {
	case KindUnavailable:
		return nil, &UnavailableError{Reason: s.reason}
	case KindBwrap:
		prog, args = s.bwrap, s.bwrapArgs(ws, command, opts.Env)
		env = []string{} // bwrap itself needs nothing; --setenv sets the inside
	case KindLandlock:
		prog, args = s.shell, []string{"-c", command}
		env = envList(s.sandboxEnv(ws.path, os.TempDir(), opts.Env)) // the helper sets TMPDIR
		ll = s.landlockRules(ws)
	default:
		prog, args = s.shell, []string{"-c", command}
		env = hostEnv(opts.Env)
	}
	if s.helper == "" {
		cmd := exec.CommandContext(ctx, prog, args...)
		cmd.Dir = ws.path
		cmd.Env = env
		setProcessGroup(cmd)
		return cmd, nil
	}
	spec := helperSpec{Limits: s.limits, Landlock: ll}
	if s.cgroup != nil {
		name, err := s.cgroup.newName()
		if err != nil {
			return nil, err
		}
		spec.Cgroup, spec.CgroupV2 = name, s.cgroup.v2
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the sandbox helper spec: %w", err)
	}
	cmd := exec.CommandContext(ctx, s.helper, append([]string{helperArg, string(specJSON), "--", prog}, args...)...)
	cmd.Dir = ws.path
	cmd.Env = env // the helper passes its environment on to the program
	// Maestro's death (SIGKILL included) sends the helper SIGTERM, which
	// it handles as a cancellation: it kills the command's cgroup and
	// every descendant it adopted. A SIGKILL would leave them running
	// (the helper's own Pdeathsig reaches the program only, not what
	// the program started). The signal follows the OS thread that
	// started the helper; Maestro's threads never exit (no goroutine of
	// Maestro's process ends while locked to its thread).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error {
		if spec.Cgroup != "" {
			// Kill the tree from here: the helper may be past helping.
			_ = killCgroup(spec.Cgroup, spec.CgroupV2)
		}
		// The helper kills its descendants and removes its temporary
		// directory on SIGTERM; WaitDelay kills it if it does not exit in
		// time.
		return cmd.Process.Signal(syscall.SIGTERM)
	}
	cmd.WaitDelay = waitDelay
	return cmd, nil
}

// landlockRules is the Landlock policy of a command in ws.
func (s *Sandbox) landlockRules(ws workspace) *landlockSpec {
	// /proc as a whole stays closed: Landlock cannot limit it to the
	// command's own processes, and the environ of Maestro (an ancestor)
	// would be readable. Only host-wide, process-free files are opened.
	read := []string{"/usr", "/dev/random", "/dev/urandom",
		"/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/uptime", "/proc/version", "/proc/filesystems"}
	read = append(read, systemLinkDirs...)
	read = append(read, etcEntries...)
	if s.network {
		read = append(read, networkEtcEntries...)
	}
	return &landlockSpec{
		ABI:     s.landlockABI,
		Read:    read,
		Write:   []string{ws.real, "/dev/null", "/dev/zero", "/dev/full", "/dev/tty"},
		Network: s.network,
	}
}

// waitDelay bounds how long Wait waits for output pipes after the process
// exited or was killed.
const waitDelay = 500 * time.Millisecond

// setProcessGroup puts cmd in its own process group and makes cancellation
// kill the whole group.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return KillProcessGroup(cmd) }
	cmd.WaitDelay = waitDelay
}

// KillProcessGroup sends SIGKILL to the process group of a started command
// built by Command (for example to remove background processes left behind
// after the command's shell exited). A group that no longer exists yields
// os.ErrProcessDone.
func KillProcessGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return errors.New("killing the process group: command not started")
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	if err != nil {
		return fmt.Errorf("killing process group %d: %w", cmd.Process.Pid, err)
	}
	return nil
}

// workspace is a validated workdir.
type workspace struct {
	path string // absolute, clean, as given (the path commands see)
	real string // with symlinks resolved (the directory bound)
}

func resolveWorkdir(dir string) (workspace, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return workspace{}, fmt.Errorf("sandbox workdir %q: must be an absolute path", dir)
	}
	clean := filepath.Clean(dir)
	if clean == "/" {
		return workspace{}, errors.New("sandbox workdir: the filesystem root cannot be a workspace")
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return workspace{}, fmt.Errorf("sandbox workdir %s: %w", clean, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return workspace{}, fmt.Errorf("sandbox workdir %s: %w", clean, err)
	}
	if !fi.IsDir() {
		return workspace{}, fmt.Errorf("sandbox workdir %s: not a directory", clean)
	}
	if real == "/" {
		return workspace{}, fmt.Errorf("sandbox workdir %s: resolves to the filesystem root", clean)
	}
	return workspace{path: clean, real: real}, nil
}

// findShell locates bash (or, failing that, sh), preferring the system
// locations, which are also present inside the bubblewrap sandbox.
func findShell() (string, error) {
	for _, p := range []string{"/usr/bin/bash", "/bin/bash", "/usr/bin/sh", "/bin/sh"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	for _, name := range []string{"bash", "sh"} {
		if p, err := exec.LookPath(name); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				return abs, nil
			}
		}
	}
	return "", errors.New("no shell found: neither bash nor sh is installed")
}
