package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// openJobStore opens the store named by db: "" means MAESTRO_DB when set,
// else SQLite at <dataDir>/maestro.db; "postgres://…" or "postgresql://…"
// is PostgreSQL. An empty dataDir is config.Home (~/.maestro or
// $MAESTRO_HOME). It returns the store and the absolute data directory.
func openJobStore(ctx context.Context, io *IOStreams, db, dataDir string) (store.Store, string, error) {
	if dataDir == "" {
		home, err := config.Home(io.Getenv)
		if err != nil {
			return nil, "", err
		}
		dataDir = home
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, "", fmt.Errorf("--data-dir %q: %w", dataDir, err)
	}
	dataDir = abs
	if db == "" && io.Getenv != nil {
		db = io.Getenv("MAESTRO_DB")
	}
	switch {
	case db == "":
		st, err := sqlite.Open(ctx, filepath.Join(dataDir, "maestro.db"), sqlite.Options{})
		if err != nil {
			return nil, "", err
		}
		return st, dataDir, nil
	case strings.HasPrefix(db, "postgres://"), strings.HasPrefix(db, "postgresql://"):
		st, err := postgres.Open(ctx, db, postgres.Options{})
		if err != nil {
			return nil, "", err
		}
		return st, dataDir, nil
	default:
		return nil, "", errors.New("--db: expected a postgres://user:password@host/dbname URL (leave it empty for SQLite in the data directory)")
	}
}

// jobProcess is what a job-running command (serve, worker) starts with:
// its worker name, a context that SIGINT or SIGTERM cancels, its logger and
// the job store.
type jobProcess struct {
	ctx     context.Context
	name    string
	log     *slog.Logger
	st      store.Store
	dataDir string
	stop    context.CancelFunc
}

// startJobProcess names the worker (see workerName) and opens the job
// store (see openJobStore) under a context a signal cancels. Close
// releases both.
func startJobProcess(ctx context.Context, io *IOStreams, name, db, dataDir string) (*jobProcess, error) {
	ctx, stop := untilSignalled(ctx)
	st, dataDir, err := openJobStore(ctx, io, db, dataDir)
	if err != nil {
		stop()
		return nil, err
	}
	return &jobProcess{ctx: ctx, name: workerName(name), log: io.logger(slog.LevelInfo), st: st, dataDir: dataDir, stop: stop}, nil
}

// Close closes the store, then stops listening for signals.
func (p *jobProcess) Close() {
	p.st.Close()
	p.stop()
}

