// Package mcp connects Maestro to MCP servers (the Model Context Protocol,
// through github.com/modelcontextprotocol/go-sdk) and serves Maestro itself
// as one (`maestro mcp`, server.go).
//
// As a client: the servers of config.yaml's mcp_servers (a command over
// stdio, or a streamable HTTP URL) are started lazily by a Manager, one
// per session, and stopped with it. Their tools are offered to the model
// as mcp__<server>__<tool> (or, when a model API would refuse that, a
// name it accepts: names.go) with the server's JSON schema; pieces select
// them with allowed_tools patterns (mcp__*, mcp__<server>__*, exact) and
// require servers with required_mcp. A server's stderr goes to a file in
// the session's directory; a server that crashes is reported and
// restarted once. Server-initiated sampling is advertised only to the
// servers configured with allow_sampling (served by Options.Model);
// elicitation is, when the session can ask someone (Options.Elicit). See
// docs/mcp.md.
package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/netguard"
)

// Default limits of a Manager.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultCallTimeout  = 120 * time.Second
	// MaxStderrBytes bounds a server's stderr file per session.
	MaxStderrBytes = 1 << 20
	// DefaultMaxMessageBytes is the largest message read from a stdio
	// server (the go-sdk's bound); a tool's result is cut to 256 KiB for
	// the model anyway.
	DefaultMaxMessageBytes = sdk.DefaultMaxLineLength
)

// Options configure a Manager.
type Options struct {
	// Servers are the configured servers by slug.
	Servers map[string]config.MCPServer
	// Dir is the working directory of stdio servers ("": Maestro's).
	Dir string
	// Getenv expands ${VAR} in env and header values (nil: os.Getenv).
	Getenv func(string) string
	// LogDir receives each stdio server's stderr as mcp-<slug>.log
	// ("" discards it).
	LogDir string
	// Stderr, when set, receives each stdio server's stderr instead of
	// LogDir (a queued job's log); at most MaxStderrBytes per start.
	Stderr func(server string) io.Writer
	// Report is told of a server's failures (a crash, a restart) as one
	// line for the user; nil logs them only.
	Report func(msg string)
	// Elicit answers a server's elicitation request (nil: elicitation is
	// not advertised).
	Elicit func(ctx context.Context, server string, p *sdk.ElicitParams) (*sdk.ElicitResult, error)
	// Model serves the sampling requests of servers whose configuration
	// says allow_sampling (sampling.go); nil refuses them too. Other
	// servers are never offered sampling.
	Model llm.Provider
	// StartTimeout bounds connecting to a server and listing its tools;
	// CallTimeout bounds a tool call unless the server sets its own.
	StartTimeout, CallTimeout time.Duration
	// MaxMessageBytes bounds a message a server sends (0:
	// DefaultMaxMessageBytes): a stdio server's line, an HTTP server's
	// answer body or one event of its event stream.
	MaxMessageBytes int
	// HTTPClient carries streamable HTTP (nil: a client without a
	// global timeout: calls are bounded by their context). A request a
	// redirect sends to another origin goes through a clone of its
	// *http.Transport whose connections the network guard checks
	// (guardedTransport); with another kind of RoundTripper, such a
	// request is refused unless the server is at an internal address.
	HTTPClient *http.Client
	// Resolver looks up the names of redirect targets for the redirect
	// check and the guarded connection (nil: the system's).
	Resolver netguard.Resolver
	Logger   *slog.Logger
}

// Manager holds one session's MCP servers.
type Manager struct {
	o       Options
	servers map[string]*server
	// collided holds the server\x00tool pairs left out for a name
	// another server's tool has, said once.
	collided sync.Map
	// guard classifies redirect targets (checkRedirect) and connects
	// the requests redirected to another origin (originTransport).
	guard *netguard.Guard
	// guarded carries the requests redirected to another origin, built
	// once (guardedTransport); nil when HTTPClient's transport cannot be
	// guarded.
	guardedOnce sync.Once
	guarded     *http.Transport
	// closing ends when Close is called (stop).
	closing context.Context
	stop    context.CancelFunc
}

