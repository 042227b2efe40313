package utility

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Emit delivers a server message produced by a utility operation. The
// Manager never calls it concurrently with itself and never while holding
// its own locks, so it may call the Manager's Snapshot; it must not block
// for long (command output waits for it).
type Emit func(protocol.Message)

// Config configures a Manager.
type Config struct {
	// Root is the workspace every cwd and path is confined to.
	Root *workspace.Root
	// Emit receives the messages operations produce (started, output,
	// exited, resized, watch events, stopped). Nil discards them.
	Emit Emit
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// KillGrace is how long a terminated command's process group has
	// between SIGTERM and SIGKILL (default DefaultKillGrace).
	KillGrace time.Duration
	// DrainDelay bounds how long output is still read after a command's
	// main process has exited while other processes keep its output open;
	// then the group is killed (default DefaultDrainDelay).
	DrainDelay time.Duration
	// Hide lists absolute directories (Maestro's own state when it is
	// configured inside the workspace) that file watches and searches
	// never report.
	Hide []string
}

// Defaults of Config.
const (
	DefaultKillGrace  = 5 * time.Second
	DefaultDrainDelay = 2 * time.Second
)

// Reasons the contract gives for ending utilities (§8.5, §8.9). StopAll and
// CloseOwner take the command form; the watch form is derived (see
// WatchReason). The keywords "interrupt", "cancel" and "shutdown" may be
// passed instead and select the matching pair.
const (
	ReasonTerminated      = "Terminated by controller"
	ReasonForceTerminated = "Force terminated by controller"
	ReasonWatchStopped    = "Stopped by controller"
	ReasonOwnerClosed     = "Owning connection closed while utility command was still running"
	ReasonInterrupted     = "Interrupted while utility command was still running"
	ReasonCancelled       = "Cancelled while utility command was still running"
	ReasonShutdown        = "Headless runtime shutdown while utility command was still running"
	ReasonDisposed        = "Headless runtime disposed"
)

// Error is an operation failure to report to the client: Message is the
// contract's text, Code an HTTP-style status (400 bad request, 403 outside
// the workspace or owned by another connection, 404 not found).
type Error struct {
	Message string
	Code    int
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// errorf builds an *Error. Every string and error among args is cut to a
// bounded prefix (workspace.Excerpt): what a client sent — a path, an id, a
// pattern — is never echoed whole, however long.
func errorf(code int, format string, args ...any) *Error {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = workspace.Excerpt(v)
		case error:
			args[i] = workspace.Excerpt(v.Error())
		}
	}
	return &Error{Message: fmt.Sprintf(format, args...), Code: code}
}

// Manager runs the utility operations of one headless runtime. It is safe
// for concurrent use.
type Manager struct {
	root       *workspace.Root
	hide       []string // Config.Hide inside the workspace, root-relative, slash-separated
	emitFn     Emit
	log        *slog.Logger
	killGrace  time.Duration
	drainDelay time.Duration

	emitMu sync.Mutex // serialises emitFn; guards watch.stopped

	mu       sync.Mutex
	commands map[string]*command
	watches  map[string]*watch
	seq      uint64
	closed   bool

	sandboxNote sync.Once
	wg          sync.WaitGroup // command and watch goroutines
}

