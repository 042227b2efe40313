// Package server is Maestro's REST API: tasks and their comments, jobs and
// their event logs (JSON pages or Server-Sent Events with Last-Event-ID
// resumption), deliverables and uploads in task workspaces, pieces (one
// validator: piece.Parse), cron schedules, the audit log, health probes and
// Prometheus metrics; and, when configured, the remote-attach session API
// under /api/headless/ (Config.Headless). docs/api.md documents it for
// users and docs/openapi.yaml describes every route.
//
// The server is a plain http.Handler on the store: it holds no state of its
// own beyond configuration, so any number of `maestro serve` processes
// sharing one PostgreSQL database serve the same API. Work is done by the
// queue's workers; the API only reads and writes the store (and the task
// workspaces under the data directory).
package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/maestro-run/maestro/internal/blobstore"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/webui"
	"github.com/maestro-run/maestro/pieces"
)

// Defaults of Config.
const (
	// DefaultMaxUpload bounds one uploaded file (Config.MaxUpload).
	DefaultMaxUpload = 64 << 20
	// DefaultMaxListEntries bounds one deliverables listing
	// (Config.MaxListEntries).
	DefaultMaxListEntries = 10_000
	// DefaultKeepAlive is the interval of SSE keepalive comments.
	DefaultKeepAlive = 15 * time.Second
	// maxJSONBody bounds a JSON request body (task bodies and payloads are
	// 1 MiB each in the store).
	maxJSONBody = 4 << 20
	// headlessMaxBody bounds an attach route's body (1 MB, wire contract §8.3).
	headlessMaxBody = 1 << 20
)

// Metrics is the part of the queue's metrics the server exports on
// /metrics after the job counts (queue.Metrics implements it).
type Metrics interface {
	WritePrometheus(w io.Writer)
}

// Config configures New.
type Config struct {
	// Store is the durable state the API reads and writes (required).
	Store store.Store
	// DataDir holds the task directories (<DataDir>/tasks/<id>, see
	// TaskDir); required for deliverables and uploads.
	DataDir string
	// Artifacts, when set, holds the tasks' files instead of DataDir:
	// uploads are staged there and deliverables served from there, so
	// any serve answers for any worker (artifacts.go).
	Artifacts blobstore.Store
	// TaskDir returns a task's directory (default: <DataDir>/tasks/<id>,
	// the layout of queue.TaskDir); the agent's workspace is its work/
	// (internal/taskdir).
	TaskDir func(dataDir string, taskID int64) string
	// Token is the bearer token clients present. When set, a request that
	// sends an Authorization header must present it even if RequireAuth is
	// off.
	Token string
	// RequireAuth makes every route except /healthz and /readyz require
	// the bearer token (mandatory when the listener is not loopback).
	RequireAuth bool
	// Listen is the listen address (host:port; empty: loopback). A
	// non-loopback address needs Token and RequireAuth; its host, unless a
	// wildcard, is an allowed Host.
	Listen string
	// AllowedHosts are the public names clients may use in Host besides
	// the loopback names (DNS-rebinding protection; see httpedge.Policy):
	// "maestro.example.com", "*.example.com", or "*" (only with a token).
	AllowedHosts []string
	// Metrics, when not nil, is appended to /metrics.
	Metrics Metrics
	// NextRun computes a cron expression's next tick after a time; it
	// validates schedules (queue.NextRun). Required for the schedule
	// routes.
	NextRun func(expr string, after time.Time) (time.Time, error)
	// MaxUpload bounds one uploaded file in bytes (default
	// DefaultMaxUpload); larger uploads get 413.
	MaxUpload int64
	// MaxListEntries bounds the entries (files and directories) one
	// deliverables listing visits (default DefaultMaxListEntries); a
	// listing cut short says so with "truncated": true.
	MaxListEntries int
	// KeepAlive is the interval of SSE keepalive comments (default
	// DefaultKeepAlive). The stream also re-reads the job's log at this
	// interval, as a backstop for lost wake-ups.
	KeepAlive time.Duration
	// StreamWriteTimeout bounds one write of a job's event stream
	// (default httpedge.DefaultSSEWriteTimeout): a client that stops
	// reading is disconnected.
	StreamWriteTimeout time.Duration
	// Logger receives one line per request (default: discarded). Tokens
	// are never logged.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Pieces is the catalog of built-in pieces, possibly with override
	// directories (default: Maestro's embedded pieces only). Pieces stored
	// at runtime are merged over it.
	Pieces *piece.Catalog
	// Headless, when set, is the remote-attach session API
	// (docs/remote-attach.md), mounted at /api/headless/ behind the same
	// edge (token, Host check, cross-origin refusal) as every other route,
	// answering errors in the contract's shape. The token may also come in
	// the contract's x-maestro-api-key or x-composer-api-key header (on
	// every route). Its routes are listed by Routes.
	Headless HeadlessAPI
	// Secrets seals the credentials of the MCP servers and SSH
	// connections registered through the API (MAESTRO_ENCRYPTION_KEY);
	// nil: a request carrying a secret is refused with 422.
	Secrets *secrets.Box
	// UI, when set, is the web app (internal/webui): it answers GET and
	// HEAD of every path that is not the API's, the probes' or the
	// metrics' (webui.ClientRoute), without a token, so that the sign-in
	// page loads; the API keeps its auth. Host and Origin are checked as
	// on every route.
	UI http.Handler
	// Info describes this process for GET /api/v1/server.
	Info Info
	// MCP, when set, is Maestro as an MCP server over streamable HTTP
	// (`maestro mcp`'s tools; docs/mcp.md), mounted at MCPPath behind
	// the same edge: the token is required wherever the API requires it.
	MCP http.Handler
	// MCPLookup resolves the MCP servers a task's payload names in
	// mcp_servers (docs/mcp.md, "In queued jobs"); nil: no server is
	// known, and a task naming one is refused.
	MCPLookup mcp.Lookup
	// DropStreamsAfter is a test hook (end-to-end tests of stream
	// resumption): when positive, every job event stream is cut from the
	// server side, its connection closed without the end event, after
	// sending that many events, as a proxy or a restart would (a stream
	// resumed from where an aborted one began ends its response cleanly
	// instead, so that a client that lost those events moves on: see
	// feeds.cut). Zero (the
	// default, and what serve uses unless a test sets
	// MAESTRO_TEST_DROP_STREAMS_AFTER) never cuts.
	DropStreamsAfter int
	// AgentsDir holds the user's agent CLI definitions (*.yaml, as
	// ~/.maestro/agents) that GET /api/v1/agents lists beside the
	// built-in ones; empty: built-ins only.
	AgentsDir string
	// Getenv reads PATH (to detect agent CLIs), HOME and the CLIs' own
	// overrides (to find their stored sessions); nil: os.Getenv.
	Getenv func(string) string
	// BudgetUSDMonth is the configured monthly model budget in USD
	// (config budget_usd_month; 0: none), reported by GET /api/v1/usage.
	BudgetUSDMonth float64
	// MCPServerNames are the slugs of the MCP servers the configuration
	// defines; with the registered ones they are what a piece's tools may
	// name (GET /api/v1/pieces' missing_tools).
	MCPServerNames []string
}