// NewManager returns a Manager of o.Servers; nothing is started yet.
func NewManager(o Options) *Manager {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.StartTimeout = cmp.Or(o.StartTimeout, DefaultStartTimeout)
	o.CallTimeout = cmp.Or(o.CallTimeout, DefaultCallTimeout)
	o.MaxMessageBytes = cmp.Or(o.MaxMessageBytes, DefaultMaxMessageBytes)
	m := &Manager{o: o, servers: map[string]*server{}}
	m.guard, _ = netguard.New(netguard.Policy{Resolver: o.Resolver}) // no allow list: cannot fail
	m.closing, m.stop = context.WithCancel(context.Background())
	for slug, cfg := range o.Servers {
		m.servers[slug] = &server{m: m, slug: slug, cfg: cfg}
	}
	return m
}

// Slugs are the configured servers' slugs, sorted.
func (m *Manager) Slugs() []string {
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m.servers))
}

// Configured reports whether a server named slug is configured.
func (m *Manager) Configured(slug string) bool {
	if m == nil {
		return false
	}
	_, ok := m.servers[slug]
	return ok
}

// MissingError is a required server that is not configured or does not
// start.
type MissingError struct {
	Server string
	Err    error // nil: not configured
}

func (e *MissingError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("MCP server %q is not configured (add it under mcp_servers in config.yaml, or register it with maestro serve's POST /api/v1/mcp-servers; see docs/mcp.md)", e.Server)
	}
	return fmt.Sprintf("MCP server %q did not start: %v", e.Server, e.Err)
}

func (e *MissingError) Unwrap() error { return e.Err }

// Require starts the servers slugs names, failing with a *MissingError
// naming the first one that is not configured or does not start.
func (m *Manager) Require(ctx context.Context, slugs []string) error {
	for _, slug := range slugs {
		if !m.Configured(slug) {
			return &MissingError{Server: slug}
		}
		if _, err := m.servers[slug].tools(ctx); err != nil {
			return &MissingError{Server: slug, Err: err}
		}
	}
	return nil
}

