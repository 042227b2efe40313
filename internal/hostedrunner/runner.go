package hostedrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/gitinfo"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Statuses the runner publishes (wire contract §14.2, §14.4).
const (
	StatusRestored          = "Restored from snapshot"
	StatusRestoreFailed     = "Restore interrupted before runtime flush completed"
	StatusRestoreSkipped    = "Restore incomplete: runtime flush skipped"
	StatusDrained           = "Drained"
	defaultDrainReason      = "platform_requested_drain"
	defaultRestoreFailedErr = "Runtime flush did not complete before the snapshot was taken"
	defaultRestoreSkipErr   = "Runtime flush was skipped: no runtime activity was persisted"
)

// Attach is the session API the runner mounts under /api/headless (an
// *httpattach.Handler).
type Attach interface {
	http.Handler
	// SetDraining makes new attach traffic answer 503 runtime_not_ready.
	SetDraining(reason string)
	// SetUnavailable does the same for a restore that did not complete.
	SetUnavailable(message string)
	// MarkRestored publishes reset{restored_from_snapshot} into the
	// session's stream and makes it the first envelope of new streams.
	MarkRestored(sessionID string)
}

// Options are what the runner is built with besides its Config.
type Options struct {
	// Provider is the model; nil (or Config.Fixture) runs the
	// deterministic fixture agent (FixtureTurn) instead.
	Provider llm.Provider
	Executor protocol.ExecutorType
	// Retry retries failed model calls.
	Retry *llm.RetryPolicy
	// CompactAt is the share of the context window at which the session
	// compacts its conversation (runtime.Config.CompactAt).
	CompactAt float64
	// Tools are the agent's built-in tools (nil: none).
	Tools func(ctx context.Context) (*tool.Set, error)
	// Utilities builds the utility operations (nil: none). hide lists the
	// absolute directories of Maestro's own state that file watches and
	// searches must skip (see utility.Config.Hide).
	Utilities func(emit func(protocol.Message), hide []string) runtime.Utilities
	// SystemPrompt computes the default system prompt.
	SystemPrompt func(ctx context.Context) string
	// Validate checks every outgoing frame.
	Validate func(frame []byte) error
	// BufferFrames is the runtime's replay ring (default 1024).
	BufferFrames int
	// DrainTimeout bounds how long a drain waits for the runtime's work to
	// stop (default 30 s); past it the flush fails (status interrupted).
	DrainTimeout time.Duration
	// CloseTimeout bounds how long Close waits for the runtime to stop
	// (default 1 s); past it Close flushes the log and returns anyway, so
	// that work stuck in a system call (a FIFO opened by a utility) does
	// not keep a SIGTERM from ending the process.
	CloseTimeout time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// Follow, when set, starts publishing the session log on the event
	// bus (docs/events.md, "Platform events") once it is open and
	// returns what records its close, called after the log is closed
	// (nil: nothing to record).
	Follow func(dir string, meta session.Meta) (closed func(cursor int64, reason string))
	// FollowRestored, when set, is Follow for a session restored from a
	// drain's manifest: its records up to cursor were published by the
	// drained runner, and it is resumed (docs/events.md).
	FollowRestored func(dir string, meta session.Meta, cursor int64) (closed func(cursor int64, reason string))
	// Release, when set, closes what the executor was built over (the
	// workspace its tools use) once the runtime has stopped
	// (runtime.Config.Release).
	Release func() error
}

// Runner is one hosted runner: a single runtime bound to one session.
type Runner struct {
	cfg  Config
	opts Options
	log  *slog.Logger
	now  func() time.Time

	rt        *runtime.Runtime
	slog      *sessionLog
	sessions  *workspace.Dir // <state dir>/sessions, open; nil once closed
	sessionID string
	// gitBranch is session_info's git_branch (the workspace's branch).
	gitBranch *string
	restore   *Manifest
	// fixture is true when the fixture agent runs the prompts.
	fixture bool

	attach Attach

	mu        sync.Mutex
	ready     bool
	draining  bool
	closing   bool // Close was called
	lastError string
	drained   *DrainResponse
	drainCode int
	drainedAt time.Time

	// followed records the session's close on the event bus (nil: not
	// published).
	followed func()
	// suspended records instead that the session was suspended (drained,
	// to be restored elsewhere): maestro.sessions.session.suspended.
	suspended func()

	drainMu sync.Mutex
	// flush flushes the session log (a test hook).
	flush func() error
}