// MCPPath is where Config.MCP is mounted.
const MCPPath = "/mcp"

// HeadlessAPI is the session API Config.Headless mounts (an
// *httpattach.Handler).
type HeadlessAPI interface {
	http.Handler
	// Routes lists its patterns ("GET /api/headless/sessions/{id}").
	Routes() []string
}

// Server is the API handler built by New.
type Server struct {
	cfg     Config
	st      store.Store
	log     *slog.Logger
	now     func() time.Time
	mux     *http.ServeMux
	handler http.Handler
	routes  []string
	feeds   *feeds
	actorID string // identity of the configured token in the audit log
	// agentProbes keeps the agent CLIs' versions between listings.
	agentProbes agentcli.ProbeCache
}

// New builds the API handler.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	if cfg.RequireAuth && cfg.Token == "" {
		return nil, errors.New("server: RequireAuth needs a Token")
	}
	if err := (&httpedge.Policy{Listen: cfg.Listen, AllowedHosts: cfg.AllowedHosts, Token: cfg.Token, RequireAuth: cfg.RequireAuth}).Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	if cfg.MaxListEntries <= 0 {
		cfg.MaxListEntries = DefaultMaxListEntries
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = httpedge.DefaultSSEWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TaskDir == nil {
		cfg.TaskDir = defaultTaskDir
	}
	if v := reflect.ValueOf(cfg.Metrics); v.Kind() == reflect.Pointer && v.IsNil() {
		cfg.Metrics = nil // a nil *queue.Metrics means none
	}
	if cfg.Pieces == nil {
		cat, err := piece.LoadFS(context.Background(), pieces.FS())
		if err != nil {
			return nil, fmt.Errorf("server: load built-in pieces: %w", err)
		}
		cfg.Pieces = cat
	}
	s := &Server{cfg: cfg, st: cfg.Store, log: cfg.Logger, now: cfg.Now, mux: http.NewServeMux(),
		feeds: newFeeds(cfg.Store, cfg.KeepAlive)}
	if cfg.Token != "" {
		sum := sha256.Sum256([]byte(cfg.Token))
		s.actorID = "token:" + hex.EncodeToString(sum[:4])
	}
	s.register()
	var h http.Handler = s.mux
	h = s.withActor(h)
	h = s.edgePolicy().Handler(h)
	h = s.logRequests(h)
	s.handler = h
	return s, nil
}