// Close stops every server that was started.
func (m *Manager) Close() error {
	if m == nil {
		return nil
	}
	m.stop() // a start in progress gives up, and lets go of its server
	// At once: each may take its grace periods (2 s, then 2 s) to stop,
	// and Ctrl-C waited for them one after the other.
	errs := make([]error, 0, len(m.servers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range m.servers {
		wg.Go(func() {
			err := s.close()
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	m.guardedOnce.Do(func() {}) // synchronizes with a build, and ends later ones
	if m.guarded != nil {
		m.guarded.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// server is one configured server and its connection, started on first
// use.
type server struct {
	m    *Manager
	slug string
	cfg  config.MCPServer

	mu       sync.Mutex
	sess     *sdk.ClientSession
	list     []offer
	down     bool // the connection ended without Close
	restarts int
	// lost is set with down when an HTTP server no longer knows the
	// session (it restarted, or ended the session): a new session is
	// started at the next use, as the MCP specification says, without
	// counting as the restart a crashed server gets.
	lost   bool
	closed bool
	stderr io.Closer
	// stale is set when the server says its tool list changed: the
	// next use lists the tools again.
	stale atomic.Bool
	// asking counts the server's elicitations waiting for an answer: a
	// call's timeout does not run out while a person is being asked.
	asking atomic.Int32
	// logged counts the bytes of an HTTP server's log messages kept in
	// Maestro's log since its start (maxHTTPLog).
	logged atomic.Int64
}

// session returns the server's live session, connecting when there is
// none: the first time, or once after a crash.
func (s *server) session(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("MCP server %s: the session is closed", s.slug)
	}
	if s.sess != nil && !s.down {
		return s.sess, nil
	}
	if s.down && !s.lost {
		if s.restarts >= 1 {
			return nil, fmt.Errorf("MCP server %s stopped again after a restart; it is not restarted twice in a session (see %s)", s.slug, s.logHint())
		}
		s.restarts++
		s.m.report(fmt.Sprintf("Restarting MCP server %s.", s.slug))
	}
	sess, proc, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.sess, s.down, s.lost, s.list = sess, false, false, nil
	go s.watch(sess, proc)
	return sess, nil
}

// watch reports a connection that ends while the session still uses it
// (a stdio server's, proc: how it ended, the end of its stderr).
func (s *server) watch(sess *sdk.ClientSession, proc *commandTransport) {
	err := sess.Wait()
	var ended, note string
	if proc != nil {
		if p := proc.proc.Load(); p != nil {
			ended, note = p.ended(), s.stderrNote(p)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.sess != sess {
		return
	}
	s.down = true
	if errors.Is(err, sdk.ErrSessionMissing) {
		if !s.lost {
			s.lost = true
			s.m.report(fmt.Sprintf("MCP server %s no longer knows Maestro's session (HTTP 404: it restarted, or ended the session); a new session is started at its next use.", s.slug))
		}
		return
	}
	msg := fmt.Sprintf("MCP server %s stopped", s.slug)
	if ended != "" {
		msg = fmt.Sprintf("MCP server %s stopped (%s)", s.slug, ended)
	}
	if err != nil {
		msg += ": " + err.Error()
	}
	msg += note
	if s.restarts == 0 {
		msg += "; it is restarted once, at its next use"
	}
	s.m.report(msg + ".")
}

// markDown records that sess failed as a connection (a call found it
// closed), unless the watcher already did.
func (s *server) markDown(sess *sdk.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == sess && !s.closed {
		s.down = true
	}
}

// markLost records that the server no longer knows sess (an HTTP 404
// for its session ID): the next use starts a new session.
func (s *server) markLost(sess *sdk.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == sess && !s.closed {
		s.down, s.lost = true, true
	}
}

func (s *server) logHint() string {
	if s.cfg.Command != "" && s.m.o.Stderr != nil {
		return "its stderr in the job's log"
	}
	if s.cfg.Command != "" && s.m.o.LogDir != "" {
		return "its stderr in " + filepath.Join(s.m.o.LogDir, "mcp-"+s.slug+".log")
	}
	return "the session log"
}

// connect starts or dials the server and initialises the session; proc
// is a stdio server's transport.
func (s *server) connect(ctx context.Context) (_ *sdk.ClientSession, proc *commandTransport, _ error) {
	var refused atomic.Int32 // an HTTP server's 4xx to a POST (refusedStatus)
	ctx, cancel := context.WithTimeoutCause(ctx, s.m.o.StartTimeout, errStartTimeout)
	defer cancel()
	// Closing the manager (the session ends: Ctrl-C) ends a start too:
	// Close waits for the server's lock, which a start holds.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer context.AfterFunc(s.m.closing, func() { stop(errClosing) })()
	var transport sdk.Transport
	if s.cfg.Command != "" {
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Dir = s.m.o.Dir
		cmd.Env = os.Environ()
		for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
			cmd.Env = append(cmd.Env, k+"="+s.expand("env."+k, s.cfg.Env[k]))
		}
		stderr, err := s.openStderr()
		if err != nil {
			return nil, nil, err
		}
		proc = &commandTransport{cmd: cmd, stderr: stderr, grace: 2 * time.Second, maxLine: s.m.o.MaxMessageBytes}
		transport = proc
	} else {
		s.logged.Store(0)
		hc := s.m.o.HTTPClient
		if hc == nil {
			hc = &http.Client{}
		}
		origin, err := url.Parse(s.cfg.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to MCP server %s: %w", s.slug, err)
		}
		var base http.RoundTripper = originTransport{own: cmp.Or[http.RoundTripper](hc.Transport, http.DefaultTransport), s: s, origin: origin}
		if len(s.cfg.Headers) > 0 {
			h := http.Header{}
			for k, v := range s.cfg.Headers {
				h.Set(k, s.expand("headers."+k, v))
			}
			base = headerTransport{base: base, h: h, origin: origin}
		}
		c := *hc
		c.CheckRedirect = s.checkRedirect(hc.CheckRedirect)
		c.Transport = boundedTransport{
			base: sseHeaderTransport{base: base, wait: sseHeaderWait, slug: s.slug, refused: &refused},
			max:  s.m.o.MaxMessageBytes, slug: s.slug,
		}
		transport = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &c, MaxRetries: 1, MaxEventSize: s.m.o.MaxMessageBytes}
	}
	opts := &sdk.ClientOptions{Logger: s.m.o.Logger, Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.stale.Store(true) },
		LoggingMessageHandler:  func(_ context.Context, req *sdk.LoggingMessageRequest) { s.serverLog(proc, req.Params) }}
	if s.cfg.AllowSampling {
		opts.CreateMessageHandler = s.sample
	}
	if elicit := s.m.o.Elicit; elicit != nil {
		opts.ElicitationHandler = func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			s.asking.Add(1)
			defer s.asking.Add(-1)
			return elicit(ctx, s.slug, req.Params)
		}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "maestro", Version: "1"}, opts)
	sess, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, nil, s.connectError(ctx, proc, err, int(refused.Load()))
	}
	s.m.o.Logger.Info("MCP server connected", "server", s.slug)
	return sess, proc, nil
}

// connectError says why the server did not start: how a stdio server
// ended and the end of its stderr, a start that ran out of time, what it
// wrote on stdout that is not JSON-RPC.
//
// refused is the HTTP status (a 4xx, refusedStatus) an HTTP server
// answered a POST with, if it did: a URL that is no streamable HTTP
// endpoint, often an older HTTP+SSE server's (…/sse), said "Not Found"
// alone, and another service's URL (maestro serve's /api/v1/tasks)
// "Bad Request" alone. A 4xx whose body is a JSON-RPC error came from
// an MCP server, which said why: no hint then, but for 404 and 405.
func (s *server) connectError(ctx context.Context, proc *commandTransport, err error, refused int) error {
	var p *process
	if proc != nil {
		p = proc.proc.Load()
	}
	var msg string
	switch {
	case context.Cause(ctx) == errClosing:
		msg = fmt.Sprintf("MCP server %s: its start was given up, the session closing", s.slug)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && context.Cause(ctx) == errStartTimeout:
		msg = fmt.Sprintf("MCP server %s did not answer its initialize request within %s", s.slug, s.m.o.StartTimeout)
	case p != nil && p.ended() != "":
		msg = fmt.Sprintf("MCP server %s exited before it answered (%s)", s.slug, p.ended())
	case s.cfg.URL != "":
		u, _ := url.Parse(s.cfg.URL)
		at := s.cfg.URL
		if u != nil {
			at = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String() // a token in the query stays out
		}
		msg = fmt.Sprintf("connect to MCP server %s at %s: %v", s.slug, at, err)
		var rpcErr *jsonrpc.Error
		if refused == http.StatusNotFound || refused == http.StatusMethodNotAllowed || (refused != 0 && !errors.As(err, &rpcErr)) {
			msg += fmt.Sprintf(" (HTTP %d to its POST: is the URL the server's streamable HTTP endpoint, often …/mcp? "+
				"Maestro speaks streamable HTTP, not the older HTTP+SSE transport, whose URL often ends in /sse)", refused)
		}
	default:
		msg = fmt.Sprintf("connect to MCP server %s: %v", s.slug, err)
	}
	return &startError{msg: msg + s.stderrNote(p), err: err}
}

// maxLogMessage bounds what is kept of one log message of a server.
const maxLogMessage = 4 << 10

// maxHTTPLog bounds what is kept of an HTTP server's log messages per
// start of the server, as a stdio server's log file is bounded: a server
// that sent them without end on its event stream filled Maestro's log
// (serve's, shared by every session and job).
const maxHTTPLog = 1 << 20

// serverLog keeps a log message the server sent (notifications/message):
// a stdio server's in its log, with its stderr; an HTTP server's in
// Maestro's log. They were dropped, so what a server said of a failing
// or long call (FastMCP's ctx.info, the TypeScript SDK's
// sendLoggingMessage) was nowhere.
func (s *server) serverLog(proc *commandTransport, m *sdk.LoggingMessageParams) {
	if m == nil {
		return
	}
	text, ok := m.Data.(string)
	if !ok {
		data, _ := json.Marshal(m.Data)
		text = string(data)
	}
	if len(text) > maxLogMessage {
		text = strings.ToValidUTF8(text[:maxLogMessage], "") + "…"
	}
	var p *process
	if proc != nil {
		p = proc.proc.Load()
	}
	if p == nil || p.log == nil {
		switch n := s.logged.Add(int64(len(text))); {
		case n <= maxHTTPLog:
			s.m.o.Logger.Info("MCP server log message", "server", s.slug, "level", m.Level, "logger", m.Logger, "data", text)
		case n-int64(len(text)) <= maxHTTPLog:
			s.m.o.Logger.Warn("MCP server log messages dropped: the server sent more than the bound since its start",
				"server", s.slug, "bound", sizeText(maxHTTPLog))
		}
		return
	}
	from := ""
	if m.Logger != "" {
		from = " " + m.Logger
	}
	fmt.Fprintf(p.log, "[%s%s] %s\n", m.Level, from, strings.ReplaceAll(text, "\n", "\n  "))
}

// expand replaces ${VAR} in the value of field (env.X, headers.X) from
// Maestro's environment. A variable that is empty or not set is said as
// a status line: it became "", and an "Unauthorized" from the server
// did not say why.
func (s *server) expand(field, value string) string {
	return os.Expand(value, func(name string) string {
		v := s.m.o.Getenv(name)
		if v == "" {
			s.m.report(fmt.Sprintf("MCP server %s: %s uses ${%s}, which is not set (or empty) in Maestro's environment: it is replaced by nothing.", s.slug, field, name))
		}
		return v
	})
}

// stderrNote is the end of p's stderr and where the rest is, to follow
// a message about the server; "" for a server that is not a command.
func (s *server) stderrNote(p *process) string {
	if p == nil {
		return ""
	}
	note := p.skipNote()
	if end := p.stderrEnd(); end != "" {
		note += "; its stderr ends " + end
	}
	if s.m.o.Stderr != nil || s.m.o.LogDir != "" {
		note += " (" + s.logHint() + ")"
	}
	return note
}

// errClosing ends a start when the manager closes.
var errClosing = errors.New("the session is closing")

// errStartTimeout ends a start that ran past StartTimeout.
var errStartTimeout = errors.New("the MCP server's start timed out")

// startError is a server that did not start: msg says why, err is the
// SDK's error.
type startError struct {
	msg string
	err error
}

func (e *startError) Error() string { return e.msg }
func (e *startError) Unwrap() error { return e.err }

// openStderr is where a stdio server's stderr goes: the server's log
// file in LogDir (or Options.Stderr), bounded by MaxStderrBytes; nil
// discards it.
func (s *server) openStderr() (io.Writer, error) {
	if s.m.o.Stderr != nil {
		return &capped{w: s.m.o.Stderr(s.slug), left: MaxStderrBytes}, nil
	}
	if s.m.o.LogDir == "" {
		return nil, nil
	}
	if s.stderr != nil {
		s.stderr.Close()
	}
	f, err := os.OpenFile(filepath.Join(s.m.o.LogDir, "mcp-"+s.slug+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("MCP server %s: open its stderr log: %w", s.slug, err)
	}
	s.stderr = f
	return &capped{w: f, left: MaxStderrBytes}, nil
}

// tools lists the server's tools as offered to the model (once per
// connection, and again when the server says its list changed).
func (s *server) tools(ctx context.Context) ([]offer, error) {
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	list := s.list
	s.mu.Unlock()
	if list != nil && !s.stale.Swap(false) {
		return list, nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.m.o.StartTimeout, errStartTimeout)
	defer cancel()
	var listed []*sdk.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil && context.Cause(ctx) == errStartTimeout {
			return nil, fmt.Errorf("MCP server %s did not list its tools within %s: %w", s.slug, s.m.o.StartTimeout, err)
		}
		if err != nil {
			return nil, fmt.Errorf("list the tools of MCP server %s: %w", s.slug, err)
		}
		listed = append(listed, t)
	}
	list = s.offers(listed)
	s.mu.Lock()
	if s.sess == sess {
		s.list = list
	}
	s.mu.Unlock()
	return list, nil
}

// call calls a tool. A call that finds the connection closed marks the
// server down (restarted at its next use) and fails: it is not repeated,
// since the tool may have acted before the server stopped.
func (s *server) call(ctx context.Context, name string, args any) (*sdk.CallToolResult, error) {
	timeout := s.m.o.CallTimeout
	if s.cfg.Timeout > 0 {
		timeout = time.Duration(s.cfg.Timeout) * time.Second
	}
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The timeout runs while the server works, not while it waits for
	// a person to answer its elicitation: it is armed again then.
	var timer *time.Timer
	timer = time.AfterFunc(timeout, func() {
		if s.asking.Load() > 0 {
			timer.Reset(timeout)
			return
		}
		cancel(errCallTimeout)
	})
	defer timer.Stop()
	res, err := sess.CallTool(cctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if errors.Is(err, sdk.ErrSessionMissing) && cctx.Err() == nil {
		// The server answered 404 for the session (it restarted, or
		// ended the session): the MCP specification has the client
		// start a new session. The server did not run the call (it
		// knew no session to run it in), so it is sent once more, on
		// the new session. This call used to fail, and every later
		// one once the server had restarted twice.
		s.markLost(sess)
		if sess, err = s.session(cctx); err != nil {
			return nil, err
		}
		res, err = sess.CallTool(cctx, &sdk.CallToolParams{Name: name, Arguments: args})
	}
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, sdk.ErrConnectionClosed):
		s.markDown(sess)
		return nil, fmt.Errorf("MCP server %s stopped during the call: %w", s.slug, err)
	case overBound(err):
		// The SDK has ended the connection: the next call restarts
		// the server rather than fail on the dead one.
		s.markDown(sess)
		return nil, fmt.Errorf("MCP server %s answered with a message over %s, the most Maestro reads from a server "+
			"(the model gets 256 KiB of a result): the connection is closed and the server is restarted at its next use",
			s.slug, sizeText(s.m.o.MaxMessageBytes))
	case errors.Is(context.Cause(cctx), errCallTimeout) && ctx.Err() == nil:
		limit := fmt.Sprintf("the default; a timeout: of seconds under mcp_servers.%s in config.yaml sets another", s.slug)
		if s.cfg.Timeout > 0 {
			limit = fmt.Sprintf("its timeout: %d", s.cfg.Timeout)
		}
		return nil, fmt.Errorf("MCP server %s did not answer within %s (%s): %w", s.slug, timeout, limit, context.DeadlineExceeded)
	}
	return nil, err
}

// errCallTimeout ends a call that ran past its timeout.
var errCallTimeout = errors.New("the MCP call timed out")

func (s *server) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var err error
	if s.sess != nil {
		err = s.sess.Close()
		s.sess = nil
	}
	if s.stderr != nil {
		s.stderr.Close()
	}
	if err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
		return fmt.Errorf("stop MCP server %s: %w", s.slug, err)
	}
	return nil
}

