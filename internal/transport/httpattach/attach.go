// Package httpattach attaches headless runtimes (internal/runtime) to HTTP
// clients: the session routes under /api/headless of the wire contract
// (§11) with Server-Sent Events (§12), over the same runtime API as the
// stdio transport (internal/transport/stdio). Many connections attach to
// one runtime, as controller or viewer, under the controller lease
// (§8.5).
//
// Every SSE stream reads the runtime's one cursor-numbered frame ring
// through its own lossy runtime.Subscription: a stream that falls more
// than MaxBacklog frames behind (a stuck client) is sent one
// reset{lagged} with a fresh snapshot instead of holding memory, and
// a resume with ?cursor= older than the ring gets reset{replay_gap}.
// The ring is shared by all streams, so memory does not grow with the
// number of subscribers.
//
// The Handler serves /api/headless/... only. An embedder (maestro serve,
// maestro hosted-runner) mounts it next to its own routes (health,
// identity, drain) and decides what is open: see Config.Token and
// Handler.RequireAuth. docs/remote-attach.md is the user's guide.
package httpattach

import (
	"context"
	"log/slog"
	"net/http"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// Defaults of Config.
const (
	// DefaultHeartbeat is the SSE heartbeat cadence and the
	// heartbeat_interval_ms the server announces (wire contract §8.7).
	DefaultHeartbeat = 15 * time.Second
	// DefaultReplayRing is the frame ring asked of new runtimes; the
	// contract's minimum is MinReplayRing.
	DefaultReplayRing = 1024
	// MinReplayRing is the smallest replay ring the contract allows.
	MinReplayRing = 512
	// DefaultMaxBacklog is how many unread frames an SSE stream may have
	// before it is reset{lagged} (the reference server's mailbox size).
	DefaultMaxBacklog = 128
	// DefaultSubscriptionIdle is how long an explicit subscription may
	// stay without an attached stream before the sweep removes it.
	DefaultSubscriptionIdle = 30 * time.Second
	// DefaultSweepInterval is how often idle connections and
	// subscriptions are swept.
	DefaultSweepInterval = 15 * time.Second
	// DefaultWriteTimeout bounds one SSE write; a client that does not
	// read for that long is disconnected.
	DefaultWriteTimeout = httpedge.DefaultSSEWriteTimeout
	// MaxMessageBytes bounds a POST body (1 MB, wire contract §8.3).
	MaxMessageBytes = 1 << 20
)

// Config configures a Handler. Sessions is required.
type Config struct {
	// Sessions is where runtimes come from: one runtime per session id.
	Sessions Sessions
	// Token, when set, is the secret every /api request must present, as
	// "Authorization: Bearer <token>" or in x-maestro-api-key /
	// x-composer-api-key (wire contract §11.3, §13).
	Token string
	// RequireAuth refuses every /api request with 401 unless it carries
	// Token; with RequireAuth and no Token, every /api request is refused
	// (MAESTRO_WEB_REQUIRE_KEY=1 without a key). Without RequireAuth and
	// without Token, requests are not authenticated (a loopback-only
	// server).
	RequireAuth bool
	// Heartbeat is the SSE heartbeat cadence (default 15 s).
	Heartbeat time.Duration
	// ReplayRing is the frame ring size given to runtimes created through
	// Sessions.Create (CreateRequest.ReplayRing); default 1024, at least
	// 512.
	ReplayRing int
	// MaxBacklog is how far an SSE stream may fall behind before
	// reset{lagged} (default 128).
	MaxBacklog int
	// SubscriptionIdle expires explicit subscriptions nobody attached to
	// (default 30 s).
	SubscriptionIdle time.Duration
	// SessionIdle, when positive, disposes a session (shuts its runtime
	// down, so Sessions forgets it) once no request named it and no
	// subscription was open for that long while it was not responding;
	// maestro serve uses 30 min, a hosted runner leaves it 0 (never).
	SessionIdle time.Duration
	// SweepInterval is the cadence of the idle sweep (default 15 s; a
	// negative value disables the background sweep, call Sweep instead).
	SweepInterval time.Duration
	// WriteTimeout bounds one SSE write (default 30 s).
	WriteTimeout time.Duration
	// Now is the clock (default time.Now); the runtimes have their own.
	Now func() time.Time
	// NewTicker makes the heartbeat ticker of a stream (default
	// time.NewTicker); tests inject a manual one.
	NewTicker func(d time.Duration) (ticks <-chan time.Time, stop func())
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Sessions supplies the runtimes: one per session id. Implementations
// must be safe for concurrent use. SessionMap is a ready-made one.
type Sessions interface {
	// Create returns a started runtime (ready and session_info already
	// published) for POST /api/headless/sessions or /connections without
	// a sessionId, and its session id. It may create a runtime, or return
	// the one a hosted runner is bound to. An error that is an *Error
	// (or a *runtime.Error) sets the HTTP status and body; any other
	// error is a 500 runtime_failed.
	Create(ctx context.Context, req CreateRequest) (*runtime.Runtime, string, error)
	// Get returns the runtime of a session id.
	Get(id string) (*runtime.Runtime, bool)
}

// SessionRemover is implemented by Sessions that forget a session once
// its runtime has shut down (a shutdown message over HTTP disposes the
// runtime, wire contract §8.9).
type SessionRemover interface {
	Remove(id string)
}

// SessionMissing is implemented by Sessions that explain a miss: Missing
// returns the error for a session id Get does not know, for example 409
// runtime_owned_elsewhere from a hosted runner bound to another session
// (wire contract §11.6). A nil error keeps the default 404.
type SessionMissing interface {
	Missing(id string) error
}

// CreateRequest is the camelCase body of POST /api/headless/sessions and
// /connections (wire contract §11.2) as the Sessions implementation sees it.
type CreateRequest struct {
	// SessionID is empty for Create (a request naming a session is served
	// by Get).
	SessionID       string
	ProtocolVersion string
	ClientInfo      *protocol.ClientInfo
	// WorkspaceRoot, when set, must exist (400) and, in hosted mode, be
	// the runner's root (409 runtime_owned_elsewhere): Create checks it.
	WorkspaceRoot     string
	Model             string
	EnableClientTools bool
	Capabilities      *protocol.Capabilities
	Role              protocol.Role
	// Client is generic, vscode, jetbrains or conductor.
	Client        string
	ThinkingLevel protocol.ThinkingLevel
	// ApprovalMode is the body's approvalMode, else the
	// x-maestro-approval-mode header, else empty (the runtime default).
	ApprovalMode protocol.ApprovalMode
	// ReplayRing is Config.ReplayRing: set runtime.Config.BufferFrames to
	// it.
	ReplayRing int
	// Agent is the agent CLI the session runs on (empty: Maestro's own
	// loop) and AgentSession the CLI's own session it resumes (a Maestro
	// addition to the contract's body; docs/remote-attach.md).
	Agent, AgentSession string
	// OnRefused, when set, is given by the NewRuntime what to remove
	// (the session's fresh workspace, its log) should the session be
	// refused once made: the Sessions that may refuse it
	// (sessionowner.Cluster, when the store cannot record its owner)
	// sets it, and runs what it was given after closing the runtime.
	// Not part of the body.
	OnRefused func(undo func())
}

// Handler serves the /api/headless routes. Create it with NewHandler and
// Close it when done.
type Handler struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	mu       sync.Mutex
	sessions map[string]*session
	restored map[string]bool

	// unready, when set, is the 503 body of new attach traffic (draining
	// or a restore that did not complete).
	unready  atomic.Pointer[apiError]
	draining atomic.Bool

	// snapshotting bounds the event streams building their first
	// envelope at once.
	snapshotting chan struct{}

	stop      chan struct{}
	closeOnce sync.Once
	swept     sync.WaitGroup
}

// NewHandler returns a Handler for cfg and starts its idle sweep.
func NewHandler(cfg Config) *Handler {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.ReplayRing <= 0 {
		cfg.ReplayRing = DefaultReplayRing
	}
	cfg.ReplayRing = max(cfg.ReplayRing, MinReplayRing)
	if cfg.MaxBacklog <= 0 {
		cfg.MaxBacklog = DefaultMaxBacklog
	}
	if cfg.SubscriptionIdle <= 0 {
		cfg.SubscriptionIdle = DefaultSubscriptionIdle
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewTicker == nil {
		cfg.NewTicker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{
		cfg: cfg, log: log,
		sessions: map[string]*session{},
		restored: map[string]bool{},
		stop:     make(chan struct{}),

		snapshotting: make(chan struct{}, max(4, 2*goruntime.GOMAXPROCS(0))),
	}
	h.mux = h.routes()
	if cfg.SweepInterval > 0 {
		h.swept.Add(1)
		go h.sweepLoop()
	}
	return h
}

// ServeHTTP serves /api/headless/...; other paths get 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.Authorized(r) {
		writeError(w, errUnauthorized)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Close stops the idle sweep and ends every event stream (so that an
// http.Server's Shutdown can finish). It does not close runtimes:
// Sessions own them.
func (h *Handler) Close() {
	h.closeOnce.Do(func() { close(h.stop) })
	h.swept.Wait()
}

// SetDraining marks the server draining (wire contract §14.2): afterwards new
// attach traffic (create, connections, subscribe, messages, new event
// streams) is answered 503 runtime_not_ready. reason is logged and
// appears in the error text.
func (h *Handler) SetDraining(reason string) {
	msg := "Hosted runner is draining"
	if reason != "" {
		msg += ": " + reason
	}
	h.draining.Store(true)
	h.unready.Store(&apiError{Status: http.StatusServiceUnavailable, Code: CodeRuntimeNotReady, Message: msg})
	h.log.Info("headless attach draining", "reason", reason)
}

// Draining reports whether SetDraining was called.
func (h *Handler) Draining() bool { return h.draining.Load() }

// SetUnavailable makes new attach traffic answer 503 runtime_not_ready
// with message (a restore whose runtime flush did not complete, contract
// §14.4); an empty message makes the server available again, unless it
// is draining.
func (h *Handler) SetUnavailable(message string) {
	if h.draining.Load() {
		return
	}
	if message == "" {
		h.unready.Store(nil)
		return
	}
	h.unready.Store(&apiError{Status: http.StatusServiceUnavailable, Code: CodeRuntimeNotReady, Message: message})
}

// MarkRestored records that a session's runtime was restored from a
// snapshot (wire contract §14.4). reset{restored_from_snapshot} is published
// once into the session's stream, taking the next cursor, so that a
// client resuming with ?cursor= from before the restore gets it in order
// and a strict client (which drops envelopes whose cursor is not greater
// than the last one it applied) does not drop it. From now on, too, a
// new stream without a cursor and every explicit stream start with
// reset{restored_from_snapshot} carrying the current snapshot.
func (h *Handler) MarkRestored(sessionID string) {
	h.mu.Lock()
	h.restored[sessionID] = true
	s := h.sessions[sessionID]
	h.mu.Unlock()
	if s != nil {
		s.markRestored()
		return
	}
	if rt, ok := h.cfg.Sessions.Get(sessionID); ok && rt != nil {
		// Binding a session marked restored publishes the reset.
		h.bind(sessionID, rt)
	}
}

// HeartbeatIntervalMS is the heartbeat_interval_ms the server announces.
func (h *Handler) HeartbeatIntervalMS() int64 { return h.cfg.Heartbeat.Milliseconds() }
