package host

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/tool"
)

// JobRunnerOptions is what a job-running process (serve, worker) gives
// JobRunner besides the host's configuration.
type JobRunnerOptions struct {
	Store   store.Store
	DataDir string
	// Artifacts holds the jobs' files (nil: the data directory).
	Artifacts blobstore.Store
	// Agents runs the movements that name an agent CLI.
	Agents engine.AgentRunner
	// Notices receives what the operator should read: the replay notice
	// at start, and the registered SSH connections left out of a job.
	Notices io.Writer
}

// JobRunner builds the engine runner of queued jobs, choosing the model as
// `maestro run` does (providers.Select: MAESTRO_MODEL, credentials in the
// environment, config.yaml, else the replay demo); a job whose payload has
// "replay" plays that scenario instead. With no model configured, jobs
// play the bundled piece demo (replay.DemoPiece: the demo shaped for the
// general piece a replay job runs; a no_piece job the plain demo), and a
// notice says so and how to
// configure a real model. Bash runs in the configured sandbox (auto by
// default). Pieces are the built-ins, the store's pieces and
// <home>/pieces; SSH connections, skills and MCP servers are config.yaml's
// and those registered through serve's API (JobRunnerOptions.Store).
//
// executor names what runs the jobs by default: "replay" or "native".
func (h *Host) JobRunner(ctx context.Context, o JobRunnerOptions) (runner queue.Runner, executor string, err error) {
	sbMode, err := SandboxMode("", h.cfg)
	if err != nil {
		return nil, "", fmt.Errorf("config sandbox: %w", err)
	}
	sb, err := sandbox.New(ctx, SandboxConfig(sbMode, h.log)) // its warnings go to serve's or the worker's log
	if err != nil {
		return nil, "", err
	}
	choice, err := providers.Select(ctx, providers.Options{Config: h.cfg, Getenv: h.getenv})
	if err != nil {
		return nil, "", err
	}
	prov := choice.Provider
	jobProvider := func(*queue.Job) (llm.Provider, error) { return prov, nil }
	if choice.Replay == providers.DemoScenario {
		// The plain demo is written for one agent loop (a no_piece job's);
		// a job that runs a piece plays the piece demo. (The piece demo
		// in the plain loop failed once its frames were played.)
		plain, piece := prov, replay.New(replay.DemoPiece())
		jobProvider = func(j *queue.Job) (llm.Provider, error) {
			if queue.NoPiece(j.Payload) {
				return plain, nil
			}
			return piece, nil
		}
	}
	if n := jobReplayNotice(choice, filepath.Join(h.home, "config.yaml")); n != "" && o.Notices != nil {
		fmt.Fprintln(o.Notices, n)
	}
	models := h.PieceModels()
	classifier, err := h.ClassifierModel(ctx, models, choice.Executor == protocol.ExecutorLive)
	if err != nil {
		return nil, "", err
	}
	executor = "native"
	if choice.Executor == protocol.ExecutorReplay {
		executor = "replay"
	}
	web, err := WebTools(h.cfg, h.getenv)
	if err != nil {
		return nil, "", err
	}
	sshConns, err := SSHConnections(h.cfg)
	if err != nil {
		return nil, "", err
	}
	// The key of MAESTRO_ENCRYPTION_KEY opens the registered records'
	// secrets (a malformed key is an error; no key leaves out the
	// registered connections, with a note per job).
	box, err := secrets.FromEnv(h.getenv)
	if err != nil {
		return nil, "", err
	}
	st := o.Store
	return queue.NewEngineRunner(queue.EngineRunnerConfig{
		DataDir: o.DataDir,
		Models:  models, Classifier: classifier,
		Provider: jobProvider,
		Pieces: func(ctx context.Context) (*engine.Library, error) {
			return queue.StoreLibrary(ctx, st, filepath.Join(h.home, "pieces"))
		},
		Sandbox:    sb,
		FileLimits: FileLimits(h.cfg),
		Web:        web,
		WebInLoop:  h.cfg.Web.Sessions,
		SSH:        sshConns,
		SSHFor: func(ctx context.Context, owner string) (map[string]tool.SSHConnection, error) {
			conns, skipped, err := SSHConnectionsFor(ctx, st, box, sshConns, owner)
			for _, e := range skipped {
				if o.Notices != nil {
					fmt.Fprintf(o.Notices, "maestro: SSH connection left out of a job of %s: %v\n", owner, e)
				}
			}
			return conns, err
		},
		Skills: &skills.Library{Dirs: []string{filepath.Join(h.home, skills.Dir)}, Store: st},
		// config.yaml's MCP servers by default, or those a task's payload
		// names, among config.yaml's and the registered (docs/mcp.md, "In
		// queued jobs").
		MCP:       &queue.JobMCP{Lookup: MCPLookup(h.cfg.MCPServers, st, box), Default: slices.Sorted(maps.Keys(h.cfg.MCPServers)), Getenv: h.getenv},
		Agents:    o.Agents,
		Artifacts: o.Artifacts,
	}), executor, nil
}

// CloseRunner stops what a job runner keeps between attempts (runs parked
// on an MCP server's question, docs/mcp.md).
func CloseRunner(r queue.Runner) {
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