func (m *Manager) report(msg string) {
	m.o.Logger.Warn(msg)
	if m.o.Report != nil {
		m.o.Report(msg)
	}
}

// sseHeaderWait bounds the wait for the answer to the GET that opens a
// server's event stream.
var sseHeaderWait = 5 * time.Second

// sseHeaderTransport bounds the wait for the headers of the answer to a
// GET that opens a server's event stream (the standalone SSE stream; not
// a resumed one, which names its Last-Event-ID). The go-sdk sends it
// within Connect, under a context of its own that neither the start
// timeout nor Ctrl-C ends: a server that held its answer (one that
// sends its headers with its first event) hung the session's start, and
// the process, for good.
//
// It also records in refused a 4xx answering a POST (refusedStatus).
type sseHeaderTransport struct {
	base    http.RoundTripper
	wait    time.Duration
	slug    string
	refused *atomic.Int32
}

func (t sseHeaderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		resp, err := t.base.RoundTrip(r)
		if err == nil && t.refused != nil && refusedStatus(resp.StatusCode) {
			t.refused.Store(int32(resp.StatusCode))
		}
		return resp, err
	}
	if r.Method != http.MethodGet || r.Header.Get("Last-Event-ID") != "" {
		return t.base.RoundTrip(r)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	late := errors.New("late")
	timer := time.AfterFunc(t.wait, func() { cancel(late) })
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if !timer.Stop() && context.Cause(ctx) == late {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("MCP server %s did not answer the GET that opens its event stream within %s (a server answers it at once, with text/event-stream or 405)", t.slug, t.wait)
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

// refusedStatus reports whether a status answering a POST may say the
// URL is no streamable HTTP endpoint: a 4xx but 401, 403 and 407 (the
// credentials), 408 and 429 (the server's load), which say something
// else.
func refusedStatus(code int) bool {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return code >= 400 && code < 500
}

// cancelOnClose releases a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// headerTransport adds the configured headers to every request sent to
// the configured URL's origin. They are credentials for that server: a
// request a redirect sends elsewhere goes without them (as a browser drops
// Authorization on a cross-origin redirect; Go's client would drop only
// Authorization, and only from the request's own headers, never from
// these).
type headerTransport struct {
	base   http.RoundTripper
	h      http.Header
	origin *url.URL
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !llm.SameOrigin(r.URL, t.origin) {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// maxRedirects is how many redirects an HTTP server's request follows
// (Go's default).
const maxRedirects = 10

// checkRedirect refuses a redirect that leaves the server's configured
// origin for an address the network guard refuses (loopback, private,
// link-local, cloud metadata…, docs/web-tools.md), unless the server is
// itself at such an address (a local server may send its clients to
// another local one). A 307 keeps the method and the body: a server on
// the internet that redirected its POSTs made Maestro send JSON of the
// server's choosing (and tool arguments the model was talked into) to a
// service on Maestro's machine or network, blind but with effect. prev
// is the client's own policy, applied after.
func (s *server) checkRedirect(prev func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("MCP server %s: stopped after %d redirects", s.slug, maxRedirects)
		}
		origin, err := url.Parse(s.cfg.URL)
		if err != nil {
			return err
		}
		if !llm.SameOrigin(req.URL, origin) && !redirectedByInternal(s.m.guard, req) {
			if _, err := s.m.guard.CheckURL(req.Context(), req.URL); err != nil {
				return s.refused(err)
			}
		}
		if prev != nil {
			return prev(req, via)
		}
		return nil
	}
}

// peerKey is the context key of a *peer.
type peerKey struct{}

// peer is the address a request's connection was made to.
type peer struct{ addr atomic.Pointer[netip.Addr] }

// withPeer is r recording its connection's address (GotConn) in a *peer
// in its context, which the Transport's answer keeps (Response.Request).
func withPeer(r *http.Request) *http.Request {
	p := &peer{}
	ctx := context.WithValue(r.Context(), peerKey{}, p)
	return r.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if ap, err := netip.ParseAddrPort(info.Conn.RemoteAddr().String()); err == nil {
			a := ap.Addr().Unmap()
			p.addr.Store(&a)
		}
	}}))
}

