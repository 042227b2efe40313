package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
)

// sessionFlags are the flags `maestro run` and `maestro headless` share:
// where the session works, what answers it, how Bash is confined, which
// session it continues, and how the agent loop or agent CLI runs.
type sessionFlags struct {
	Workspace     string
	Model         string
	Replay        string
	Sandbox       string
	Resume        string
	Thinking      string
	System        string
	MaxIterations int
	// Agent runs the session on an agent CLI (internal/agentcli) instead
	// of Maestro's own loop (host.Spec.Agent); Permission is the level of
	// agent CLIs, in `run` also in piece movements (host.Spec.Permission).
	Agent      string
	Permission string
}

// bind registers the flags whose help is the same in both commands; each
// command registers thinking, system, max-iterations and agent with its
// own help.
func (o *sessionFlags) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.Workspace, "workspace", "w", "", "directory the agent works in (default: current directory)")
	f.StringVarP(&o.Model, "model", "m", "", "model as provider/model, e.g. anthropic/claude-sonnet-4-5, openai/gpt-5, replay/demo")
	f.StringVar(&o.Replay, "replay", "", "run a scripted replay scenario file instead of a model (see docs/replay.md)")
	f.StringVar(&o.Sandbox, "sandbox", "", "Bash sandbox mode: auto (bubblewrap, else Landlock, else Bash refused), bwrap, landlock, off (default from config, else auto; always = bwrap)")
	f.StringVar(&o.Resume, "resume", "", "continue session ID (a Maestro session: full id or a unique prefix of 8+ characters; with --agent also the CLI's own session id, in full)")
	f.StringVar(&o.Permission, "permission", "", permissionUsage)
}

// runOptions are the flags of `maestro run`.
type runOptions struct {
	sessionFlags
	Output  string
	Piece   string
	NoPiece bool
}

func newRunCmd(io *IOStreams) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [flags] TASK...",
		Short: "Run a task with Maestro's agent loop",
		Long: `Run a task in a workspace (default: the current directory) with Maestro's own
agent loop and sandboxed tools (Read, Write, Edit, Glob, Grep, Bash).

With --piece NAME the task runs as a piece: a workflow of movements (see
'maestro pieces list' and docs/engine.md). Without --piece, a new task with a
live model is classified first: the model picks the piece that fits. On the
replay executor (no model configured, or --replay) the task runs in the plain
agent loop unless --piece is given, since scripted scenarios such as the
bundled demo are written for it; --no-piece forces the plain loop everywhere.
A piece run prints only its result on stdout; its progress (movements,
transitions, tool calls) goes to stderr.

The model is chosen by, in order: --replay FILE or --model provider/model;
MAESTRO_MODEL; credentials in the environment (ANTHROPIC_API_KEY or
ANTHROPIC_AUTH_TOKEN → anthropic; OPENAI_API_KEY or OPENAI_BASE_URL → openai);
~/.maestro/config.yaml; otherwise the bundled replay demo runs, clearly marked
as replay. Providers: anthropic, openai (Responses API, or Chat Completions for
OPENAI_BASE_URL servers such as Ollama, vLLM, LM Studio), replay.

Every run is a session with an append-only event log under ~/.maestro/sessions;
--resume ID continues one ('maestro sessions list' lists them with the
shortest id prefix that names each). For a plain session the new TASK continues its
conversation. For a piece session, a run waiting for an answer (the piece
asked a question) continues with TASK as the answer; an interrupted or failed
run restarts its current movement; a finished run is followed by a new run of
the same piece (or --piece) with TASK as a follow-up. TASK "-" reads the task
from stdin. Ctrl-C interrupts cleanly (the running tool or agent CLI is
stopped and the log records it), and so do SIGTERM and closing the terminal
(SIGHUP, unless Maestro runs under nohup); a second one ends it at once.

Exit status: 0 success (or a piece run waiting for an answer), 1 failure or
aborted piece run (one-line reason on stderr), 2 usage error, 130 interrupted
(by any of those signals: SIGTERM too exits 130, not 143).`,
		Example: `  maestro run "add a --verbose flag to the CLI and test it"
  maestro run --piece code "fix the failing test in parser_test.go"
  maestro run --model openai/gpt-5 --workspace ../api "why does the build fail?"
  OPENAI_BASE_URL=http://localhost:11434/v1 maestro run --model openai/qwen3 "explain main.go"
  maestro run --replay scenario.json --output jsonl "demo"
  maestro run --resume 0198c3a2 "now add a test for it"
  maestro run --resume 0198c3a2 "use blue"      # answer the question a piece run asked`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			task := strings.Join(args, " ")
			if task == "-" {
				data, err := readAllLimited(io.In, 1<<20)
				if err != nil {
					return &exitError{ExitUsage, fmt.Errorf("read task from stdin: %w", err)}
				}
				task = strings.TrimSpace(string(data))
			}
			if strings.TrimSpace(task) == "" {
				return &exitError{ExitUsage, errors.New("the task is empty")}
			}
			if err := checkMaxIterations(o.MaxIterations, cmd.Flags().Changed("max-iterations")); err != nil {
				return err
			}
			return runTask(cmd.Context(), io, o, task)
		},
	}
	f := cmd.Flags()
	o.sessionFlags.bind(cmd)
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text (terminal) or jsonl (one protocol event per line)")
	f.IntVar(&o.MaxIterations, "max-iterations", 0, "maximum model calls for this task (default 50)")
	f.StringVar(&o.Thinking, "thinking", "", "thinking level: off, minimal, low, medium, high, ultra")
	f.StringVar(&o.System, "system", "", "replace the default system prompt (plain agent loop only)")
	f.StringVar(&o.Piece, "piece", "", "run the task as this piece (see 'maestro pieces list'); skips the classifier")
	f.BoolVar(&o.NoPiece, "no-piece", false, "run the plain agent loop: no piece, no classification")
	f.StringVar(&o.Agent, "agent", "", "run the task on an agent CLI (claude-code, codex, gemini-cli, opencode, qwen-code, or ~/.maestro/agents/*.yaml); --resume then takes its Maestro session id, or the CLI's own session id (in full: a prefix of it is passed on as given)")
	return cmd
}

