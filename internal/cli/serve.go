package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/sessionowner"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/webui"
)

// defaultListen is where `maestro serve` listens unless --listen says
// otherwise: loopback only, so no token is needed.
const defaultListen = "127.0.0.1:7878"

// minSessionStaleAfter is the shortest --session-stale-after, as for
// worker's --lease: a third of it is the heartbeat period.
const minSessionStaleAfter = 300 * time.Millisecond

// serveOptions are the flags of `maestro serve`.
type serveOptions struct {
	Listen    string
	DB        string
	DataDir   string
	Artifacts string
	Workers   int
	Token     string
	MaxUpload int64
	Name      string
	// WorkspaceRoots bound a remote-attach session's workspaceRoot.
	WorkspaceRoots []string
	// AllowedHosts are public names clients may use in Host.
	AllowedHosts []string
	// Advertise, SessionProxy and SessionStaleAfter share live sessions
	// among serve processes (docs/scale-out.md, "Live sessions").
	Advertise         string
	SessionProxy      bool
	SessionStaleAfter time.Duration
	// MoveArtifacts replaces the database's artifact location.
	MoveArtifacts bool
	// MaxConns bounds the open connections (event streams included).
	MaxConns int
}

func newServeCmd(io *IOStreams) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Run the REST API, the web UI, workers and the cron scheduler in one process",
		Long: `Run Maestro as a service: the REST API (docs/api.md), --workers job workers and
the maintenance loop (reaps jobs of dead workers, fires cron schedules).
Submit and follow work with 'maestro tasks' or any HTTP client.

The store is SQLite at <data dir>/maestro.db by default, nothing to install;
task workspaces are <data dir>/tasks/<id>/ (input/ for uploads, output/ for
deliverables). With --db postgres://… (or MAESTRO_DB) several 'maestro serve'
and 'maestro worker' processes on several machines share one queue.

Authentication: clients send 'Authorization: Bearer <token>'. The token is
--token or $MAESTRO_API_TOKEN. On a loopback address (the default
` + defaultListen + `) it is optional; on any other address serve refuses to start
without one, since anyone reaching the port could run agents. When a token is
set every API call needs it (/healthz and /readyz excepted).

Every request must name the server in Host: localhost, 127.0.0.1, [::1],
an IP address when a token is set, the --listen host, or a name given with
--allowed-host (or $MAESTRO_ALLOWED_HOSTS, comma-separated); anything else
is a DNS-rebinding page and gets 403. Requests a browser marks cross-site
are refused, and JSON bodies need Content-Type: application/json. At most
--max-connections connections are open at once (event streams count):
past that an idle keep-alive connection is closed to make room, or, when
none is idle, the request is answered 503 with Retry-After and a warning
is logged (at most once a minute). A client address holding more than half
of them loses its oldest GET (an event stream) to a request from another
address; behind a reverse proxy all clients share the proxy's address, so
limit them there. See "HTTP edge" in docs/sandbox.md.

Web UI: / serves the team's console (tasks, live runs, questions,
deliverables, schedules; docs/web-ui.md), embedded in the binary. Its files
need no token; with one, the app asks for it once.

Remote attach: /api/headless/ serves live agent sessions over HTTP + SSE
(docs/remote-attach.md), behind the same token. POST /api/headless/sessions
creates one (model as for 'maestro run', none configured: the replay demo);
its workspace is workspaceRoot (an absolute path to an existing directory) or
a fresh directory under <data dir>/workspaces/; its log is kept under
<data dir>/sessions/<id>/events.jsonl (the same log 'maestro run --resume ID'
continues when the data dir is ~/.maestro).
Controllers and viewers attach to it, a controller lease decides who drives.
With several serve processes on one PostgreSQL, each records the sessions it
owns with its --advertise address; a request for another's session is
proxied to it (or answered 409 with its address with --session-proxy=false),
and the sessions of a serve that stopped heartbeating end (docs/scale-out.md).

SIGINT or SIGTERM stops accepting work, ends open event streams, lets running
jobs finish for up to 10 s (a second signal ends the wait) and releases the
rest back to the queue; live sessions are shut down and their logs saved.`,
		Example: `  maestro serve                                  # http://127.0.0.1:7878, SQLite in ~/.maestro
  maestro serve --workers 4 --data-dir /srv/maestro
  MAESTRO_API_TOKEN=$(openssl rand -hex 32) maestro serve --listen 0.0.0.0:7878
  maestro serve --db postgres://maestro@db/maestro --listen :7878 --token "$TOKEN"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), io, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", defaultListen, "address to listen on (host:port; a port of 0 picks a free one)")
	f.StringVar(&o.DB, "db", "", "job store: postgres://… URL (default: MAESTRO_DB, else SQLite <data dir>/maestro.db)")
	f.StringVar(&o.DataDir, "data-dir", "", "data directory: SQLite database and task workspaces (default ~/.maestro or $MAESTRO_HOME)")
	f.StringVar(&o.Artifacts, "artifacts", "", artifactsFlag)
	f.BoolVar(&o.MoveArtifacts, "move-artifacts", false, moveArtifactsFlag)
	f.IntVar(&o.Workers, "workers", 2, "jobs to run at once in this process (0: API and scheduler only, with maestro worker processes on a shared PostgreSQL)")
	f.StringVar(&o.Token, "token", "", "bearer token clients must send (default $MAESTRO_API_TOKEN; required unless --listen is loopback)")
	f.Int64Var(&o.MaxUpload, "max-upload", server.DefaultMaxUpload, "largest accepted upload in bytes")
	f.StringVar(&o.Name, "name", "", "this process's name (at most 100 bytes), shown as the lease owner (default host:pid); on a shared PostgreSQL database a name a running serve or worker holds is refused")
	f.StringArrayVar(&o.AllowedHosts, "allowed-host", nil, "public name clients may use in Host, e.g. maestro.example.com or *.example.com (repeatable; default $MAESTRO_ALLOWED_HOSTS; loopback names always work)")
	f.StringVar(&o.Advertise, "advertise", "", "base URL other serve processes reach this one at, to proxy its live sessions (default $"+advertiseEnv+", else the --listen address, a wildcard host replaced by this machine's address)")
	f.BoolVar(&o.SessionProxy, "session-proxy", true, "proxy requests for live sessions other serve processes own to them (false: answer 409 with the owner's address)")
	f.DurationVar(&o.SessionStaleAfter, "session-stale-after", sessionowner.DefaultStaleAfter, "how long a serve may miss its heartbeats before the other serve processes end its live sessions")
	f.IntVar(&o.MaxConns, "max-connections", httpedge.DefaultMaxConns, "most connections open at once, event streams included; past it new requests get 503 with Retry-After")
	f.StringArrayVar(&o.WorkspaceRoots, "workspace-root", nil, "directory a remote-attach session's workspaceRoot must lie in (repeatable; default: any directory on loopback, none otherwise)")
	return cmd
}

func runServe(ctx context.Context, io *IOStreams, o serveOptions) error {
	if o.Workers < 0 {
		return usageErr("--workers: expected 0 or more, found %d", o.Workers)
	}
	if o.MaxConns <= 0 {
		return usageErr("--max-connections: expected a positive number of connections, found %d", o.MaxConns)
	}
	if o.SessionStaleAfter < minSessionStaleAfter {
		// Its third is the heartbeat period: 0 or less was silently the
		// default, a few nanoseconds crashed the serve (NewTicker).
		return usageErr("--session-stale-after must be at least %s, got %s", minSessionStaleAfter, o.SessionStaleAfter)
	}
	if o.MaxUpload <= 0 {
		return usageErr("--max-upload: expected a positive number of bytes, found %d", o.MaxUpload)
	}
	loopback, err := httpedge.LoopbackListen(o.Listen)
	if err != nil {
		return usageErr("--listen: expected host:port such as %s, found %q", defaultListen, o.Listen)
	}
	if _, port, _ := net.SplitHostPort(o.Listen); port != "" {
		// As hosted-runner says it; net.Listen's "address 99999: invalid
		// port" came after the store was opened, with exit status 1.
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return usageErr("--listen %s: port %q is not a number from 0 to 65535", o.Listen, port)
		}
	}
	token := o.Token
	if token == "" && io.Getenv != nil {
		token = io.Getenv("MAESTRO_API_TOKEN")
	}
	if !loopback && token == "" {
		return usageErr("--listen %s accepts connections from other machines, so a token is required: "+
			"pass --token or set MAESTRO_API_TOKEN (clients send it as 'Authorization: Bearer <token>'), "+
			"or listen on a loopback address such as %s", o.Listen, defaultListen)
	}
	if len(o.AllowedHosts) == 0 && io.Getenv != nil {
		for _, h := range strings.Split(io.Getenv("MAESTRO_ALLOWED_HOSTS"), ",") {
			if h = strings.TrimSpace(h); h != "" {
				o.AllowedHosts = append(o.AllowedHosts, h)
			}
		}
	}
	if o.Advertise == "" && io.Getenv != nil {
		o.Advertise = io.Getenv(advertiseEnv)
	}
	if h := advertiseHost(o.Advertise); h != "" {
		// Proxied requests name this serve as --advertise does.
		o.AllowedHosts = append(o.AllowedHosts, h)
	}
	if err := (&httpedge.Policy{Listen: o.Listen, AllowedHosts: o.AllowedHosts, Token: token, RequireAuth: token != ""}).Validate(); err != nil {
		return usageErr("--allowed-host: %v", err)
	}
	if err := checkName(o.Name); err != nil {
		return err
	}
	if err := checkStoreFlags(o.DB, o.Artifacts); err != nil {
		return err
	}
	p, err := startJobProcess(ctx, io, o.Name, o.DB, o.DataDir)
	if err != nil {
		return failErr(err)
	}
	defer p.Close()
	ctx, log, st, dataDir := p.ctx, p.log, p.st, p.dataDir
	o.Name = p.name
	// The pieces the API accepts are the ones jobs run with: built-ins,
	// the user's piece files, then pieces stored through the API.
	home, err := config.Home(io.Getenv)
	if err != nil {
		return failErr(err)
	}
	catalog, err := piece.Load(ctx, filepath.Join(home, "pieces"))
	if err != nil {
		return failErr(err)
	}
	// Live agent sessions for remote attach (docs/remote-attach.md).
	h, err := host.New(host.Options{Getenv: io.Getenv, Home: home, DataDir: dataDir, Logger: log})
	if err != nil {
		return failErr(err)
	}
	sessions, err := h.AttachSessions(host.AttachPolicy{Workspaces: filepath.Join(dataDir, "workspaces"), Roots: o.WorkspaceRoots, AnyRoot: loopback})
	if err != nil {
		return hostErr(err)
	}
	defer sessions.Close()
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return failErr(fmt.Errorf("--listen %s: %w", o.Listen, err))
	}
	defer ln.Close()
	artifacts, err := host.Artifacts(ctx, o.Artifacts, h.Config(), io.Getenv)
	if err != nil {
		return failErr(err)
	}
	// Before the live sessions of an earlier serve under this name are
	// ended (serveCluster): a running one keeps its name.
	shared, err := host.JoinStore(ctx, st, host.ProcessOptions{
		Kind: store.ProcessServe, Name: o.Name, Address: advertised(o, ln.Addr()), Artifacts: artifacts,
		ArtifactsFrom: artifactsFrom(o.Artifacts, h.Config().Artifacts, h.Config().Path),
		Move:          o.MoveArtifacts, StaleAfter: o.SessionStaleAfter,
	}, log)
	if err != nil {
		return failErr(err)
	}
	defer shared.Close()
	cluster, err := serveCluster(ctx, st, sessions, o, ln.Addr(), log)
	if err != nil {
		return err
	}
	defer cluster.Close()
	attach := newServeAttach(cluster, token, log)
	defer attach.Close()
	mcpHTTP, err := serveMCP(io, host.AttachPolicy{Workspaces: filepath.Join(dataDir, "workspaces"), Roots: o.WorkspaceRoots, AnyRoot: loopback}, log)
	if err != nil {
		return hostErr(err)
	}
	defer mcpHTTP.Close()
	metrics := queue.NewMetrics()
	info := server.Info{Version: buildVersion(), Store: storeKind(st), StartedAt: time.Now()}
	var pool *queue.Pool
	if o.Workers > 0 {
		runner, executor, err := jobRunner(ctx, io, h, st, dataDir, artifacts)
		if err != nil {
			return failErr(err)
		}
		defer host.CloseRunner(runner) // runs parked on an MCP question stop with the process
		pool, err = queue.NewPool(queue.Config{Store: st, Runner: runner, Name: o.Name, Workers: o.Workers, Metrics: metrics, Logger: log})
		if err != nil {
			return failErr(err)
		}
		info.ExecutorDefault, info.Worker = executor, o.Name
		info.Agents = installedAgents(io)
		info.Host, _ = os.Hostname()
	}
	ui, err := webui.New(webui.Dist())
	if err != nil {
		return failErr(err)
	}
	if !ui.Built() {
		log.Warn("this binary was built without the web UI: / shows how to build it (make web; docs/web-ui.md)")
	}
	dropAfter, err := dropStreamsAfter(io.Getenv)
	if err != nil {
		return usageErr("%v", err)
	}
	box, err := secrets.FromEnv(io.Getenv)
	if err != nil {
		return usageErr("%v", err)
	}
	api, err := server.New(server.Config{
		Pieces: catalog,
		Store:  st, DataDir: dataDir, TaskDir: queue.TaskDir, Token: token, RequireAuth: token != "",
		Listen: o.Listen, AllowedHosts: o.AllowedHosts,
		Metrics: metrics, NextRun: scheduleNextRun(io.Getenv), MaxUpload: o.MaxUpload, Logger: log,
		Headless: cluster.Handler(attach), UI: ui, Info: info, DropStreamsAfter: dropAfter,
		Secrets: box, Artifacts: artifacts,
		MCPLookup: host.MCPLookup(h.Config().MCPServers, st, box), MCP: mcpHTTP.handler,
		AgentsDir: agentsDir(home), Getenv: io.Getenv,
		BudgetUSDMonth: h.Config().BudgetUSDMonth, MCPServerNames: slices.Sorted(maps.Keys(h.Config().MCPServers)),
	})
	if err != nil {
		return failErr(err)
	}
	// Requests (event streams above all) end when serving stops.
	reqCtx, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	hs := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// One client's idle or streaming connections must not use up the
	// process's descriptors for everyone.
	limited := httpedge.LimitConns(ln, o.MaxConns, "--max-connections", log)
	limited.Configure(hs, func(r *http.Request) httpedge.Surface {
		if strings.HasPrefix(r.URL.Path, "/api/headless/") {
			return httpedge.Headless
		}
		return httpedge.REST
	})
	auth := "no token (loopback only)"
	if token != "" {
		auth = "bearer token required"
	}
	if _, lite := st.(*sqlite.Store); lite && o.Workers == 0 {
		// SQLite is one process's: no maestro worker can open it beside
		// this one, so nothing would ever run the jobs queued here.
		fmt.Fprintf(io.ErrOut, "maestro serve: warning: --workers 0 on SQLite: no job will run, since no other process (maestro worker) can open %s while this one holds it; tasks stay queued until a serve with workers opens it. Give this serve workers, or share a PostgreSQL database (--db postgres://…) with maestro worker processes\n", filepath.Join(dataDir, "maestro.db"))
	}
	fmt.Fprintf(io.Out, "maestro serve: API and web UI on http://%s (%s), %d worker(s), data %s, %s\n", ln.Addr(), auth, o.Workers, dataDir, filesAt(artifacts))

	var wg sync.WaitGroup
	var serveErr, poolErr, maintErr error
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		if err := hs.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
			cancel()
		}
	})
	// A part that fails stops the others: a server without its workers
	// or its scheduler would accept work it never does.
	if pool != nil {
		poolDone := make(chan struct{})
		go endGraceOnSecondSignal("maestro serve", ctx, poolDone, pool, io)
		wg.Go(func() {
			defer close(poolDone)
			if poolErr = pool.Run(runCtx); poolErr != nil {
				cancel()
			}
		})
	}
	wg.Go(func() { cluster.Run(runCtx) })
	wg.Go(func() { shared.Run(runCtx) })
	wg.Go(func() { h.PublishJobs(runCtx, st, dataDir) }) // docs/events.md, "Platform events"
	wg.Go(func() {
		if maintErr = queue.RunMaintenance(runCtx, queue.MaintenanceConfig{Store: st, Owner: o.Name, Logger: log, DataDir: dataDir, Artifacts: artifacts}); maintErr != nil {
			cancel()
		}
	})
	<-runCtx.Done()
	if pool != nil {
		fmt.Fprintln(io.ErrOut, stoppingJobs("maestro serve"))
	} else {
		fmt.Fprintln(io.ErrOut, "maestro serve: stopping")
	}
	endRequests()
	attach.Close()
	shutCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	if err := hs.Shutdown(shutCtx); err != nil {
		hs.Close()
	}
	wg.Wait()
	// Live sessions end after the last request: runs aborted, logs saved.
	sessErr := cluster.Close()
	if err := errors.Join(serveErr, poolErr, maintErr, sessErr); err != nil {
		return failErr(err)
	}
	fmt.Fprintln(io.ErrOut, "maestro serve: stopped")
	return nil
}

// storeKind names a job store for GET /api/v1/server.
func storeKind(st store.Store) string {
	switch st.(type) {
	case *postgres.Store:
		return api.StorePostgres
	case *sqlite.Store:
		return api.StoreSQLite
	}
	return ""
}

// dropStreamsEnv is the test hook of server.Config.DropStreamsAfter: the
// browser tests of the web UI cut its event streams from the server side
// to prove the live log resumes without gaps or duplicates. Unset (as in
// any real deployment), nothing is cut.
const dropStreamsEnv = "MAESTRO_TEST_DROP_STREAMS_AFTER"

func dropStreamsAfter(getenv func(string) string) (int, error) {
	if getenv == nil || getenv(dropStreamsEnv) == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(getenv(dropStreamsEnv))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: expected a positive number of events, found %q", dropStreamsEnv, getenv(dropStreamsEnv))
	}
	return n, nil
}

// scheduleDueNowEnv is the test hook of the first tick of a schedule:
// set to 1, a schedule created or changed through the API is due at once
// (its first tick is the request's time, after the expression is
// validated as usual), so the web UI's browser test sees a schedule fire
// without waiting for the next real minute; the ticks after it follow the
// expression (queue.RunMaintenance computes them). Unset (as in any real
// deployment), the first tick is the expression's next one.
const scheduleDueNowEnv = "MAESTRO_TEST_SCHEDULE_DUE_NOW"

func scheduleNextRun(getenv func(string) string) func(string, time.Time) (time.Time, error) {
	if getenv == nil || getenv(scheduleDueNowEnv) != "1" {
		return queue.NextRun
	}
	return func(expr string, now time.Time) (time.Time, error) {
		if _, err := queue.NextRun(expr, now); err != nil {
			return time.Time{}, err
		}
		return now, nil
	}
}

// servedMCP is `maestro mcp` over streamable HTTP at serve's /mcp
// (docs/mcp.md): the tools of the stdio server, tasks in the workspaces
// the HTTP attach API allows (fresh ones by default).
type servedMCP struct {
	srv     *mcp.Server
	handler http.Handler
}

func serveMCP(io *IOStreams, policy host.AttachPolicy, log *slog.Logger) (*servedMCP, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find Maestro's executable: %w", err)
	}
	o := mcpServerOptions(io, exe, log)
	o.Dir = policy.Workspaces
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the workspaces directory: %w", err)
	}
	if o.Workspace, o.Fresh, err = host.MCPWorkspaces(policy); err != nil {
		return nil, err
	}
	srv := mcp.NewServer(o)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv.MCP }, nil)
	return &servedMCP{srv: srv, handler: h}, nil
}

// Close stops the tasks started over HTTP.
func (m *servedMCP) Close() { m.srv.Close() }