// proxied reports whether rt sends r through a proxy (HTTPS_PROXY: Go's
// transport does not proxy loopback addresses and localhost): the address
// its connection is made to is then the proxy's, which says nothing of the
// server's (a proxy on 127.0.0.1 would have made every server local).
func proxied(rt http.RoundTripper, r *http.Request) bool {
	t, ok := rt.(*http.Transport)
	if !ok || t.Proxy == nil {
		return false
	}
	u, err := t.Proxy(r)
	return err != nil || u != nil
}

// redirectedByInternal reports whether r follows a redirect answered by a
// server at an address the network guard refuses (loopback, private…):
// the address its connection was made to, not what its name resolves to
// now, which a server's own DNS could answer to have its redirects to
// internal addresses followed. Such a server's redirects to other
// internal addresses are followed, and connected to without the guard.
// Unknown (a transport that keeps no Response.Request) is not internal.
func redirectedByInternal(g *netguard.Guard, r *http.Request) bool {
	if r.Response == nil || r.Response.Request == nil {
		return false
	}
	p, _ := r.Response.Request.Context().Value(peerKey{}).(*peer)
	if p == nil {
		return false
	}
	a := p.addr.Load()
	return a != nil && g.Classify(*a) != ""
}

// refused is the error of a redirect to another origin that the network
// guard refused.
func (s *server) refused(err error) error {
	return fmt.Errorf("MCP server %s redirected to another origin, refused: %w", s.slug, err)
}