// permissionUsage is the help of --permission (run, headless).
const permissionUsage = "what an agent CLI may do unattended (--agent, and pieces' agent movements): read-only, edit (change files in the workspace, run commands), full (no checks, no CLI sandbox); default from config agent_permission, else edit"

func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(data)) > limit {
		return nil, fmt.Errorf("input is larger than %d bytes", limit)
	}
	return data, err
}

func usageErr(format string, args ...any) error {
	return &exitError{ExitUsage, fmt.Errorf(format, args...)}
}

func failErr(err error) error { return &exitError{ExitError, err} }

// resumeErr adds to a --resume of no session how to find the sessions
// there are: "session not found: ID" alone left the user guessing. use
// is the command that resumes an agent CLI's own session (see
// noMaestroSession).
func resumeErr(ctx context.Context, io *IOStreams, err error, id, use string) error {
	if errors.Is(err, session.ErrNotFound) {
		return noMaestroSession(ctx, io, err, id, use)
	}
	return err
}

// runTask runs the task. A reader of stdout that goes away (maestro run
// … | head -1) interrupts the run, as Ctrl-C does, and the exit status is
// 1 saying so: Maestro died of SIGPIPE, the run left unfinished in the
// session log (an agent CLI, in a process group of its own, working on
// unattended).
func runTask(ctx context.Context, io *IOStreams, o runOptions, task string) error {
	defer catchSIGPIPE()()
	out := &pipeWatch{w: io.Out}
	wio := *io
	wio.Out = out
	err := runTaskTo(ctx, &wio, o, task, out)
	if out.Broken() {
		return failErr(fmt.Errorf("write stdout: %w: the run was interrupted (its session log has it)", syscall.EPIPE))
	}
	return err
}