// New builds the runner: it reads and validates the restore manifest if
// any (any failure is a start-up error), opens the session log and starts
// the runtime. Set the session API with SetAttach before serving.
func New(cfg Config, opts Options) (*Runner, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = time.Second
	}
	r := &Runner{cfg: cfg, opts: opts, log: opts.Logger, now: opts.Now}
	if cfg.RestoreManifest != "" {
		m, err := ReadManifest(cfg.RestoreManifest, cfg.WorkspaceRoot)
		if err != nil {
			return nil, err
		}
		r.restore = m
	}

	provider, executor, turn := opts.Provider, opts.Executor, runtime.TurnFunc(nil)
	if provider == nil || cfg.Fixture {
		provider, executor, turn = FixtureProvider{}, protocol.ExecutorReplay, FixtureTurn
		r.fixture = true
	}
	if executor == "" {
		executor = protocol.ExecutorLive
	}
	sessions, err := openStateDir(cfg)
	if err != nil {
		return nil, err
	}
	r.sessions = sessions
	sess, restoredCursor, err := r.openSession(provider, executor)
	if err != nil {
		sessions.Close()
		return nil, err
	}
	r.slog = newSessionLog(sess, restoredCursor)
	r.flush = r.slog.Flush

	r.sessionID = cfg.MaestroSessionID
	if r.sessionID == "" && r.restore != nil {
		r.sessionID = cmpOr(r.restore.MaestroSessionID, cfg.RunnerSessionID)
	}
	if r.sessionID == "" {
		r.sessionID = sess.ID()
	}
	r.gitBranch = gitinfo.Branch(cfg.WorkspaceRoot, opts.Logger)
	tools := opts.Tools
	if tools == nil || turn != nil {
		tools = func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil }
	}
	rt, err := runtime.New(runtime.Config{
		Provider:     provider,
		Executor:     executor,
		Retry:        opts.Retry,
		Tools:        tools,
		Utilities:    r.utilities(),
		Log:          r.slog,
		SessionID:    r.sessionID,
		History:      sess.History(),
		Cwd:          cfg.WorkspaceRoot,
		SystemPrompt: opts.SystemPrompt,
		BufferFrames: opts.BufferFrames,
		Validate:     opts.Validate,
		Logger:       opts.Logger,
		Turn:         turn,
		Release:      opts.Release,
		GitBranch:    r.gitBranch,
		Restored:     r.restore != nil && r.restore.Runtime.FlushStatus == FlushCompleted,
		CompactAt:    opts.CompactAt,
	})
	if err != nil {
		sess.Close()
		sessions.Close()
		return nil, err
	}
	follow := opts.Follow
	if restored := r.restore != nil && r.restore.Runtime.FlushStatus == FlushCompleted; restored && opts.FollowRestored != nil {
		follow = func(dir string, meta session.Meta) func(int64, string) {
			return opts.FollowRestored(dir, meta, restoredCursor)
		}
	}
	if follow != nil {
		// On the event bus the session is the runner's session id (its
		// ready line's), not its log's: a runner restored from a drain
		// has a log of its own and continues the suspended session.
		meta := sess.Meta()
		meta.ID = r.sessionID
		if closed := follow(sess.Dir(), meta); closed != nil {
			r.followed = func() { closed(sess.Cursor(), eventbus.EndReason(rt.Snapshot().State.LastErrorType)) }
			r.suspended = func() { closed(sess.Cursor(), eventbus.ReasonSuspended) }
		}
	}
	r.rt = rt
	r.start()
	go r.watchShutdown()
	return r, nil
}

// MsgShutDown is the runner's last error once a shutdown message ended
// its session.
const MsgShutDown = "Hosted runner session was shut down (a shutdown message): this runner serves nothing more; start a new one"

// watchShutdown marks the runner not ready once its runtime is shut down
// other than by a drain (a shutdown message over HTTP): identity and
// /readyz said ready, and attach requests answered the closed session's
// snapshot, so a control plane kept sending clients to a runner that
// could serve none.
func (r *Runner) watchShutdown() {
	<-r.rt.Done()
	r.mu.Lock()
	shut := r.noteShutdownLocked()
	a := r.attach
	r.mu.Unlock()
	if shut && a != nil {
		a.SetUnavailable(MsgShutDown)
	}
}