// originTransport sends the requests to the server's origin through own
// (the configured client's transport) and those a redirect sent to
// another origin through the network guard's dialer, which checks the
// address the connection is made to: checkRedirect resolves the target's
// name when the redirect is seen, but the connection resolved it again,
// so a name answering a public address to the check and 127.0.0.1 or
// 169.254.169.254 to the connection (DNS rebinding) got the server's POST
// to a service on Maestro's machine or network. A server itself at an
// internal address (redirectedByInternal) keeps own for its redirects
// too. A request through own records its connection's address (withPeer).
type originTransport struct {
	own    http.RoundTripper
	s      *server
	origin *url.URL
}

func (t originTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if llm.SameOrigin(r.URL, t.origin) || redirectedByInternal(t.s.m.guard, r) {
		if proxied(t.own, r) {
			return t.own.RoundTrip(r) // its connection's address is the proxy's
		}
		return t.own.RoundTrip(withPeer(r))
	}
	guarded := t.s.m.guardedTransport()
	if guarded == nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, t.s.refused(errors.New("the configured HTTP client's transport cannot connect through the network guard"))
	}
	resp, err := guarded.RoundTrip(r)
	var blocked *netguard.BlockedError
	if errors.As(err, &blocked) {
		err = t.s.refused(err)
	}
	return resp, err
}