func runTaskTo(ctx context.Context, io *IOStreams, o runOptions, task string, out *pipeWatch) error {
	switch o.Output {
	case "text", "jsonl":
	default:
		return usageErr("--output %q: expected text or jsonl", o.Output)
	}
	if err := checkThinking(o.Thinking); err != nil {
		return err
	}
	if _, err := agentcli.ParsePermission(o.Permission); err != nil {
		return usageErr("--permission: %v", err)
	}
	if o.Agent == "" && o.Resume == "" {
		// The model Maestro's loop runs on (an agent CLI takes its own
		// names): a malformed one is a usage error, and one from the
		// environment is named as such.
		if o.Model != "" && o.Replay != "" {
			return usageErr("--replay and --model cannot be used together: replay sessions run a scripted model")
		}
		if msg := config.CheckModel(o.Model); msg != "" {
			return usageErr("--model: %s", msg)
		}
		if msg := config.CheckModel(io.Getenv("MAESTRO_MODEL")); o.Model == "" && o.Replay == "" && msg != "" {
			return failErr(fmt.Errorf("MAESTRO_MODEL: %s", msg))
		}
	}
	if o.Piece != "" && o.NoPiece {
		return usageErr("--piece and --no-piece cannot be used together")
	}
	if o.Piece != "" && o.Agent != "" {
		return usageErr("--piece runs on Maestro's piece engine, not on --agent %s: drop one (a piece's movement runs on an agent CLI with agent: ID, docs/pieces.md)", o.Agent)
	}
	if o.Piece != "" && o.System != "" {
		return usageErr("--system replaces the plain agent loop's prompt; a piece's movements have their own")
	}

	// The event bus's warnings reach stderr: a bus that cannot publish (no
	// stream, NATS down) says so, as it does in the other commands.
	h, err := host.New(host.Options{Getenv: io.Getenv, BusLogger: io.logger(slog.LevelWarn)})
	if err != nil {
		return failErr(err)
	}
	spec := host.Spec{
		Workspace: o.Workspace, Model: o.Model, Replay: o.Replay, Agent: o.Agent, Permission: o.Permission, Resume: o.Resume, Sandbox: o.Sandbox,
		ApprovalMode: protocol.ApprovalAuto, Thinking: llm.ThinkingLevel(o.Thinking),
		MaxIterations: o.MaxIterations, System: o.System,
		// A sandbox the mode requires that cannot be set up fails the run
		// before its session exists (no empty session is left).
		RequireSandbox: true,
	}
	// The pieces in effect, loaded once for the check and the run.
	libs := &pieceLibrary{}
	if o.Resume == "" && o.Agent == "" && !o.NoPiece {
		if spec.Choice, err = checkNewPieceRun(ctx, io, h, o, libs); err != nil {
			return err
		}
	}
	// The session: resumed (its model and workspace) or new, on Maestro's
	// own loop or an agent CLI. `maestro run` has no one to ask for
	// approvals: tool calls run (auto).
	s, err := h.NewSession(ctx, spec)
	if err != nil {
		return hostErr(resumeErr(ctx, io, err, o.Resume, `maestro run --agent %[1]s --resume %[2]s "…"`))
	}
	defer s.Close()
	// Ctrl-C / SIGTERM cancel the run; a second Ctrl-C kills the process.
	runCtx, stop := untilSignalled(ctx)
	defer stop()
	runCtx, broke := context.WithCancel(runCtx)
	defer broke()
	out.onBreak(broke)
	runDone := make(chan struct{})
	defer close(runDone)
	go secondSignalKills(runCtx, stop, runDone)

	sess, choice := s.Log, s.Choice
	if choice == nil {
		if o.Piece != "" {
			return usageErr("session %s runs on an agent CLI, not on Maestro's piece engine: resume it without --piece", sess.ID())
		}
		// An agent CLI runs the task: no piece, its own sandbox.
		view, text := runView(io, o, false, false)
		return otherAgentSession(ctx, io, runPlain(runCtx, io, s, "", task, view, text), o.Resume, sess.Meta().Agent)
	}

	// What runs: a piece (given, classified, or the session's), or the
	// plain agent loop.
	var prior *priorRun
	if o.Resume != "" {
		prior, err = latestRun(sess.Dir())
		if err != nil {
			return failErr(err)
		}
	}
	pieceMode := false
	switch {
	case o.NoPiece:
		if prior != nil {
			return usageErr("session %s runs pieces; --no-piece cannot continue it", sess.ID())
		}
	case prior != nil, o.Piece != "":
		pieceMode = true
	case o.Resume == "" && choice.Executor == protocol.ExecutorLive:
		pieceMode = true // classify
	}
	if prior != nil && o.Piece != "" && !prior.state.Status.Final() {
		return usageErr("session %s has an unfinished run (%s): resume it without --piece", sess.ID(), prior.state.Status)
	}
	agentsOnly := false
	if pieceMode {
		// A copy: the notice of a piece run only on agent CLIs is this
		// run's, not the session's.
		c := *choice
		if agentsOnly, err = usePieceDemo(ctx, &c, o.Piece, prior, libs, h.Home(), s.Root.Dir()); err != nil {
			return err
		}
		*choice = c
	}
	if o.Resume != "" {
		if ended := replayEnded(s); ended != "" {
			return failErr(fmt.Errorf("%s", ended))
		}
	}
	sb, err := s.Sandbox(ctx)
	if err != nil {
		return failErr(err)
	}

	view, text := runView(io, o, pieceMode, choice.Executor == protocol.ExecutorReplay && !agentsOnly)
	if text != nil {
		text.agentsOnly = agentsOnly
	}
	if choice.Notice != "" && (text == nil || !agentsOnly) { // the renderer's model line says it
		fmt.Fprintln(io.ErrOut, choice.Notice)
	}
	if n := sb.Notice(); n != "" {
		// Bubblewrap not used under auto, and why (docs/sandbox.md): run
		// has no logger for the sandbox's warning.
		fmt.Fprintln(io.ErrOut, n)
	}
	if !pieceMode {
		return runPlain(runCtx, io, s, sb.Kind(), task, view, text)
	}
	_ = sess.SetTitle(task)
	// The piece engine runs the agents itself; what they emit goes
	// through the session's runtime, which starts it with ready and
	// session_info, and comes back rendered before the engine goes on.
	sink, err := newLocalView(s.Runtime, view)
	if err != nil {
		return failErr(err)
	}
	s.Runtime.Start()
	sink.render()
	defer s.Runtime.Close()
	if text != nil {
		text.header(sess.ID(), choice, sb.Kind(), s.Root.Dir())
	}
	provider := llm.WithRetry(choice.Provider, llm.RetryPolicy{OnRetry: func(attempt int, wait time.Duration, e *llm.Error) {
		sink.Event(protocol.Status{Message: fmt.Sprintf("Model call failed (%s); retrying in %s (attempt %d)", e.Error(), wait.Round(100*time.Millisecond), attempt+1)})
	}})
	return runPiece(runCtx, io, pieceRun{
		o: o, task: task, h: h, hs: s, sess: sess, prior: prior, choice: choice, provider: provider,
		sb: sb, root: s.Root, sink: sink, view: view, text: text, jsonl: o.Output == "jsonl", follow: h.FollowSession, libs: libs,
	})
}

