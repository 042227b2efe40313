package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/binpages"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/transport/stdio"
)

// headlessOptions are the flags of `maestro headless`.
type headlessOptions struct {
	sessionFlags
	ApprovalMode string
	ClientTools  string
	// maxIterationsGiven: --max-iterations was on the command line (its
	// 0 is then no default).
	maxIterationsGiven bool
	// args are the command line's arguments (it takes none); useLine its
	// usage line, for the refusal.
	args    []string
	useLine string
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
lost it; with --agent, an ID that is no Maestro session is taken as the
CLI's own id (in full, as 'maestro sessions list --agent ID' prints it).

If Maestro cannot start, it writes one fatal error message on stdout
({"type":"error","message":"Headless startup failed: …","fatal":true,
"error_type":"fatal"}), details on stderr, and exits non-zero.`,
		Example: `  maestro headless --workspace ~/src/app
  maestro headless --replay scenario.yaml --approval-mode auto
  maestro headless --client-tools tools.json --model anthropic/claude-sonnet-4-5
  maestro headless --agent claude-code --approval-mode prompt`,
		// An argument is refused by runHeadless, so that the client reads
		// the refusal on stdout as for any other start-up failure.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.maxIterationsGiven = cmd.Flags().Changed("max-iterations")
			o.args, o.useLine = args, cmd.UseLine()
			return runHeadless(cmd.Context(), io, o)
		},
	}
	// A bad flag is a start-up failure the client reads on stdout too (it
	// got nothing there, only an exit status 2).
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		err = flagError(c, err)
		if werr := stdio.WriteStartupFailure(io.Out, err); werr != nil {
			io.logger(slog.LevelWarn).Error("write the startup failure", "err", werr)
		}
		return err
	})
	f := cmd.Flags()
	o.sessionFlags.bind(cmd)
	f.StringVar(&o.ApprovalMode, "approval-mode", string(protocol.ApprovalPrompt), "tool calls that change things: prompt (ask the client), auto (run), fail (deny); init can change it")
	f.StringVar(&o.ClientTools, "client-tools", "", "JSON file declaring tools the client executes: [{\"name\",\"description\",\"input_schema\"}]")
	f.StringVar(&o.Thinking, "thinking", "", "thinking level: off, minimal, low, medium, high, ultra (init can change it)")
	f.StringVar(&o.System, "system", "", "replace the default system prompt (init can change it)")
	f.IntVar(&o.MaxIterations, "max-iterations", 0, "maximum model calls per prompt (default 50)")
	f.StringVar(&o.Agent, "agent", "", "run prompts on an agent CLI (claude-code, codex, gemini-cli, opencode, qwen-code, or ~/.maestro/agents/*.yaml)")
	return cmd
}

func runHeadless(ctx context.Context, io *IOStreams, o headlessOptions) error {
	log := io.logger(slog.LevelWarn)
	s, err := startHeadless(ctx, io, o, log)
	if err != nil {
		// The client reads stdout: it gets one fatal error message; the
		// details go to stderr (printed by Run).
		if werr := stdio.WriteStartupFailure(io.Out, err); werr != nil {
			log.Error("write the startup failure", "err", werr)
		}
		return hostErr(err)
	}

	// SIGINT and SIGTERM end the session like a shutdown message.
	sctx, stop := untilSignalled(ctx)
	defer stop()
	// A client that closes its end of stdout: the write fails with EPIPE
	// and the session shuts down as on a shutdown message.
	defer catchSIGPIPE()()
	serveErr := stdio.Serve(sctx, stdio.Config{Runtime: s.Runtime, In: io.In, Out: io.Out, Logger: log,
		// Probing the sandbox runs processes: after ready, not before.
		Started: func() { s.Started(); go releaseStartupPages(sctx, s, log) }})
	closeErr := s.Close()
	switch {
	case serveErr != nil:
		return failErr(serveErr)
	case closeErr != nil:
		return failErr(fmt.Errorf("save session: %w", closeErr))
	}
	return nil
}

// releaseStartupPages unmaps the binary's pages that start-up left
// mapped, once the sandbox probe (the last of the start-up work, begun
// after ready) is done: an idle headless process then stays resident only
// for what it touches next (internal/binpages; bench/README.md,
// "headless: resident memory").
func releaseStartupPages(ctx context.Context, s *host.Session, log *slog.Logger) {
	// The probe's own error is the session's to report, at the first Bash.
	if _, err := s.Sandbox(ctx); err != nil && ctx.Err() != nil {
		return
	}
	if _, err := binpages.Release(); err != nil {
		log.Warn("release the binary's start-up pages", "err", err)
	}
}

// startHeadless does everything that can fail before the protocol starts.
// It stays fast: the sandbox is probed in the background (ready does not
// wait for it) unless --sandbox bwrap or landlock makes its absence fatal.
func startHeadless(ctx context.Context, io *IOStreams, o headlessOptions, log *slog.Logger) (*host.Session, error) {
	if len(o.args) > 0 {
		return nil, usageErr("unknown command %q for \"maestro headless\" (usage: %s)", o.args[0], o.useLine)
	}
	mode := protocol.ApprovalMode(o.ApprovalMode)
	switch mode {
	case protocol.ApprovalAuto, protocol.ApprovalPrompt, protocol.ApprovalFail:
	default:
		return nil, usageErr("--approval-mode %q: expected prompt, auto or fail", o.ApprovalMode)
	}
	if err := checkThinking(o.Thinking); err != nil {
		return nil, err
	}
	if err := checkMaxIterations(o.MaxIterations, o.maxIterationsGiven); err != nil {
		return nil, err
	}
	var clientTools []runtime.ClientTool
	if o.ClientTools != "" {
		var err error
		if clientTools, err = loadClientTools(o.ClientTools); err != nil {
			return nil, usageErr("--client-tools: %v", err)
		}
	}
	h, err := host.New(host.Options{Getenv: io.Getenv, Logger: log})
	if err != nil {
		return nil, err
	}
	s, err := h.NewSession(ctx, host.Spec{
		Workspace: o.Workspace, Model: o.Model, Replay: o.Replay, Agent: o.Agent, Permission: o.Permission, Resume: o.Resume,
		Sandbox: o.Sandbox, RequireSandbox: true, ApprovalMode: mode, Thinking: llm.ThinkingLevel(o.Thinking),
		MaxIterations: o.MaxIterations, System: o.System, ClientTools: clientTools,
		SessionID: io.Getenv("MAESTRO_SESSION_ID"), AgentRunID: io.Getenv("MAESTRO_AGENT_RUN_ID"),
	})
	if err != nil {
		return nil, resumeErr(ctx, io, err, o.Resume, "maestro headless --agent %[1]s --resume %[2]s")
	}
	if s.Choice != nil && s.Choice.Notice != "" {
		fmt.Fprintln(io.ErrOut, s.Choice.Notice)
	}
	return s, nil
}

// checkMaxIterations refuses a --max-iterations that is not positive. 0
// is the flag's "not given" (config.yaml's max_iterations, else 50), so a
// 0 the user typed would run 50 model calls, not none.
func checkMaxIterations(n int, given bool) error {
	if n < 0 || (n == 0 && given) {
		return usageErr("--max-iterations must be positive, got %d", n)
	}
	return nil
}

// checkThinking refuses an unknown --thinking level.
func checkThinking(level string) error {
	switch llm.ThinkingLevel(level) {
	case "", llm.ThinkingOff, llm.ThinkingMinimal, llm.ThinkingLow, llm.ThinkingMedium, llm.ThinkingHigh, llm.ThinkingUltra:
		return nil
	}
	return usageErr("--thinking %q: expected one of off, minimal, low, medium, high, ultra", level)
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
		const want = `a JSON array of {"name", "description", "input_schema"}`
		// Not in Go's words ("cannot unmarshal object into Go value of
		// type []runtime.ClientTool").
		if field, msg, ok := httpedge.JSONTypeError(err); ok && field != "" {
			return nil, fmt.Errorf("%s: %s: %s", path, field, msg)
		} else if ok {
			_, found, _ := strings.Cut(msg, ", ")
			return nil, fmt.Errorf("%s: expected %s, %s", path, want, found)
		}
		return nil, fmt.Errorf("%s: expected %s: %s", path, want, strings.TrimPrefix(err.Error(), "json: "))
	}
	for i, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("%s: tool %d has no name", path, i)
		}
	}
	// The runtime's checks too (a bad name, ask_user or a name twice), so
	// that they are usage errors like the file's other faults.
	if err := runtime.CheckClientTools(tools); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tools, nil
}