// guardedTransport is the transport of requests redirected to another
// origin: a clone of the configured client's (or Go's default)
// *http.Transport that connects through the guard, its dialer (a test's)
// given only checked addresses, and without a proxy from the environment
// (the guard would check the proxy's address, not the destination's). Nil
// when the configured transport is no *http.Transport.
func (m *Manager) guardedTransport() *http.Transport {
	m.guardedOnce.Do(func() {
		base, ok := http.DefaultTransport.(*http.Transport)
		var dial func(ctx context.Context, network, addr string) (net.Conn, error)
		if hc := m.o.HTTPClient; hc != nil && hc.Transport != nil {
			base, ok = hc.Transport.(*http.Transport)
			if ok {
				dial = base.DialContext
			}
		}
		if !ok {
			return
		}
		t := base.Clone()
		t.Proxy = nil
		t.DialContext = m.guard.DialVia(dial)
		t.Dial, t.DialTLS, t.DialTLSContext = nil, nil, nil //nolint:staticcheck // Dial and DialTLS would bypass the guard
		m.guarded = t
	})
	return m.guarded
}

// boundedTransport bounds what is read of an HTTP server's answer to max
// bytes, as a stdio server's line is: the go-sdk reads a JSON answer (and
// the body of a 4xx or 5xx) whole into memory, so a hostile or broken
// server that answered with an endless body took all of Maestro's memory
// (a 400 MiB answer to initialize: 2.7 GB resident). An event stream is
// not bounded as a whole (it lasts); its events are, by the transport's
// MaxEventSize.
type boundedTransport struct {
	base http.RoundTripper
	max  int
	slug string
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || t.max <= 0 {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" && resp.StatusCode/100 == 2 {
		return resp, nil
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: int64(t.max), max: t.max, slug: t.slug}
	return resp, nil
}

// errOverBound is the text of the error a message over the bound gives:
// the SDK's of a stdio line, or boundedBody's (which the SDK passes on as
// text, not wrapped).
var errOverBound = []string{"exceeded the configured maximum line length", "SSE event exceeded", "answer longer than the bound"}

// overBound reports whether err says a server's message was over the
// bound.
func overBound(err error) bool {
	return slices.ContainsFunc(errOverBound, func(s string) bool { return strings.Contains(err.Error(), s) })
}

// boundedBody is an answer body that fails once more than max bytes
// come.
type boundedBody struct {
	io.ReadCloser
	left int64
	max  int
	slug string
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("MCP server %s sent an answer longer than the bound of %s", b.slug, sizeText(b.max))
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// capped writes up to left bytes to w, then discards the rest (a server
// that floods stderr cannot fill the disk).
type capped struct {
	w    io.Writer
	left int64
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if c.left <= 0 {
		return n, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	c.left -= int64(len(p))
	if _, err := c.w.Write(p); err != nil {
		return n, err
	}
	return n, nil
}