// pieceLibrary is the piece library of one `maestro run`, loaded once:
// the check before the session exists, the replay demo's probe and the
// run read the same pieces, unless they ask for another workspace
// directory (the session's, symlinks resolved, may differ from the
// flag's).
type pieceLibrary struct {
	home, dir string
	lib       *engine.Library
}

// open returns the library of the pieces in effect in workdir
// (openLibrary), loaded by an earlier call for the same directories
// when there was one. A nil p loads every time.
func (p *pieceLibrary) open(ctx context.Context, home, workdir string) (*engine.Library, error) {
	if p != nil && p.lib != nil && p.home == home && p.dir == workdir {
		return p.lib, nil
	}
	lib, err := openLibrary(ctx, home, workdir)
	if err == nil && p != nil {
		*p = pieceLibrary{home: home, dir: workdir, lib: lib}
	}
	return lib, err
}

// checkNewPieceRun refuses, before a new session exists, a piece run
// that cannot start: a --piece the catalog lacks (an invalid file of that
// name is reported) or, on the bundled replay demo, one it does not
// script; without --piece on a live model, a classifier_model that
// cannot be used. An error then leaves no empty session behind. It
// returns the model chosen for the session, so that it is chosen once.
func checkNewPieceRun(ctx context.Context, io *IOStreams, h *host.Host, o runOptions, libs *pieceLibrary) (*providers.Choice, error) {
	choice, err := providers.Select(ctx, providers.Options{Model: o.Model, Replay: o.Replay, Config: h.Config(), Getenv: io.Getenv})
	if err != nil {
		return nil, hostErr(err)
	}
	// The configuration runPiece reads (web tools, SSH connections) is
	// checked before the session exists: its errors left an empty one.
	if _, err := host.WebTools(h.Config(), io.Getenv); err != nil {
		return nil, failErr(err)
	}
	if _, err := host.SSHConnections(h.Config()); err != nil {
		return nil, failErr(err)
	}
	if o.Piece == "" {
		// Classified on a live model (runPiece), else the plain loop.
		live := choice.Executor == protocol.ExecutorLive
		if _, err := h.ClassifierModel(ctx, h.PieceModels(), live); err != nil {
			return nil, failErr(err)
		}
		return choice, nil
	}
	dir, err := host.WorkspaceDir(o.Workspace)
	if err != nil {
		return choice, nil // the session reports it
	}
	lib, err := libs.open(ctx, h.Home(), dir)
	if err != nil {
		return nil, failErr(err)
	}
	p, ok := lib.Get(o.Piece)
	if u := lib.Catalog().UntrustedPiece(o.Piece); u != nil && !ok {
		// As without --piece, an untrusted file is ignored and the
		// definition it would replace runs (runPiece says so first); with
		// no other definition there is nothing to run.
		return nil, usageErr("%s: piece %s is defined only by this file, which is not trusted (new or changed since trusted) and grants more than the workspace sandbox:\n  %s\nto run it, read it (maestro pieces show %s --workspace %s), then trust it: %s",
			u.File, u.Name, strings.Join(u.Grants, "\n  "), u.Name, shellQuote(u.Workspace), u.TrustCommand())
	}
	if !ok {
		reportProblems(io, lib)
		return nil, usageErr("unknown piece %q; available: %s", o.Piece, strings.Join(lib.Names(), ", "))
	}
	// An MCP server the piece requires that config.yaml does not declare
	// fails the run here, before its session exists (the engine would
	// fail it too, after, leaving an empty session).
	for _, slug := range p.RequiredMCP {
		if _, ok := h.Config().MCPServers[slug]; !ok {
			return nil, usageErr("piece %q requires the MCP server %q, which is not configured (mcp_servers in config.yaml; see docs/mcp.md)", o.Piece, slug)
		}
	}
	probe := *choice // usePieceDemo sets the provider of the piece demo
	if _, err := usePieceDemo(ctx, &probe, o.Piece, nil, libs, h.Home(), dir); err != nil {
		return nil, err
	}
	return choice, nil
}

