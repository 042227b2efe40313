package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/transport/stdio"
	"github.com/maestro-run/maestro/internal/workspace"
)

// headlessOptions are the flags of `maestro headless`.
type headlessOptions struct {
	Workspace     string
	Model         string
	Replay        string
	Sandbox       string
	ApprovalMode  string
	Resume        string
	ClientTools   string
	Thinking      string
	System        string
	MaxIterations int
	// Agent runs the prompts on an agent CLI (headless_agent.go).
	Agent string
}

func newHeadlessCmd(io *IOStreams) *cobra.Command {
	var o headlessOptions
	cmd := &cobra.Command{
		Use:   "headless [flags]",
		Short: "Serve the headless protocol on stdin/stdout (for embedders)",
		Long: `Run one agent session driven by the headless protocol (version 2026-04-02):
the client writes one JSON message per line to stdin, Maestro writes one per
line to stdout; stderr carries diagnostics only. See docs/protocol.md.

At startup Maestro writes ready and session_info. A client then sends hello
(optional), init (system prompt, thinking level, approval mode) and prompts;
it answers approvals and other server requests, and may run utility
operations (commands in a PTY, file search, file read, file watch). shutdown,
or closing stdin, ends the session cleanly (exit 0).

The model is chosen as for 'maestro run' (--replay/--model, MAESTRO_MODEL,
credentials in the environment, ~/.maestro/config.yaml); with none, the bundled
replay demo plays and ready says executor_type "replay".

With --agent, each prompt runs on an agent CLI instead (claude-code, codex,
gemini-cli, opencode, qwen-code, or ~/.maestro/agents/*.yaml; see 'maestro
agents list'), through the same protocol: the CLI's session is resumed at
every prompt, interrupt stops its whole process group, and Claude Code's
permission prompts become approval server requests. --model then goes to the
CLI verbatim. The CLI's session id is stored with the Maestro session, so
--resume ID (the session_info id; --agent may be left out) continues the
CLI's conversation in a new process, from the logged transcript if the CLI
lost it; an ID that is no Maestro session is taken as the CLI's own id.

If Maestro cannot start, it writes one fatal error message on stdout
({"type":"error","message":"Headless startup failed: …","fatal":true,
"error_type":"fatal"}), details on stderr, and exits non-zero.`,
		Example: `  maestro headless --workspace ~/src/app
  maestro headless --replay scenario.yaml --approval-mode auto
  maestro headless --client-tools tools.json --model anthropic/claude-sonnet-4-5
  maestro headless --agent claude-code --approval-mode prompt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHeadless(cmd.Context(), io, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Workspace, "workspace", "w", "", "directory the agent works in (default: current directory)")
	f.StringVarP(&o.Model, "model", "m", "", "model as provider/model, e.g. anthropic/claude-sonnet-4-5, openai/gpt-5, replay/demo")
	f.StringVar(&o.Replay, "replay", "", "run a scripted replay scenario file instead of a model (see docs/replay.md)")
	f.StringVar(&o.Sandbox, "sandbox", "", "Bash sandbox mode: auto (bubblewrap, else Landlock, else Bash refused), bwrap, landlock, off (default from config, else auto; always = bwrap)")
	f.StringVar(&o.ApprovalMode, "approval-mode", string(protocol.ApprovalPrompt), "tool calls that change things: prompt (ask the client), auto (run), fail (deny); init can change it")
	f.StringVar(&o.Resume, "resume", "", "continue session ID (full id or a unique prefix of 8+ characters)")
	f.StringVar(&o.ClientTools, "client-tools", "", "JSON file declaring tools the client executes: [{\"name\",\"description\",\"input_schema\"}]")
	f.StringVar(&o.Thinking, "thinking", "", "thinking level: off, minimal, low, medium, high, ultra (init can change it)")
	f.StringVar(&o.System, "system", "", "replace the default system prompt (init can change it)")
	f.IntVar(&o.MaxIterations, "max-iterations", 0, "maximum model calls per prompt (default 50)")
	f.StringVar(&o.Agent, "agent", "", "run prompts on an agent CLI (claude-code, codex, gemini-cli, opencode, qwen-code, or ~/.maestro/agents/*.yaml)")
	return cmd
}

// headless is a started headless session: what runHeadless closes.
type headless struct {
	rt      *runtime.Runtime
	sess    *session.Session
	root    *workspace.Root
	sandbox *sandboxProbe
}

func runHeadless(ctx context.Context, io *IOStreams, o headlessOptions) error {
	log := slog.New(slog.NewTextHandler(io.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := startHeadless(ctx, io, o, log)
	if err != nil {
		// The client reads stdout: it gets one fatal error message; the
		// details go to stderr (printed by Run).
		if werr := stdio.WriteStartupFailure(io.Out, err); werr != nil {
			log.Error("write the startup failure", "err", werr)
		}
		if e, ok := errors.AsType[*exitError](err); ok {
			return e
		}
		return failErr(err)
	}
	defer h.root.Close()

	// SIGINT and SIGTERM end the session like a shutdown message.
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := stdio.Serve(sctx, stdio.Config{Runtime: h.rt, In: io.In, Out: io.Out, Logger: log,
		// Probing the sandbox runs processes: after ready, not before.
		Started: h.sandbox.start})
	closeErr := h.sess.Close()
	switch {
	case serveErr != nil:
		return failErr(serveErr)
	case closeErr != nil:
		return failErr(fmt.Errorf("save session: %w", closeErr))
	}
	return nil
}

// startHeadless does everything that can fail before the protocol starts.
// It stays fast: the sandbox is probed in the background (ready does not
// wait for it) unless --sandbox bwrap or landlock makes its absence fatal.
func startHeadless(ctx context.Context, io *IOStreams, o headlessOptions, log *slog.Logger) (*headless, error) {
	mode := protocol.ApprovalMode(o.ApprovalMode)
	switch mode {
	case protocol.ApprovalAuto, protocol.ApprovalPrompt, protocol.ApprovalFail:
	default:
		return nil, usageErr("--approval-mode %q: expected prompt, auto or fail", o.ApprovalMode)
	}
	switch llm.ThinkingLevel(o.Thinking) {
	case "", llm.ThinkingOff, llm.ThinkingMinimal, llm.ThinkingLow, llm.ThinkingMedium, llm.ThinkingHigh, llm.ThinkingUltra:
	default:
		return nil, usageErr("--thinking %q: expected one of off, minimal, low, medium, high, ultra", o.Thinking)
	}
	if o.MaxIterations < 0 {
		return nil, usageErr("--max-iterations must be positive")
	}
	var clientTools []runtime.ClientTool
	if o.ClientTools != "" {
		var err error
		if clientTools, err = loadClientTools(o.ClientTools); err != nil {
			return nil, usageErr("--client-tools: %v", err)
		}
	}

	home, err := config.Home(io.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(filepath.Join(home, "config.yaml"))
	if err != nil {
		return nil, err
	}
	store := session.NewStore(filepath.Join(home, "sessions"))
	if o.Agent != "" {
		return startAgentHeadless(io, o, log, store, nil)
	}
	var sess *session.Session
	if o.Resume != "" {
		if o.Model != "" || o.Replay != "" {
			return nil, usageErr("--resume continues a session with its own model; drop --model/--replay")
		}
		if sess, err = store.Open(o.Resume); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		m := sess.Meta()
		if m.Agent != "" {
			// A session of headless --agent: it continues on its CLI.
			return startAgentHeadless(io, o, log, store, sess)
		}
		if m.ExecutorType == protocol.ExecutorReplay {
			o.Replay = m.Replay
		} else {
			o.Model = m.Provider + "/" + m.Model
		}
		if o.Workspace == "" {
			o.Workspace = m.Workspace
		}
	}
	ok := false
	defer func() {
		if !ok && sess != nil {
			sess.Close()
		}
	}()

	dir, err := workspaceDir(o.Workspace)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	choice, err := providers.Select(ctx, providers.Options{Model: o.Model, Replay: o.Replay, Config: cfg, Getenv: io.Getenv})
	if err != nil {
		return nil, err
	}
	sbm, err := sandboxMode(o.Sandbox, cfg)
	if err != nil {
		return nil, usageErr("--sandbox: %v", err)
	}
	root, err := openAgentWorkspace(dir, home)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer func() {
		if !ok {
			root.Close()
		}
	}()
	sb := &sandboxProbe{cfg: sandboxConfig(sbm, log), done: make(chan struct{})}
	if sbm == sandbox.ModeBwrap || sbm == sandbox.ModeLandlock {
		// Without its sandbox the session cannot run Bash at all: a
		// startup failure rather than a failure at the first prompt.
		if _, err := sb.wait(ctx); err != nil {
			return nil, err
		}
	}

	if sess == nil {
		sess, err = store.Create(session.Meta{
			Workspace: root.Dir(), Provider: choice.Provider.Name(), Model: choice.Provider.Model(),
			ExecutorType: choice.Executor, Replay: choice.Replay,
		})
		if err != nil {
			return nil, err
		}
	}
	if choice.Notice != "" {
		fmt.Fprintln(io.ErrOut, choice.Notice)
	}

	rcfg := sessionRuntime(choice, root, sb, fileLimits(cfg), sess, io.Getenv, log)
	rcfg.ClientTools = clientTools
	rcfg.History = sess.History()
	rcfg.Thinking = llm.ThinkingLevel(o.Thinking)
	rcfg.ApprovalMode = mode
	rcfg.MaxIterations = firstPositive(o.MaxIterations, cfg.MaxIterations)
	if o.System != "" {
		rcfg.System, rcfg.SystemPrompt = o.System, nil
	}
	rt, err := runtime.New(rcfg)
	if err != nil {
		return nil, err
	}
	ok = true
	return &headless{rt: rt, sess: sess, root: root, sandbox: sb}, nil
}

// sandboxProbe sets the sandbox up in the background, once: after the
// startup frames are written, or when first needed.
type sandboxProbe struct {
	cfg  sandbox.Config
	once sync.Once
	done chan struct{}
	sb   *sandbox.Sandbox
	err  error
}

func (p *sandboxProbe) start() {
	p.once.Do(func() {
		go func() {
			defer close(p.done)
			p.sb, p.err = sandbox.New(context.Background(), p.cfg)
		}()
	})
}

func (p *sandboxProbe) wait(ctx context.Context) (*sandbox.Sandbox, error) {
	p.start()
	select {
	case <-p.done:
		return p.sb, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// loadClientTools reads the --client-tools file: a JSON array of
// {name, description, input_schema}.
func loadClientTools(path string) ([]runtime.ClientTool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tools []runtime.ClientTool
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tools); err != nil {
		return nil, fmt.Errorf("%s: expected a JSON array of {\"name\", \"description\", \"input_schema\"}: %w", path, err)
	}
	for i, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("%s: tool %d has no name", path, i)
		}
	}
	return tools, nil
}

// envInt reads a positive integer from the environment (0 when unset or
// invalid).
func envInt(getenv func(string) string, key string) int64 {
	n, err := strconv.ParseInt(getenv(key), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