// noteShutdownLocked makes a ready runner whose runtime was shut down,
// neither by a drain nor by Close, not ready (MsgShutDown), and reports
// whether the runner is in that state. Ready and Identity call it too, so
// they say it as soon as the shutdown message is handled.
func (r *Runner) noteShutdownLocked() bool {
	if r.lastError == MsgShutDown {
		return true
	}
	select {
	case <-r.rt.Done():
	default:
		return false
	}
	if r.draining || r.closing || !r.ready {
		return false
	}
	r.ready, r.lastError = false, MsgShutDown
	r.log.Info("hosted runner session shut down by a shutdown message: not ready")
	return true
}

// utilities binds into opts.Utilities the directories watches and
// searches skip: Maestro's own files inside the workspace, the state
// directory when an operator put it there and the snapshot root (drain
// manifests and the session files beside them), each also under the
// workspace root's resolved path.
func (r *Runner) utilities() func(emit func(protocol.Message)) runtime.Utilities {
	u := r.opts.Utilities
	if u == nil {
		return nil
	}
	var hide []string
	real, realErr := filepath.EvalSymlinks(r.cfg.WorkspaceRoot)
	for _, dir := range []string{r.cfg.StateDir, r.cfg.SnapshotRoot} {
		if _, ok := insideWorkspace(r.cfg.WorkspaceRoot, dir); !ok {
			continue
		}
		hide = append(hide, filepath.Clean(dir))
		if realErr == nil {
			if rel, ok := workspace.Within(r.cfg.WorkspaceRoot, filepath.Clean(dir)); ok {
				hide = append(hide, filepath.Join(real, rel))
			}
		}
	}
	return func(emit func(protocol.Message)) runtime.Utilities { return u(emit, hide) }
}

// openSession opens the session log in the state directory: on restore,
// a new session seeded with the session file the drain wrote beside the
// manifest (the conversation continues), else a new session. It returns
// the cursor to continue from.
func (r *Runner) openSession(p llm.Provider, executor protocol.ExecutorType) (*session.Session, int64, error) {
	store := session.NewStoreIn(r.sessions, filepath.Join(r.cfg.StateDir, "sessions"))
	meta := session.Meta{Workspace: r.cfg.WorkspaceRoot, Provider: p.Name(), Model: p.Model(), ExecutorType: executor}
	var restored int64
	if m := r.restore; m != nil {
		restored = m.restoredCursor()
		if f := m.Runtime.SessionFile; f != "" {
			dir, name, ok := sessionFileDir(r.cfg, m, f)
			if !ok {
				r.log.Warn("restore: the manifest's session file is neither beside it nor in the workspace; starting a new log", "session_file", f)
			} else {
				s, err := importSession(store, meta, r.cfg, dir, name)
				if err != nil {
					return nil, 0, fmt.Errorf("restore: session file %s: %w", f, err)
				}
				return s, restored, nil
			}
		}
	}
	s, err := store.Create(meta)
	if err != nil {
		return nil, 0, fmt.Errorf("create the session log under %s: %w", r.cfg.StateDir, err)
	}
	return s, restored, nil
}

// sessionFileDir returns the directory and name of the session file f
// of the restore manifest m: beside the manifest, as a drain writes it (at
// the same path, or at the same place relative to a workspace root that
// has moved), or, from a drain of an older version that kept the session
// log in the workspace (<workspace>/.maestro/sessions/<id>/events.jsonl),
// anywhere inside the workspace, old root mapped to the current one.
func sessionFileDir(cfg Config, m *Manifest, f string) (dir, name string, ok bool) {
	f = filepath.Clean(f)
	mdir := filepath.Dir(cfg.RestoreManifest)
	if filepath.Dir(f) == mdir {
		return mdir, filepath.Base(f), true
	}
	for _, old := range []string{m.WorkspaceRoot, cfg.WorkspaceRoot} {
		if old == "" {
			continue
		}
		if rel, ok := workspace.Within(filepath.Clean(old), f); ok && rel != "." {
			return filepath.Join(cfg.WorkspaceRoot, filepath.Dir(rel)), filepath.Base(f), true
		}
	}
	return "", "", false
}

// importSession creates a session of store seeded with the session file
// name of dir (the manifest's directory, or a directory of the
// workspace): a regular file reached without following a link, at most
// MaxSessionFileBytes.
func importSession(store *session.Store, meta session.Meta, cfg Config, dir, name string) (*session.Session, error) {
	d, err := openDir(cfg.WorkspaceRoot, dir, false, 0)
	if err != nil {
		return nil, dirError("open the session file's directory", dir, err)
	}
	defer d.Close()
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if st.Size() > MaxSessionFileBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d allowed", st.Size(), MaxSessionFileBytes)
	}
	return store.Import(meta, f, MaxSessionFileBytes)
}

