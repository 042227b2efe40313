package utility

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/sandbox"
)

// command_exec limits (wire contract §10.1).
const (
	maxCommandLen  = 100_000
	maxEnvKeyLen   = 256
	maxEnvValueLen = 32_768
	defaultColumns = 80
	defaultRows    = 24
	// stdinTimeout bounds one write to a command's stdin.
	stdinTimeout = 10 * time.Second
)

// command is one utility command.
type command struct {
	m     *Manager
	id    string
	owner string
	seq   uint64

	allowStdin bool
	isPTY      bool
	proc       *exec.Cmd
	pgid       int
	session    *sandbox.Session // the supervisor's reports, when there is one
	done       chan struct{}    // closed once exited was emitted

	mu          sync.Mutex
	info        protocol.UtilityCommandStarted // as announced, with the current size
	shown       bool                           // started was emitted
	exited      bool                           // the main process was reaped
	reason      string
	terminating bool
	killTimer   *time.Timer
	output      tailBuffer

	stdinMu     sync.Mutex
	stdin       *os.File // pipe mode with allow_stdin; the pty master in pty mode
	stdinClosed bool
	tty         *os.File // pty master (pty mode)
	readers     []*os.File
}

func (c *command) announced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shown
}

func (c *command) snapshot() protocol.ActiveUtilityCommand {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.info
	return protocol.ActiveUtilityCommand{
		CommandID:         i.CommandID,
		Command:           i.Command,
		Cwd:               i.Cwd,
		ShellMode:         i.ShellMode,
		TerminalMode:      i.TerminalMode,
		PID:               clonePtr(i.PID),
		Columns:           clonePtr(i.Columns),
		Rows:              clonePtr(i.Rows),
		OwnerConnectionID: i.OwnerConnectionID,
		Output:            c.output.String(),
	}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// commandSpec is a validated utility_command_start.
type commandSpec struct {
	argv    []string
	dir     string
	env     []string
	pty     bool
	columns int
	rows    int
}

// CommandStart starts a utility command for the connection owner. It
// returns once utility_command_started has been emitted; output and
// utility_command_exited follow asynchronously. A command that cannot be
// executed (say, a missing program in direct mode) is reported as started
// and then exited with success false and the reason, as the reference
// server does.
func (m *Manager) CommandStart(ctx context.Context, owner string, req protocol.UtilityCommandStart) error {
	// Reserve the id while the command is validated and started.
	c, e := reserve(ctx, m, m.commands, req.CommandID, "utility_command_start", "Utility command", func(seq uint64) *command {
		return &command{m: m, id: req.CommandID, owner: owner, seq: seq, done: make(chan struct{})}
	})
	if e != nil {
		return e
	}

	spec, e := m.validateCommand(req)
	if e != nil {
		m.forget(c)
		close(c.done)
		return e
	}
	shellMode := req.ShellMode
	if shellMode == "" {
		shellMode = protocol.ShellModeShell
	}
	terminalMode := req.TerminalMode
	if terminalMode == "" {
		terminalMode = protocol.TerminalPipe
	}
	c.allowStdin = req.AllowStdin != nil && *req.AllowStdin
	c.isPTY = spec.pty
	c.info = protocol.UtilityCommandStarted{
		CommandID:         req.CommandID,
		Command:           req.Command,
		Cwd:               spec.dir,
		ShellMode:         shellMode,
		TerminalMode:      terminalMode,
		OwnerConnectionID: owner,
	}
	if spec.pty {
		c.info.Columns, c.info.Rows = &spec.columns, &spec.rows
	}

	m.sandboxNote.Do(func() {
		m.log.Info("utility commands run without the sandbox: they are the embedder's own terminal commands; "+
			"each runs with its working directory inside the workspace, in its own process group",
			"workspace", m.root.Dir())
	})

	startErr := c.start(spec)
	c.mu.Lock()
	if startErr == nil {
		pid := c.pgid
		c.info.PID = &pid
	}
	c.shown = true
	started := c.info
	// StopAll or Close ran while the process was being started.
	stopNow := startErr == nil && c.terminating
	c.mu.Unlock()
	m.emit(started)

	if startErr != nil {
		m.log.Warn("utility command could not start", "command_id", c.id, "err", startErr)
		m.forget(c)
		m.emit(protocol.UtilityCommandExited{CommandID: c.id, Success: false, Reason: startErr.Error()})
		close(c.done)
		return nil
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		c.run()
	}()
	if stopNow {
		c.mu.Lock()
		c.killGroup(syscall.SIGKILL)
		c.mu.Unlock()
	}
	return nil
}

// forget removes c from the running commands.
func (m *Manager) forget(c *command) {
	m.mu.Lock()
	if m.commands[c.id] == c {
		delete(m.commands, c.id)
	}
	m.mu.Unlock()
}

// validateCommand checks a start request against the contract and the
// workspace.
func (m *Manager) validateCommand(req protocol.UtilityCommandStart) (commandSpec, *Error) {
	var spec commandSpec
	if strings.TrimSpace(req.Command) == "" {
		return spec, errorf(400, "command is required and cannot be empty")
	}
	if hasControl(req.Command) {
		return spec, errorf(400, "Command contains invalid control characters")
	}
	if len(req.Command) > maxCommandLen {
		return spec, errorf(400, "Command is longer than %d characters", maxCommandLen)
	}
	if req.Cwd != "" {
		if strings.TrimSpace(req.Cwd) == "" {
			return spec, errorf(400, "cwd is required and cannot be empty")
		}
		if hasControl(req.Cwd) {
			return spec, errorf(400, "Working directory contains invalid characters")
		}
	}
	dir, e := m.resolveDir(req.Cwd)
	if e != nil {
		return spec, e
	}
	spec.dir = dir
	for k, v := range req.Env {
		if strings.TrimSpace(k) == "" {
			return spec, errorf(400, "environment variable key is required and cannot be empty")
		}
		if hasControl(k) || hasControl(v) || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return spec, errorf(400, "Environment variable %s contains invalid characters", k)
		}
		if len(k) > maxEnvKeyLen || len(v) > maxEnvValueLen {
			return spec, errorf(400, "Environment variable %s is too long (key at most %d, value at most %d characters)", k, maxEnvKeyLen, maxEnvValueLen)
		}
	}

	switch req.TerminalMode {
	case protocol.TerminalPTY:
		spec.pty = true
		spec.columns, spec.rows = defaultColumns, defaultRows
		if req.Columns != nil {
			if *req.Columns <= 0 {
				return spec, errorf(400, "Utility command columns must be a positive integer")
			}
			spec.columns = *req.Columns
		}
		if req.Rows != nil {
			if *req.Rows <= 0 {
				return spec, errorf(400, "Utility command rows must be a positive integer")
			}
			spec.rows = *req.Rows
		}
	default:
		if req.Columns != nil || req.Rows != nil {
			return spec, errorf(400, "Utility command columns and rows require terminal_mode=pty")
		}
	}

	if req.ShellMode == protocol.ShellModeDirect {
		argv, e := splitArgv(req.Command)
		if e != nil {
			return spec, e
		}
		spec.argv = argv
	} else {
		spec.argv = []string{userShell(), "-c", req.Command}
	}
	spec.env = commandEnv(req.Env, spec.pty)
	return spec, nil
}