// New returns a Manager for cfg.
func New(cfg Config) *Manager {
	m := &Manager{
		root:       cfg.Root,
		emitFn:     cfg.Emit,
		log:        cfg.Logger,
		killGrace:  cmp.Or(cfg.KillGrace, DefaultKillGrace),
		drainDelay: cmp.Or(cfg.DrainDelay, DefaultDrainDelay),
		commands:   map[string]*command{},
		watches:    map[string]*watch{},
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	for _, h := range cfg.Hide {
		if m.root == nil {
			break
		}
		if rel, ok := workspace.Within(m.root.Dir(), filepath.Clean(h)); ok && rel != "." {
			m.hide = append(m.hide, filepath.ToSlash(rel))
		}
	}
	return m
}

// hidden reports whether rel (root-relative, slash-separated) is one of
// Config.Hide or lies below one.
func (m *Manager) hidden(rel string) bool {
	for _, h := range m.hide {
		if rel == h || strings.HasPrefix(rel, h+"/") {
			return true
		}
	}
	return false
}

// hiddenPath is hidden for an absolute path.
func (m *Manager) hiddenPath(path string) bool {
	if len(m.hide) == 0 {
		return false
	}
	rel, ok := workspace.Within(m.root.Dir(), path)
	return ok && m.hidden(filepath.ToSlash(rel))
}

// emit delivers msg, one message at a time.
func (m *Manager) emit(msg protocol.Message) {
	m.emitMu.Lock()
	defer m.emitMu.Unlock()
	if m.emitFn != nil {
		m.emitFn(msg)
	}
}

// nextSeq numbers commands and watches in start order (for Snapshot).
// Called with m.mu held.
// reserve enters the operation that newOp makes (given its sequence
// number) under id in ops, so that the id is taken while the operation
// is validated and started. It refuses a cancelled start (op names the
// message), a closed manager and an id already in use (what names the
// kind of operation).
func reserve[T any](ctx context.Context, m *Manager, ops map[string]*T, id, op, what string, newOp func(seq uint64) *T) (*T, *Error) {
	if err := ctx.Err(); err != nil {
		return nil, errorf(400, op+" cancelled: %v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return nil, errClosed()
	case ops[id] != nil:
		return nil, errorf(400, what+" already exists: %s", id)
	}
	o := newOp(m.nextSeq())
	ops[id] = o
	return o, nil
}

func (m *Manager) nextSeq() uint64 {
	m.seq++
	return m.seq
}

// Snapshot returns the running commands (with the tail of their output,
// at most protocol.MaxActiveCommandOutput characters) and the active
// watches, each in start order.
func (m *Manager) Snapshot() ([]protocol.ActiveUtilityCommand, []protocol.ActiveFileWatch) {
	m.mu.Lock()
	cmds := make([]*command, 0, len(m.commands))
	for _, c := range m.commands {
		if c.announced() {
			cmds = append(cmds, c)
		}
	}
	ws := make([]*watch, 0, len(m.watches))
	for _, w := range m.watches {
		if w.started {
			ws = append(ws, w)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(cmds, func(a, b *command) int { return cmp.Compare(a.seq, b.seq) })
	slices.SortFunc(ws, func(a, b *watch) int { return cmp.Compare(a.seq, b.seq) })

	outCmds := make([]protocol.ActiveUtilityCommand, 0, len(cmds))
	for _, c := range cmds {
		outCmds = append(outCmds, c.snapshot())
	}
	outWatches := make([]protocol.ActiveFileWatch, 0, len(ws))
	for _, w := range ws {
		outWatches = append(outWatches, protocol.ActiveFileWatch{
			WatchID:           w.id,
			RootDir:           w.info.RootDir,
			IncludePatterns:   slices.Clone(w.info.IncludePatterns),
			ExcludePatterns:   slices.Clone(w.info.ExcludePatterns),
			DebounceMS:        w.info.DebounceMS,
			OwnerConnectionID: w.owner,
		})
	}
	return outCmds, outWatches
}

// reasons returns the command and watch forms of a stop reason.
func reasons(reason string) (cmdReason, watchReason string) {
	switch reason {
	case "interrupt":
		reason = ReasonInterrupted
	case "cancel":
		reason = ReasonCancelled
	case "shutdown":
		reason = ReasonShutdown
	case "owner":
		reason = ReasonOwnerClosed
	}
	return reason, WatchReason(reason)
}

// WatchReason turns a reason phrased for utility commands ("… while
// utility command was still running") into its file watch form ("… while
// file watch was still running"); other reasons are returned unchanged.
func WatchReason(reason string) string {
	return strings.Replace(reason, "utility command", "file watch", 1)
}

// StopAll ends every command and watch (interrupt, cancel, shutdown):
// commands are terminated gracefully and watches stopped, with the
// contract's reasons (§8.9). reason is the command form, such as
// ReasonInterrupted, or one of the keywords "interrupt", "cancel",
// "shutdown". StopAll returns once every command has reported its exit
// (bounded by KillGrace plus DrainDelay).
func (m *Manager) StopAll(reason string) {
	m.stop(func(string) bool { return true }, reason, false)
}

// CloseOwner ends the commands and watches owned by the connection owner,
// which went away. reason is the command form (empty: ReasonOwnerClosed).
// It returns once those commands have reported their exit.
func (m *Manager) CloseOwner(owner, reason string) {
	if reason == "" {
		reason = ReasonOwnerClosed
	}
	m.stop(func(o string) bool { return o == owner }, reason, false)
}

func (m *Manager) stop(match func(owner string) bool, reason string, force bool) {
	cmdReason, watchReason := reasons(reason)
	m.mu.Lock()
	var cmds []*command
	for _, c := range m.commands {
		if match(c.owner) {
			cmds = append(cmds, c)
		}
	}
	var ws []*watch
	for _, w := range m.watches {
		if match(w.owner) {
			ws = append(ws, w)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(cmds, func(a, b *command) int { return cmp.Compare(a.seq, b.seq) })
	slices.SortFunc(ws, func(a, b *watch) int { return cmp.Compare(a.seq, b.seq) })

	// Commands first, then watches, as the reference server does; waiting
	// for the exits before stopping the watches keeps that order on the
	// wire.
	for _, c := range cmds {
		c.terminate(force, cmdReason)
	}
	deadline := time.NewTimer(m.killGrace + m.drainDelay + 2*time.Second)
	defer deadline.Stop()
wait:
	for _, c := range cmds {
		select {
		case <-c.done:
		case <-deadline.C:
			m.log.Warn("utility command did not exit in time", "command_id", c.id)
			break wait
		}
	}
	for _, w := range ws {
		m.stopWatch(w, watchReason)
	}
}

// Close kills every command's process group at once, stops every watch
// (reason ReasonDisposed) and waits, bounded, for their goroutines. Later
// operations fail.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop(func(string) bool { return true }, ReasonDisposed, true)
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(m.drainDelay + 5*time.Second):
		m.log.Warn("utility goroutines still running after Close")
	}
	return nil
}

// errClosed reports an operation on a closed Manager.
func errClosed() *Error { return errorf(400, "Headless utility operations are closed") }
