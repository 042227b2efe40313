package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/queue"
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
	what := "--db"
	if db == "" && io.Getenv != nil {
		db, what = io.Getenv("MAESTRO_DB"), "MAESTRO_DB"
	}
	switch {
	case db == "":
		st, err := sqlite.Open(ctx, filepath.Join(dataDir, "maestro.db"), sqlite.Options{})
		if errors.Is(err, sqlite.ErrLocked) {
			// A serve or worker stopped a moment ago holds the database
			// until its jobs and connections have ended: "stop it" alone
			// sent the user looking for a process already stopping.
			return nil, "", fmt.Errorf("%w. If it is a serve or worker you have just stopped, it may still be finishing its shutdown (ending its jobs and connections): retry in a few seconds", err)
		}
		if err != nil {
			return nil, "", err
		}
		return st, dataDir, nil
	case isPostgresURL(db):
		st, err := postgres.Open(ctx, db, postgres.Options{})
		if err != nil {
			return nil, "", fmt.Errorf("%s %s: %w", what, redactURL(db), err)
		}
		return st, dataDir, nil
	default:
		return nil, "", fmt.Errorf("%s: %s", what, expectedDB)
	}
}

// expectedDB is what a database setting may be.
const expectedDB = "expected a postgres://user:password@host/dbname URL (leave it empty for SQLite in the data directory)"

// isPostgresURL says whether db names a PostgreSQL database.
func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// checkStoreFlags refuses a --db or --artifacts flag of serve and worker
// that names no store it can open, as a usage error (exit 2) before
// anything is opened: they were found only when the store was opened, and
// exited 1 as if the database had failed. MAESTRO_DB and config.yaml's
// artifacts are checked where they are read.
func checkStoreFlags(db, artifacts string) error {
	if db != "" && !isPostgresURL(db) {
		return usageErr("--db: %s", expectedDB)
	}
	switch {
	case artifacts == "", filepath.IsAbs(artifacts):
	case strings.HasPrefix(artifacts, "s3://"):
		if _, _, err := blobstore.ParseS3URL(artifacts, "--artifacts"); err != nil {
			return usageErr("%v", err)
		}
	default:
		return usageErr("--artifacts %q: expected s3://bucket/prefix or an absolute directory (empty: the data directory)", artifacts)
	}
	return nil
}

// redactURL is the URL u with its passwords replaced by xxxxx: the
// user info's, and the query parameters a libpq URL may carry one in
// (password, sslpassword: postgres://u@h/db?password=…).
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a malformed URL)"
	}
	if q := p.Query(); q.Has("password") || q.Has("sslpassword") {
		var kept []string
		for _, kv := range strings.Split(p.RawQuery, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if k, err := url.QueryUnescape(k); err == nil && (k == "password" || k == "sslpassword") {
				kv = k + "=xxxxx"
			}
			kept = append(kept, kv)
		}
		p.RawQuery = strings.Join(kept, "&")
	}
	return p.Redacted()
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

// filesAt says where jobs' files live, for the start-up line of serve and
// worker (processes sharing a database must agree: docs/scale-out.md).
func filesAt(artifacts blobstore.Store) string {
	if artifacts == nil {
		return "files in the data directory"
	}
	return "files in " + artifacts.Location()
}

// jobRunner is the host's runner of queued jobs for serve and worker
// (host.JobRunner): agent movements run the CLIs of this process's
// registry, and its notices reach stderr.
func jobRunner(ctx context.Context, io *IOStreams, h *host.Host, st store.Store, dataDir string, artifacts blobstore.Store) (queue.Runner, string, error) {
	return h.JobRunner(ctx, host.JobRunnerOptions{
		Store: st, DataDir: dataDir, Artifacts: artifacts,
		Agents:  agentMovements(io, "", agentcli.Permission(h.Config().AgentPermission)),
		Notices: io.ErrOut,
	})
}