// hasControl reports control characters other than tab, LF and CR (the
// characters the reference server rejects).
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7F {
			return true
		}
	}
	return false
}

// userShell returns the shell of shell mode: $SHELL when it names an
// executable file, else /bin/bash, else sh from PATH.
func userShell() string {
	if sh := os.Getenv("SHELL"); filepath.IsAbs(sh) && isExecutable(sh) {
		return sh
	}
	if isExecutable("/bin/bash") {
		return "/bin/bash"
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		return sh
	}
	return "/bin/sh"
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// commandEnv is the Maestro process environment overlaid with env; a pty
// command gets TERM=xterm-256color unless one is set.
func commandEnv(env map[string]string, pty bool) []string {
	base := os.Environ()
	out := make([]string, 0, len(base)+len(env)+1)
	hasTerm := false
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; ok {
			continue
		}
		hasTerm = hasTerm || k == "TERM"
		out = append(out, kv)
	}
	for k, v := range env {
		hasTerm = hasTerm || k == "TERM"
		out = append(out, k+"="+v)
	}
	if pty && !hasTerm {
		out = append(out, "TERM=xterm-256color")
	}
	return out
}

// lookup returns the command id for an operation of owner, checking
// ownership first: a command owned by another connection is refused
// whatever its state.
func (m *Manager) lookup(owner, id string) (*command, *Error) {
	m.mu.Lock()
	c := m.commands[id]
	m.mu.Unlock()
	if c != nil && c.owner != "" && c.owner != owner {
		return nil, errorf(403, "Headless command %s is owned by another connection", id)
	}
	if c != nil && !c.announced() {
		c = nil // still starting
	}
	return c, nil
}

// running is lookup for an operation that needs the command: an unknown
// or still starting one is a 404.
func (m *Manager) running(owner, id string) (*command, *Error) {
	c, e := m.lookup(owner, id)
	if e == nil && c == nil {
		e = errorf(404, "Utility command not found: %s", id)
	}
	return c, e
}

// CommandTerminate terminates a command: SIGTERM to its process group,
// then SIGKILL after KillGrace, or SIGKILL at once when req.Force is set.
// Terminating an unknown or already exited command is a no-op, as in the
// reference server.
func (m *Manager) CommandTerminate(owner string, req protocol.UtilityCommandTerminate) error {
	c, e := m.lookup(owner, req.CommandID)
	if e != nil {
		return e
	}
	if c == nil {
		return nil
	}
	force := req.Force != nil && *req.Force
	reason := ReasonTerminated
	if force {
		reason = ReasonForceTerminated
	}
	c.terminate(force, reason)
	return nil
}

// CommandStdin writes to a command's stdin; with req.EOF it then closes
// it (pty mode: sends the end-of-file character).
func (m *Manager) CommandStdin(owner string, req protocol.UtilityCommandStdin) error {
	c, e := m.running(owner, req.CommandID)
	if e != nil {
		return e
	}
	if !c.allowStdin {
		return errorf(400, "Utility command stdin is not enabled: %s", req.CommandID)
	}
	eof := req.EOF != nil && *req.EOF
	if e := c.writeStdin(req.Content, eof); e != nil {
		return e
	}
	return nil
}

// CommandResize resizes a pty command's terminal and emits
// utility_command_resized.
func (m *Manager) CommandResize(owner string, req protocol.UtilityCommandResize) error {
	c, e := m.running(owner, req.CommandID)
	if e != nil {
		return e
	}
	if !c.isPTY {
		return errorf(400, "Utility command resize is only supported for PTY commands: %s", req.CommandID)
	}
	if req.Columns <= 0 {
		return errorf(400, "Utility command columns must be a positive integer")
	}
	if req.Rows <= 0 {
		return errorf(400, "Utility command rows must be a positive integer")
	}
	if err := c.resize(req.Columns, req.Rows); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return errorf(404, "Utility command not found: %s", req.CommandID)
		}
		return errorf(400, "Utility command resize failed: %s: %v", req.CommandID, err)
	}
	m.emit(protocol.UtilityCommandResized{CommandID: c.id, Columns: req.Columns, Rows: req.Rows})
	return nil
}