// start publishes the runtime's start frames, or applies a restore: a
// completed restore keeps the manifest's cursor N (its start frames,
// statuses and last init go into its state only; runtime.Restore), so
// that the reset{restored_from_snapshot} SetAttach publishes carries N
// and the first new frame takes N+1 (issue 12 defect 5).
func (r *Runner) start() {
	m := r.restore
	if m == nil {
		r.rt.Start()
		r.ready = true
		return
	}
	if m.Runtime.FlushStatus == FlushCompleted {
		r.rt.Restore(lastInit(m), protocol.Status{Message: StatusRestored})
		r.ready = true
		return
	}
	// An incomplete restore keeps the session id, the cursor and the
	// snapshot for inspection but is not ready (no ready frame).
	status, msg := StatusRestoreFailed, cmpOr(m.Runtime.Error, defaultRestoreFailedErr)
	if m.Runtime.FlushStatus == FlushSkipped {
		status, msg = StatusRestoreSkipped, cmpOr(m.Runtime.Error, defaultRestoreSkipErr)
	}
	sid := r.sessionID
	r.rt.Broadcast(protocol.SessionInfo{SessionID: &sid, Cwd: r.cfg.WorkspaceRoot, GitBranch: r.gitBranch})
	r.rt.Broadcast(protocol.Status{Message: status})
	r.rt.Broadcast(protocol.Error{Message: msg, ErrorType: protocol.ErrorProtocol})
	r.lastError = msg
}

// lastInit is the snapshot's last init (system prompt, thinking level,
// approval mode), which the restored runtime applies again; nil when
// there is none.
func lastInit(m *Manifest) *protocol.Init {
	var s struct {
		LastInit *protocol.Init `json:"last_init"`
	}
	if len(m.Snapshot) == 0 || json.Unmarshal(m.Snapshot, &s) != nil {
		return nil
	}
	return s.LastInit
}

// SetAttach sets the session API and tells it the restore outcome.
func (r *Runner) SetAttach(a Attach) {
	r.mu.Lock()
	r.attach = a
	r.mu.Unlock()
	if r.restore == nil {
		return
	}
	a.MarkRestored(r.sessionID)
	r.mu.Lock()
	ready, msg := r.ready, r.lastError
	r.mu.Unlock()
	if !ready {
		a.SetUnavailable(msg)
	}
}

// IdleTimeout closes a keep-alive connection that sends no request for
// that long (maestro serve's value). Without it, a client that asked one
// question on an open route (/healthz needs no token) could keep the
// connection, its goroutine and its descriptor for ever, and enough of
// them would leave the runner unable to accept or open a file.
const IdleTimeout = 2 * time.Minute

// newHTTPServer is the runner's HTTP server: headers within 10 s, idle
// keep-alive connections closed after IdleTimeout, no write timeout (it
// would cut the event streams; the attach handler bounds each write).
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: IdleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// Serve serves the runner's HTTP surface (Handler) on ln until ctx ends,
// stop is closed (the process's stdin ended), the server fails, or a
// signal arrives, which drains the runner first (reason process_shutdown, as a pod's SIGTERM). It then
// closes the runner (the session log saved), the session API and the
// server (within 5 s), and returns what failed.
func (r *Runner) Serve(ctx context.Context, ln net.Listener, attach interface{ Close() }, signals <-chan os.Signal, stop <-chan struct{}) error {
	srv := newHTTPServer(r.Handler(), r.log)
	// One client's idle or streaming connections must not use up the
	// runner's descriptors (--max-connections).
	limited := httpedge.LimitConns(ln, r.cfg.MaxConns, "--max-connections / MAESTRO_HOSTED_RUNNER_MAX_CONNECTIONS", r.log)
	limited.Configure(srv, func(*http.Request) httpedge.Surface { return httpedge.Headless })
	served := make(chan error, 1)
	go func() { served <- srv.Serve(limited) }()
	var serveErr, drainErr error
	select {
	case s := <-signals:
		r.log.Info("signal: draining before exit", "signal", s.String())
		d, code, err := r.Drain(context.Background(), DrainRequest{Reason: ReasonProcessShutdown, RequestedBy: RequesterWebServer})
		switch {
		case err != nil:
			r.log.Error("drain", "err", err)
			// The exit status says so: a control plane that took exit 0
			// for a hand-off would look for a manifest that is not there.
			drainErr = fmt.Errorf("signal %s: %w; no manifest was written", s, err)
		default:
			r.log.Info("drained", "status", d.Status, "http_status", code, "manifest", d.ManifestPath)
			if d.Status != DrainDrained {
				// The reason is the manifest's runtime.error: the pod
				// log is where an operator looks for it.
				why := ""
				if e := d.Manifest.Runtime.Error; e != "" {
					why = " (runtime error: " + e + ")"
				}
				drainErr = fmt.Errorf("signal %s: drain %s%s: manifest %s is a partial hand-off", s, d.Status, why, d.ManifestPath)
			}
		}
	case <-stop:
		r.log.Info("stdin closed: shutting down")
	case <-ctx.Done():
	case serveErr = <-served:
	}
	closeErr := r.Close()
	attach.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	if closeErr != nil && drainErr != nil {
		return fmt.Errorf("%w; save session: %w", drainErr, closeErr)
	}
	if closeErr != nil {
		return fmt.Errorf("save session: %w", closeErr)
	}
	return drainErr
}

