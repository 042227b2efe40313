// Package sandbox runs shell commands for the Bash tool in isolation.
//
// A Sandbox is created once (New probes bubblewrap) and then builds one
// fresh, isolated *exec.Cmd per command. Three kinds exist:
//
//   - "bwrap": bubblewrap gives every command a private root with read-only
//     system directories, the workspace bound read-write at its own path, a
//     private /tmp, no network (unless allowed), a cleared environment and no
//     capabilities.
//   - "fallback": bubblewrap is unavailable and the mode is auto. Commands run
//     on the host, but are parsed first and held to a command allowlist and
//     the workspace path scope, with a scrubbed environment. This is a policy
//     guard, not a security boundary.
//   - "off": isolation was switched off by configuration; commands run on the
//     host with the host environment.
//
// In every kind, runtime package installs, privilege escalation, persistent
// system changes, downloads piped into interpreters and permission-loosening
// chmod are rejected with a *PolicyError before anything runs.
package sandbox

import (
	"context"
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
	// ModeAuto uses bubblewrap when it works and the hardened fallback
	// otherwise (with a logged warning).
	ModeAuto Mode = "auto"
	// ModeAlways requires bubblewrap; New fails when it is missing or broken.
	ModeAlways Mode = "always"
	// ModeOff runs commands without isolation (a logged, explicit decision).
	ModeOff Mode = "off"
)

// Modes lists the valid modes in display order.
func Modes() []Mode { return []Mode{ModeAuto, ModeAlways, ModeOff} }

// ParseMode parses a mode name; the empty string means ModeAuto.
func ParseMode(s string) (Mode, error) {
	m := Mode(strings.ToLower(strings.TrimSpace(s)))
	if m == "" {
		return ModeAuto, nil
	}
	if slices.Contains(Modes(), m) {
		return m, nil
	}
	return "", fmt.Errorf("invalid sandbox mode %q: valid modes are auto, always and off", s)
}

// Kinds reported by (*Sandbox).Kind.
const (
	KindBwrap    = "bwrap"
	KindFallback = "fallback"
	KindOff      = "off"
)

// Config configures New.
type Config struct {
	// Mode is auto, always or off; empty means auto.
	Mode Mode
	// BwrapPath is the bubblewrap binary; empty means "bwrap" looked up in
	// PATH.
	BwrapPath string
	// AllowedCommands is the command allowlist. Nil means the default list
	// (DefaultAllowedCommands), which is enforced only in the fallback. A
	// non-nil list is an explicit restriction and is enforced in every mode.
	// Entries are command names ("grep") or a name and a subcommand
	// ("git log"), which allows only that subcommand.
	AllowedCommands []string
	// Network lets sandboxed commands use the host network (bwrap only; the
	// fallback cannot block the network).
	Network bool
	// EnvAllow names host environment variables passed into the sandbox
	// (exact names, or a prefix ending in "*"). In off mode the whole host
	// environment is passed anyway.
	EnvAllow []string
	// Logger receives the sandbox decisions; nil discards them.
	Logger *slog.Logger
}

// Sandbox builds isolated commands. It is immutable after New and safe for
// concurrent use.
type Sandbox struct {
	kind         string
	bwrap        string   // bubblewrap binary (bwrap kind)
	bwrapVersion string   // "bubblewrap 0.8.0"
	systemArgs   []string // bwrap arguments for the system directories
	shell        string   // absolute path of bash (or sh)
	allowed      []string // explicit allowlist from Config, nil if none
	network      bool
	envAllow     []string
	log          *slog.Logger
	reason       string // why the fallback was chosen
}

// probeTimeout bounds each bubblewrap probe run.
const probeTimeout = 5 * time.Second

// New checks the environment and returns a sandbox of the kind the mode
// asks for. With ModeAlways a missing or broken bubblewrap is an error (fail
// closed); with ModeAuto it selects the fallback and logs a warning.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	mode := cfg.Mode
	if mode == "" {
		mode = ModeAuto
	}
	if _, err := ParseMode(string(mode)); err != nil {
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
		shell:    shell,
		network:  cfg.Network,
		envAllow: slices.Clone(cfg.EnvAllow),
		log:      log,
	}
	if cfg.AllowedCommands != nil {
		s.allowed = slices.Clone(cfg.AllowedCommands)
	}
	if mode == ModeOff {
		s.kind = KindOff
		log.Warn("bash sandbox disabled by configuration (mode off): commands run on the host without isolation, with the host environment; package installs are still rejected")
		return s, nil
	}

	bin, version, perr := probeBwrap(ctx, cfg.BwrapPath, shell)
	if perr == nil {
		s.kind = KindBwrap
		s.bwrap = bin
		s.bwrapVersion = version
		s.systemArgs = systemBinds()
		log.Info("bash sandbox: bubblewrap", "path", bin, "version", version, "network", cfg.Network)
		return s, nil
	}
	if mode == ModeAlways {
		return nil, fmt.Errorf("bubblewrap is required by sandbox mode always but %v; install it (apt-get install bubblewrap) or use --sandbox auto", perr)
	}
	s.kind = KindFallback
	s.reason = perr.Error()
	log.Warn("bash sandbox: bubblewrap unavailable, using the hardened fallback (command allowlist, workspace path scope, scrubbed environment; no filesystem or network isolation)",
		"reason", perr.Error())
	return s, nil
}

// Kind reports how commands are isolated: "bwrap", "fallback" or "off".
func (s *Sandbox) Kind() string { return s.kind }

// Network reports whether sandboxed commands may use the network. In the
// fallback and off kinds the network cannot be blocked, so it reports true.
func (s *Sandbox) Network() bool { return s.kind != KindBwrap || s.network }

// BwrapVersion is the probed bubblewrap version line (bwrap kind only).
func (s *Sandbox) BwrapVersion() string { return s.bwrapVersion }

// FallbackReason says why bubblewrap was not used (fallback kind only).
func (s *Sandbox) FallbackReason() string { return s.reason }

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
// given options, or nil when no allowlist applies (bwrap and off kinds
// without an explicit list).
func (s *Sandbox) AllowedCommands(opts CommandOptions) []string {
	switch {
	case opts.AllowedCommands != nil:
		return slices.Clone(opts.AllowedCommands)
	case s.allowed != nil:
		return slices.Clone(s.allowed)
	case s.kind == KindFallback:
		return DefaultAllowedCommands()
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
	if s.kind == KindFallback {
		p.scope = &ws
	}
	if err := p.check(command); err != nil {
		s.log.Debug("bash sandbox: command rejected", "reason", err.Reason)
		return err
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
	var cmd *exec.Cmd
	switch s.kind {
	case KindBwrap:
		cmd = exec.CommandContext(ctx, s.bwrap, s.bwrapArgs(ws, command, opts.Env)...)
		cmd.Env = []string{} // bwrap itself needs nothing; --setenv sets the inside
	case KindFallback:
		cmd = exec.CommandContext(ctx, s.shell, "-c", command)
		cmd.Dir = ws.path
		cmd.Env = envList(s.sandboxEnv(ws.path, os.TempDir(), opts.Env))
	default:
		cmd = exec.CommandContext(ctx, s.shell, "-c", command)
		cmd.Dir = ws.path
		cmd.Env = hostEnv(opts.Env)
	}
	setProcessGroup(cmd)
	return cmd, nil
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