// workerName is the --name of a job-running command (serve, worker):
// name, else host:pid, which tells the workers of machines and processes
// apart in leases and logs.
func workerName(name string) string {
	if name != "" {
		return name
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// newJobRunner builds the engine runner, choosing the model as `maestro
// run` does (providers.Select: MAESTRO_MODEL, credentials in the
// environment, config.yaml, else the replay demo); a job whose payload has
// "replay" plays that scenario instead. With no model configured, jobs
// play the bundled piece demo (replay.DemoPiece: the demo shaped for the
// general piece a replay job runs), and a notice on io.ErrOut says so and
// how to configure a real model. Bash runs in the configured sandbox (auto
// by default); movements that name an agent CLI run it as `maestro run`
// does. Pieces are the built-ins, the store's pieces and
// <config home>/pieces.
//
// executor names what runs the jobs by default: "replay" or "native".
func newJobRunner(io *IOStreams, st store.Store, dataDir string, artifacts blobstore.Store) (runner queue.Runner, executor string, err error) {
	home, err := config.Home(io.Getenv)
	if err != nil {
		return nil, "", err
	}
	cfg, err := config.Load(filepath.Join(home, "config.yaml"))
	if err != nil {
		return nil, "", err
	}
	sbMode, err := host.SandboxMode("", cfg)
	if err != nil {
		return nil, "", fmt.Errorf("config sandbox: %w", err)
	}
	sb, err := sandbox.New(context.Background(), host.SandboxConfig(sbMode, nil))
	if err != nil {
		return nil, "", err
	}
	ctx := context.Background()
	choice, err := providers.Select(ctx, providers.Options{Config: cfg, Getenv: io.Getenv})
	if err != nil {
		return nil, "", err
	}
	prov := choice.Provider
	if choice.Replay == providers.DemoScenario {
		// The plain demo is written for one agent loop; a job runs a piece.
		prov = replay.New(replay.DemoPiece())
	}
	if n := jobReplayNotice(choice, filepath.Join(home, "config.yaml")); n != "" {
		fmt.Fprintln(io.ErrOut, n)
	}
	models := pieceModels(io.Getenv, cfg)
	classifier, err := classifierModel(ctx, models, cfg, choice.Executor == protocol.ExecutorLive)
	if err != nil {
		return nil, "", err
	}
	executor = "native"
	if choice.Executor == protocol.ExecutorReplay {
		executor = "replay"
	}
	web, err := host.WebTools(cfg, io.Getenv)
	if err != nil {
		return nil, "", err
	}
	sshConns, err := host.SSHConnections(cfg)
	if err != nil {
		return nil, "", err
	}
	reg, err := jobRegistry(io, st, home, sshConns, cfg.MCPServers)
	if err != nil {
		return nil, "", err
	}
	return queue.NewEngineRunner(queue.EngineRunnerConfig{
		DataDir: dataDir,
		Models:  models, Classifier: classifier,
		Provider: func(*queue.Job) (llm.Provider, error) { return prov, nil },
		Pieces: func(ctx context.Context) (*engine.Library, error) {
			return queue.StoreLibrary(ctx, st, filepath.Join(home, "pieces"))
		},
		Sandbox:    sb,
		FileLimits: host.FileLimits(cfg),
		Web:        web,
		WebInLoop:  cfg.Web.Sessions,
		SSH:        sshConns,
		SSHFor:     reg.sshFor,
		Skills:     reg.skills,
		MCP:        jobMCP(io, cfg, reg.mcp),
		Agents:     agentMovements(io, "", agentcli.Permission(cfg.AgentPermission)),
		Artifacts:  artifacts,
	}), executor, nil
}

// jobMCP gives jobs config.yaml's MCP servers by default, or those a
// task's payload names, found by lookup among config.yaml's and the
// servers registered through the API (docs/mcp.md, "In queued jobs").
func jobMCP(io *IOStreams, cfg config.Config, lookup mcp.Lookup) *queue.JobMCP {
	return &queue.JobMCP{Lookup: lookup, Default: slices.Sorted(maps.Keys(cfg.MCPServers)), Getenv: io.Getenv}
}

// closeRunner stops what the job runner keeps between attempts (runs
// parked on an MCP server's question, docs/mcp.md).
func closeRunner(r queue.Runner) {
	if c, ok := r.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// jobReplayNotice is what a job-running command (serve, worker) says at
// start when its jobs run on replay ("" for a live model).
func jobReplayNotice(c *providers.Choice, configFile string) string {
	if c.Executor != protocol.ExecutorReplay {
		return ""
	}
	if c.Replay != providers.DemoScenario {
		return fmt.Sprintf("▶ REPLAY: jobs play the scripted scenario %s (scripted model turns, real tools; a job payload \"replay\" plays its own).", c.Replay)
	}
	return "▶ REPLAY: no model configured, so jobs play the bundled replay demo through the " + replay.DemoPieceFor + " piece " +
		"(scripted model turns, real tools; every job's events say executor_type \"replay\"). " +
		"To use a real model set ANTHROPIC_API_KEY or OPENAI_API_KEY (OPENAI_BASE_URL for a local server such as Ollama), " +
		"or MAESTRO_MODEL=provider/model, or model: in " + configFile + ", then restart."
}

// installedAgents lists the agent CLIs this process's workers can run a
// task on (api.ServerInfo.Agents): the adapters of the registry (built-in
// and ~/.maestro/agents/) whose binary is on PATH. A registry that cannot
// be read lists none.
func installedAgents(io *IOStreams) []string {
	reg, err := agentRegistry(io)
	if err != nil {
		return nil
	}
	var ids []string
	for _, def := range reg.All() {
		if _, err := def.Resolve(io.Getenv("PATH")); err == nil {
			ids = append(ids, def.ID)
		}
	}
	return ids
}

// artifactsFlag is the help of serve's and worker's --artifacts.
const artifactsFlag = "where jobs' files live: s3://bucket/prefix (S3-compatible; endpoint, keys and region from AWS_ENDPOINT_URL_S3/AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION or config.yaml artifacts_s3) or an absolute directory (default: config.yaml artifacts, else the data directory)"

// openArtifacts opens the artifact store that --artifacts (flag) or
// config.yaml names (host.Artifacts); nil: the data directory.
func openArtifacts(ctx context.Context, io *IOStreams, flag string) (blobstore.Store, error) {
	home, err := config.Home(io.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(filepath.Join(home, "config.yaml"))
	if err != nil {
		return nil, err
	}
	return host.Artifacts(ctx, flag, cfg, io.Getenv)
}