// Runtime returns the runner's runtime.
func (r *Runner) Runtime() *runtime.Runtime { return r.rt }

// Fixture reports whether the deterministic fixture agent runs the
// prompts (no model).
func (r *Runner) Fixture() bool { return r.fixture }

// SessionID returns the bound Maestro session id.
func (r *Runner) SessionID() string { return r.sessionID }

// Config returns the runner's configuration.
func (r *Runner) Config() Config { return r.cfg }

// Ready reports whether attach traffic is accepted, and the last error.
func (r *Runner) Ready() (ready, draining bool, lastError string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteShutdownLocked()
	return r.ready && !r.draining, r.draining, r.lastError
}

// Close shuts the runtime down, waiting at most Options.CloseTimeout for
// its work to stop, flushes the session log (unless a drain already did)
// and closes it.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	closed := make(chan error, 1)
	go func() { closed <- r.rt.Close() }()
	var err error
	timer := time.NewTimer(r.opts.CloseTimeout)
	defer timer.Stop()
	select {
	case err = <-closed:
	case <-timer.C:
		err = fmt.Errorf("close the runtime: its work did not stop within %s; closing the session log anyway", r.opts.CloseTimeout)
		r.log.Warn("hosted runner closing with work still running", "err", err)
	}
	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	if r.drained == nil {
		err = errors.Join(err, ignoreNoLog(r.slog.Flush()))
	}
	err = errors.Join(err, r.slog.Close())
	if r.followed != nil {
		r.followed()
		r.followed = nil
	}
	if r.sessions != nil {
		r.sessions.Close()
		r.sessions = nil
	}
	return err
}

func ignoreNoLog(err error) error {
	if errors.Is(err, errNoLog) {
		return nil
	}
	return err
}

// Identity is the body of GET /.well-known/evalops/remote-runner/identity.
type Identity struct {
	ProtocolVersion   string `json:"protocol_version"`
	RunnerSessionID   string `json:"runner_session_id"`
	OwnerInstanceID   string `json:"owner_instance_id,omitempty"`
	Ready             bool   `json:"ready"`
	Draining          bool   `json:"draining"`
	DrainStatus       string `json:"drain_status,omitempty"`
	DrainManifestPath string `json:"drain_manifest_path,omitempty"`
	DrainedAt         string `json:"drained_at,omitempty"`
}

// Identity returns the runner's identity (wire contract §14.1).
func (r *Runner) Identity() Identity {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteShutdownLocked()
	id := Identity{
		ProtocolVersion: IdentityProtocol, RunnerSessionID: r.cfg.RunnerSessionID,
		OwnerInstanceID: r.cfg.OwnerInstanceID, Ready: r.ready && !r.draining, Draining: r.draining,
	}
	if d := r.drained; d != nil {
		id.DrainStatus, id.DrainManifestPath, id.DrainedAt = d.Status, d.ManifestPath, timestamp(r.drainedAt)
	}
	return id
}

// snapshotJSON is the runtime snapshot, encoded.
func (r *Runner) snapshotJSON() json.RawMessage {
	data, err := json.Marshal(r.rt.Snapshot())
	if err != nil {
		return json.RawMessage(`null`)
	}
	return data
}