// replayEnded says, when s replays a scenario that has no scripted turn
// left for its conversation, that the replay ended and how to go on with
// a real model; "" when s is live or its scenario scripts more turns
// (each model call plays the frame numbered by the assistant messages so
// far, so those frames are what a resume would play).
func replayEnded(s *host.Session) string {
	if s.Choice == nil || s.Choice.Executor != protocol.ExecutorReplay {
		return ""
	}
	scripted, ok := s.Choice.Provider.(interface{ Scenario() *replay.Scenario })
	if !ok {
		return ""
	}
	played := 0
	for _, m := range s.Log.History() {
		if m.Role == llm.RoleAssistant {
			played++
		}
	}
	sc := scripted.Scenario()
	if played < len(sc.Frames) {
		return ""
	}
	return fmt.Sprintf("the replay ended: scripted scenario %s complete (all %d model turn(s) of %s were played), so this session cannot be resumed. "+
		"To go on with a real model, configure one (ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL, or --model provider/model) "+
		"and start a new session in the same workspace: maestro run --workspace %q \"…\"", sc.ID, len(sc.Frames), s.Choice.Replay, s.Root.Dir())
}

// localView is maestro run as a local client of its session's runtime:
// the controller connection and a lossless subscription whose frames it
// renders. As an agent sink (the piece engine's) it publishes each event
// through the runtime, then renders every frame there is, so that output
// written after an event comes after the event's rendering.
type localView struct {
	conn    *runtime.Conn
	sub     *runtime.Subscription
	publish agent.Sink
	view    agent.Sink
	mu      sync.Mutex
}