func defaultTaskDir(dataDir string, taskID int64) string {
	return filepath.Join(dataDir, "tasks", strconv.FormatInt(taskID, 10))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Routes lists the registered patterns ("GET /api/v1/tasks/{id}"), in
// registration order.
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.routes = append(s.routes, pattern)
	if strings.Contains(pattern, " /api/") {
		h = knownQuery(pattern, h)
	}
	s.mux.HandleFunc(pattern, h)
}

// queryParams are the query parameters each REST route reads (as
// docs/openapi.yaml lists them); a route not here takes none.
var queryParams = map[string][]string{
	"GET /api/v1/tasks":                        {"owner", "state", "q", "before", "limit"},
	"GET /api/v1/jobs":                         {"task_id", "parent_job_id", "state", "after", "limit"},
	"GET /api/v1/jobs/{id}/events":             {"after", "limit"},
	"DELETE /api/v1/pieces/{name}":             {"version"},
	"GET /api/v1/audit":                        {"target", "before", "limit"},
	"GET " + api.UsagePath:                     {"from", "to", "group_by", "include_replay"},
	"GET " + api.AgentsPath + "/{id}/sessions": {"project"},
}

// knownQuery refuses a query parameter the route does not read, a 400
// naming it, as an unknown JSON field is: a misspelt filter
// (?status=failed for ?state=) was ignored, and the unfiltered list
// answered as if filtered.
func knownQuery(pattern string, h http.HandlerFunc) http.HandlerFunc {
	takes := queryParams[pattern]
	says := "takes no query parameters"
	if len(takes) > 0 {
		says = "takes " + strings.Join(takes, ", ")
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			for _, name := range slices.Sorted(maps.Keys(r.URL.Query())) {
				if !slices.Contains(takes, name) {
					writeFieldError(w, http.StatusBadRequest, name, fmt.Sprintf("unknown query parameter; %s %s", pattern, says))
					return
				}
			}
		}
		h(w, r)
	}
}

func (s *Server) register() {
	s.handle("POST /api/v1/tasks", traced(s.createTask))
	s.handle("GET /api/v1/tasks", s.listTasks)
	s.handle("GET /api/v1/tasks/{id}", s.getTask)
	s.handle("POST /api/v1/tasks/{id}/comments", s.addComment)
	s.handle("GET /api/v1/tasks/{id}/deliverables", s.listDeliverables)
	s.handle("GET /api/v1/tasks/{id}/deliverables/{path...}", s.getDeliverable)
	s.handle("PUT /api/v1/tasks/{id}/uploads/{path...}", s.upload)

	s.handle("GET /api/v1/jobs", s.listJobs)
	s.handle("GET /api/v1/jobs/{id}", s.getJob)
	s.handle("POST /api/v1/jobs/{id}/cancel", jobAction(s, api.ActionJobCancel, s.cancelJob))
	s.handle("POST /api/v1/jobs/{id}/retry", jobAction(s, api.ActionJobRetry, s.retryJob))
	s.handle("GET /api/v1/jobs/{id}/events", s.jobEvents)

	s.handle("GET /api/v1/pieces", s.listPieces)
	s.handle("POST /api/v1/pieces", s.createPiece)
	s.handle("POST /api/v1/pieces/validate", s.validatePiece)
	s.handle("GET /api/v1/pieces/{name}", s.getPiece)
	s.handle("PUT /api/v1/pieces/{name}", s.putPiece)
	s.handle("DELETE /api/v1/pieces/{name}", s.deletePiece)
	s.handle("GET /api/v1/pieces/{name}/versions", s.listPieceVersions)
	s.handle("GET /api/v1/pieces/{name}/versions/{version}", s.getPieceVersion)

	s.handle("GET /api/v1/schedules", s.listSchedules)
	s.handle("POST /api/v1/schedules", s.createSchedule)
	s.handle("GET /api/v1/schedules/{id}", s.getSchedule)
	s.handle("PUT /api/v1/schedules/{id}", s.putSchedule)
	s.handle("DELETE /api/v1/schedules/{id}", s.deleteSchedule)

	s.registerRegistry()
	s.registerAgents()

	s.handle("GET /api/v1/audit", s.listAudit)
	s.handle("GET "+api.UsagePath, s.usage)
	s.handle("GET "+api.ServerPath, s.serverInfo)
	s.handle("GET /healthz", s.healthz)
	s.handle("GET /readyz", s.readyz)
	s.handle("GET /metrics", s.metrics)
	// Another method on a probe is the probe's 405, not the web app's
	// (the app's "/" takes every path the mux has no route for).
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: %s answers GET and HEAD", r.Method, p))
		})
	}

	if s.cfg.MCP != nil {
		s.mux.Handle(MCPPath, s.cfg.MCP) // MCP's own protocol, not in docs/openapi.yaml
	}
	if s.cfg.Headless != nil {
		s.mux.Handle("/api/headless/", s.cfg.Headless)
		s.routes = append(s.routes, s.cfg.Headless.Routes()...)
	}

	// Everything else under /api/ answers in JSON rather than with the
	// mux's plain-text 404.
	// A route's path with another method is a 405 saying which methods
	// it answers (the mux would give its 405, but "/api/" matches first).
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if allow := s.allowed(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			last := len(allow) - 1
			says := allow[last]
			if last > 0 {
				says = strings.Join(allow[:last], ", ") + " and " + says
			}
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: %s answers %s", r.Method, r.URL.Path, says))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s; see docs/api.md", r.Method, r.URL.Path))
	})
	// The web app: every other path (not an API route: Routes lists the
	// API).
	if s.cfg.UI != nil {
		s.mux.Handle("/", s.cfg.UI)
	}
}