// newLocalView connects to rt, not yet started, and subscribes from its
// first frame.
func newLocalView(rt *runtime.Runtime, view agent.Sink) (*localView, error) {
	conn, err := rt.Connect(runtime.ConnectOptions{ID: runtime.LocalConnectionID, Local: true})
	if err != nil {
		return nil, fmt.Errorf("connect to the session: %w", err)
	}
	sub, err := conn.Subscribe(runtime.SubscribeOptions{From: runtime.FromOldest, Lossless: true})
	if err != nil {
		return nil, fmt.Errorf("subscribe to the session: %w", err)
	}
	return &localView{conn: conn, sub: sub, publish: rt.Sink(), view: view}, nil
}

func (v *localView) Event(m protocol.Message) {
	v.publish.Event(m)
	v.render()
}

func (v *localView) Message(m llm.Message) { v.publish.Message(m) }

// render renders the frames published so far.
func (v *localView) render() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for {
		f, ok, err := v.sub.TryNext()
		if err != nil || !ok {
			return
		}
		v.view.Event(f.Message)
	}
}

// follow renders frames as they come until the runtime is closed and
// every frame was read.
func (v *localView) follow() {
	for {
		f, err := v.sub.Next(context.Background())
		if err != nil {
			return
		}
		v.view.Event(f.Message)
	}
}

// runView is what renders a run: JSON lines, or the terminal renderer
// (text, also returned). A piece's intermediate text is progress, not the
// answer: it goes to stderr, and only the result to stdout.
func runView(io *IOStreams, o runOptions, pieceMode, replay bool) (agent.Sink, *renderer) {
	if o.Output == "jsonl" {
		return &jsonlSink{w: io.Out, errOut: io.ErrOut}, nil
	}
	rio := io
	if pieceMode {
		c := *io
		c.Out, c.OutTTY = io.ErrOut, io.ErrTTY
		rio = &c
	}
	text := newRenderer(rio, replay)
	return text, text
}

// runPlain runs the task in the plain agent loop as a local client of the
// session's runtime: it connects as the controller, says hello, prompts,
// and renders the frames it is sent, the same an embedder of `maestro
// headless` receives (ready, session_info, hello_ok, connection_info,
// response_*, tool_*, …). The run's result gives the usage line and the
// exit status; ctx ending interrupts the run (exit 130).
func runPlain(ctx context.Context, io *IOStreams, s *host.Session, sandboxKind, task string, view agent.Sink, text *renderer) error {
	rt := s.Runtime
	v, err := newLocalView(rt, view)
	if err != nil {
		return failErr(err)
	}
	rendered := make(chan struct{})
	go func() {
		defer close(rendered)
		v.follow()
	}()
	if text != nil && s.Choice != nil {
		text.header(s.ID(), s.Choice, sandboxKind, s.Root.Dir())
	}
	rt.Start()
	started := time.Now()
	var res agent.Result
	runErr := v.conn.Handle(ctx, protocol.Hello{ProtocolVersion: protocol.Version})
	if runErr == nil {
		res, runErr = v.conn.RunPrompt(ctx, protocol.Prompt{Content: task})
	}
	closeErr := rt.Close() // ends the subscription once it has read everything
	<-rendered
	if text != nil {
		if s.Choice != nil { // an agent CLI reports no usage line
			text.finish(res, time.Since(started), s.Choice.Executor == protocol.ExecutorReplay)
		}
		if ended := replayEnded(s); ended != "" {
			fmt.Fprintf(io.ErrOut, "session %s · %s\n", s.ID(), ended)
		} else {
			fmt.Fprintf(io.ErrOut, "session %s · resume with: maestro run --resume %s \"…\"\n", s.ID(), s.Log.ShortID())
		}
	}
	switch {
	case errors.Is(runErr, agent.ErrCancelled):
		return &exitError{ExitInterrupted, errors.New("interrupted")}
	case runErr != nil && s.Choice != nil:
		return failErr(providers.ExplainUnknownModel(ctx, s.Choice.Provider, runErr))
	case runErr != nil:
		return failErr(runErr)
	case closeErr != nil:
		return failErr(fmt.Errorf("save session: %w", closeErr))
	}
	return nil
}