// allowed lists the methods a route of r's path answers (HEAD with GET).
func (s *Server) allowed(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pattern := s.mux.Handler(r2); strings.HasPrefix(pattern, m+" ") || (m == http.MethodHead && strings.HasPrefix(pattern, "GET ")) {
			allow = append(allow, m)
		}
	}
	return allow
}

// uiRequest reports whether a request is for the web app: GET or HEAD of
// a path the API does not answer. It needs no token.
func (s *Server) uiRequest(r *http.Request) bool {
	return s.cfg.UI != nil && r.URL.Path != MCPPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) && webui.ClientRoute(r.URL.Path)
}

// actorKey carries the authenticated actor in a request's context.
type actorKey struct{}

// actor returns who makes the request: the token's identity, or "local"
// on an unauthenticated loopback listener.
func actor(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey{}).(string); ok {
		return a
	}
	return "local"
}

// edgePolicy is serve's HTTP edge (internal/httpedge): Host allowlist,
// cross-origin refusal, the token, body bounds; the attach routes answer
// in the headless contract's error shape.
func (s *Server) edgePolicy() *httpedge.Policy {
	return &httpedge.Policy{
		Listen: s.cfg.Listen, AllowedHosts: s.cfg.AllowedHosts,
		Token: s.cfg.Token, RequireAuth: s.cfg.RequireAuth,
		Open: func(r *http.Request) bool {
			return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || s.uiRequest(r)
		},
		Surface: func(r *http.Request) httpedge.Surface {
			if strings.HasPrefix(r.URL.Path, "/api/headless/") {
				return httpedge.Headless
			}
			return httpedge.REST
		},
		MaxBody: s.maxBody,
	}
}

// maxBody bounds a request body at the edge: the attach routes' message
// limit, the JSON limit for the other API routes, none where the route
// bounds it itself (uploads and multipart task creation: MaxUpload per
// file).
func (s *Server) maxBody(r *http.Request) int64 {
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/headless/"):
		return headlessMaxBody
	case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/uploads/"),
		r.URL.Path == "/api/v1/tasks" && !declaresJSON(r):
		return 0
	}
	return maxJSONBody
}

// declaresJSON reports whether a request declares a JSON body.
func declaresJSON(r *http.Request) bool { return httpedge.RequireJSON(r) == nil }

// withActor records the token's identity as the request's actor when the
// request presents the token (the edge already refused a wrong one).
func (s *Server) withActor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Token != "" && httpedge.ValidToken(r, s.cfg.Token) {
			r = r.WithContext(context.WithValue(r.Context(), actorKey{}, s.actorID))
		}
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers the status code for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	// werr is the first write that failed: the answer was cut (the
	// client went away or stopped reading), whatever status it began with.
	werr error
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	if err != nil && r.werr == nil {
		r.werr = err
	}
	return n, err
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests logs one line per request: method, path, status, duration,
// and cut (why) when the answer could not be written to its end. Headers (and so tokens) are never logged; the query string is left out
// too.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				if rec.status == 0 {
					writeError(rec, http.StatusInternalServerError, "internal error")
				}
			}
			attrs := []any{"method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start).Round(time.Microsecond)}
			if rec.werr != nil {
				// The status line went out, but not the whole answer.
				attrs = append(attrs, "cut", rec.werr.Error())
			}
			s.log.Info("request", attrs...)
		}()
		next.ServeHTTP(rec, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpedge.WriteJSON(w, status, v) }

func writeError(w http.ResponseWriter, status int, msg string) {
	httpedge.WriteError(w, httpedge.REST, &httpedge.Error{Status: status, Message: msg})
}

func writeFieldError(w http.ResponseWriter, status int, field, msg string) {
	httpedge.WriteError(w, httpedge.REST, &httpedge.Error{Status: status, Message: field + ": " + msg, Field: field})
}
