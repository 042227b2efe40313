package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/oneline"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/pieces"
)

func newPiecesCmd(io *IOStreams) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "pieces",
		Short: "List, show and validate pieces (YAML workflows of movements)",
		Long: `Pieces are YAML workflows of movements (docs/pieces.md). Maestro ships
built-in pieces and reads overrides from ~/.maestro/pieces/ and from the
project's .maestro/pieces/ (the project wins). 'maestro run --piece NAME'
runs one. A project piece that grants more than the workspace sandbox (an
agent CLI, SSH, MCP, piece writing) is ignored until you trust its exact
content with 'maestro pieces trust'.`,
		Example: `  maestro pieces list
  maestro pieces show code > .maestro/pieces/code.yaml     # a project override to edit
  maestro pieces validate .maestro/pieces/code.yaml
  maestro run --piece code "fix the failing test"`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVarP(&ws, "workspace", "w", "", "project directory whose .maestro/pieces/ is read (default: current directory)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the pieces in effect, with where each comes from",
		Long: `Lists the pieces 'maestro run' can use, by name: where each comes from
(builtin, or the override file in ~/.maestro/pieces/ or the project's
.maestro/pieces/, which replaces the built-in of the same name), its movements
in order, and the first line of its description (the classifier reads the
whole description to pick a piece for a task). An override file that does not
validate is reported on stderr and ignored: the definition it would replace
stays in effect. A project piece that grants more than the workspace
sandbox (agent CLI, Ssh*, MCP, CreatePiece/UpdatePiece) is ignored until you
trust it: its row is marked UNTRUSTED ('maestro pieces trust --help').
--workspace DIR reads DIR's .maestro/pieces/ instead of the
current directory's. MISSING TOOLS names the tools the piece's movements
list that a run would lack: tools this build of Maestro lacks (document
tools, …) and MCP tools whose server is not among config.yaml's mcp_servers
(mcp__<server>__…, or mcp__* when there is none); a run leaves them out and
says so once. "required_mcp X" marks a required MCP server that is not
configured: a run of that piece fails before it starts.`,
		Example: `  maestro pieces list
  maestro pieces list --workspace ~/src/app`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lib, servers, err := loadLibraryAndMCP(cmd.Context(), io, ws)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSOURCE\tMOVEMENTS\tMISSING TOOLS\tDESCRIPTION")
			for _, e := range lib.Catalog().List() {
				missing := "-"
				names := e.Piece.MissingTools(servers)
				for _, slug := range e.Piece.MissingMCP(servers) {
					names = append(names, "required_mcp "+slug)
				}
				if len(names) > 0 {
					missing = strings.Join(names, ", ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Piece.Name, sourceLabel(e), strings.Join(e.Piece.MovementNames(), ", "), missing, firstLine(e.Piece.Description, 70))
				if u := lib.Catalog().UntrustedPiece(e.Piece.Name); u != nil {
					writeUntrustedRow(tw, u)
				}
			}
			for _, u := range lib.Catalog().Untrusted() {
				if _, ok := lib.Catalog().Get(u.Name); !ok {
					writeUntrustedRow(tw, u)
				}
			}
			tw.Flush()
			reportProblems(io, lib)
			return nil
		},
	}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a piece in canonical YAML",
		Long: `Prints the piece NAME as it is in effect (after overrides), in canonical YAML:
its description, movements with their persona, instruction, allowed tools,
rules and transitions (docs/pieces.md describes every field). The first line
names its source. Copy it to ~/.maestro/pieces/NAME.yaml or the project's
.maestro/pieces/NAME.yaml to change it, and check the copy with
'maestro pieces validate FILE'. Comments at the end name, per movement, the
tools it lists that this build of Maestro lacks and the MCP tools no server
in config.yaml's mcp_servers serves (a run leaves them out), and the
required MCP servers that are not configured (a run fails at once).
A project piece that grants more than the workspace sandbox and that you
have not trusted is ignored: show prints that file instead, marked
UNTRUSTED, with what it would grant and the 'maestro pieces trust' command.`,
		Example: `  maestro pieces show code
  maestro pieces show code > .maestro/pieces/code.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lib, servers, err := loadLibraryAndMCP(cmd.Context(), io, ws)
			if err != nil {
				return err
			}
			e, ok := lib.Catalog().Get(args[0])
			if u := lib.Catalog().UntrustedPiece(args[0]); u != nil {
				// What the user is asked to trust: the file's definition
				// and what it would grant.
				data, err := piece.Marshal(u.Piece)
				if err != nil {
					return failErr(err)
				}
				inEffect := "no definition of " + u.Name + " is in effect"
				if ok {
					inEffect = sourceLabel(e) + " is in effect instead"
				}
				fmt.Fprintf(io.Out, "# source: %s (UNTRUSTED, ignored: %s)\n%s", u.File, inEffect, data)
				fmt.Fprintln(io.Out, "# Grants beyond the workspace sandbox, which need your trust:")
				for _, g := range u.Grants {
					fmt.Fprintf(io.Out, "#   %s\n", g)
				}
				fmt.Fprintf(io.Out, "# If you trust this file: %s\n", u.TrustCommand())
				return nil
			}
			if !ok {
				return failErr(fmt.Errorf("no piece %q; pieces: %s", args[0], strings.Join(lib.Names(), ", ")))
			}
			data, err := piece.Marshal(e.Piece)
			if err != nil {
				return failErr(err)
			}
			fmt.Fprintf(io.Out, "# source: %s\n%s", e.Source, data)
			writeUnavailable(io, e.Piece, servers)
			reportProblems(io, lib, outputFile(io))
			return nil
		},
	}
	validate := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check piece files with the validator; every fault as file:line:col",
		Long: `Check piece files with Maestro's validator (the same one the catalog, the
piece tools and the API use). Each fault is printed as
file:line:col: field: message; a valid file prints "FILE: ok". The exit status
is 1 when any file is invalid or unreadable. A file in a pieces/ directory
(~/.maestro/pieces/, the project's .maestro/pieces/) is also checked as the
catalog reads it: it must be NAME.yaml or NAME.yml for a piece named NAME,
else 'maestro pieces list' ignores it. A valid project piece that grants more
than the workspace sandbox and is not trusted is "ok", with a line saying the
catalog ignores it until 'maestro pieces trust'.`,
		Example: `  maestro pieces validate .maestro/pieces/*.yaml
  maestro pieces validate ~/.maestro/pieces/deploy.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, file := range args {
				data, err := os.ReadFile(file)
				if err != nil {
					fmt.Fprintf(io.Out, "%s: %v\n", file, err)
					bad++
					continue
				}
				p, err := piece.Parse(file, data)
				if err == nil && isPieceDir(filepath.Dir(file)) {
					err = piece.CheckFile(file, p) // what the catalog would refuse
				}
				if err != nil {
					fmt.Fprintln(io.Out, err)
					bad++
					continue
				}
				fmt.Fprintf(io.Out, "%s: ok (piece %s, %d movement(s))\n", file, p.Name, len(p.Movements))
				if note := untrustedNote(io, file, data, p); note != "" {
					fmt.Fprintln(io.Out, note)
				}
			}
			if bad > 0 {
				return failErr(fmt.Errorf("%d of %d file(s) invalid", bad, len(args)))
			}
			return nil
		},
	}
	cmd.AddCommand(list, show, validate, newPiecesTrustCmd(io, &ws))
	return cmd
}

// pieceDirs are the override directories, lowest precedence first: the
// user's (<maestro home>/pieces) and the project's.
func pieceDirs(home, workdir string) []string {
	dirs := []string{filepath.Join(home, "pieces")}
	if p := filepath.Join(workdir, ".maestro", "pieces"); !slices.Contains(dirs, p) {
		dirs = append(dirs, p)
	}
	return dirs
}

// isPieceDir says whether dir is one the catalog reads files from: a
// directory named pieces (~/.maestro/pieces/, the project's
// .maestro/pieces/, $MAESTRO_HOME/pieces/).
func isPieceDir(dir string) bool {
	abs, err := filepath.Abs(dir)
	return err == nil && filepath.Base(abs) == "pieces"
}

func loadLibrary(ctx context.Context, io *IOStreams, ws string) (*engine.Library, error) {
	home, err := config.Home(io.Getenv)
	if err != nil {
		return nil, failErr(err)
	}
	dir, err := host.WorkspaceDir(ws)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	lib, err := openLibrary(ctx, home, dir)
	if err != nil {
		return nil, failErr(err)
	}
	return lib, nil
}

// openLibrary loads the pieces in effect in workdir: the built-ins, the
// user's (<home>/pieces, also where new pieces are saved), then the
// project's, whose pieces that grant more than the workspace sandbox load
// only when the user trusts them ('maestro pieces trust').
func openLibrary(ctx context.Context, home, workdir string) (*engine.Library, error) {
	trust, err := piece.LoadTrust(filepath.Join(home, piece.TrustFile))
	if err != nil {
		return nil, err
	}
	dirs := pieceDirs(home, workdir)
	var guard piece.Guard
	if len(dirs) > 1 {
		guard = piece.Guard{Dir: dirs[len(dirs)-1], Trust: trust}
	}
	return engine.NewGuardedLibrary(ctx, pieces.FS(), guard, dirs, filepath.Join(home, "pieces"))
}

// writeUnavailable ends `pieces show` with comments naming, per movement,
// the tools it lists that this build lacks and the MCP tools none of
// servers (config.yaml's mcp_servers) serves, then the required MCP
// servers that are not configured.
func writeUnavailable(io *IOStreams, p *piece.Piece, servers []string) {
	writeMovementTools(io, p, "# Tools this build of Maestro lacks (left out when the piece runs):", (*piece.Movement).UnavailableTools)
	writeMovementTools(io, p, "# MCP tools no server in config.yaml's mcp_servers serves (left out when the piece runs):", func(m *piece.Movement) []string {
		return slices.DeleteFunc(m.MissingTools(servers), func(name string) bool { return !strings.HasPrefix(name, "mcp__") })
	})
	if slugs := p.MissingMCP(servers); len(slugs) > 0 {
		fmt.Fprintf(io.Out, "# required_mcp servers config.yaml does not configure (a run fails before it starts): %s\n", strings.Join(slugs, ", "))
	}
}

// writeMovementTools writes heading and, per movement of p, the tools
// list names, when any movement has some.
func writeMovementTools(io *IOStreams, p *piece.Piece, heading string, list func(*piece.Movement) []string) {
	wrote := false
	for i := range p.Movements {
		names := list(&p.Movements[i])
		if len(names) == 0 {
			continue
		}
		if !wrote {
			fmt.Fprintln(io.Out, heading)
			wrote = true
		}
		fmt.Fprintf(io.Out, "#   movement %s: %s\n", p.Movements[i].Name, strings.Join(names, ", "))
	}
}

// loadLibraryAndMCP loads the pieces in effect for ws and the MCP servers
// config.yaml configures, which `pieces list` and `pieces show` check the
// pieces against.
func loadLibraryAndMCP(ctx context.Context, io *IOStreams, ws string) (*engine.Library, []string, error) {
	lib, err := loadLibrary(ctx, io, ws)
	if err != nil {
		return nil, nil, err
	}
	servers, err := configuredMCP(io)
	if err != nil {
		return nil, nil, err
	}
	return lib, servers, nil
}

// configuredMCP lists the MCP servers of config.yaml (its mcp_servers'
// slugs), sorted.
func configuredMCP(io *IOStreams) ([]string, error) {
	home, err := config.Home(io.Getenv)
	if err != nil {
		return nil, failErr(err)
	}
	cfg, err := config.Load(filepath.Join(home, "config.yaml"))
	if err != nil {
		return nil, failErr(err)
	}
	return slices.Sorted(maps.Keys(cfg.MCPServers)), nil
}

// reportProblems prints the override files the catalog ignored, but for
// the file skip names (nil: none).
func reportProblems(io *IOStreams, lib *engine.Library, skip ...os.FileInfo) {
	for _, err := range lib.Catalog().Problems() {
		if _, ok := errors.AsType[*piece.UntrustedError](err); ok {
			fmt.Fprintf(io.ErrOut, "maestro: ignored an untrusted piece file:\n%v\n", err)
			continue
		}
		if perr, ok := errors.AsType[*piece.Errors](err); ok && len(perr.List) > 0 && len(skip) > 0 && skip[0] != nil {
			if fi, serr := os.Stat(perr.List[0].File); serr == nil && os.SameFile(fi, skip[0]) {
				continue
			}
		}
		fmt.Fprintf(io.ErrOut, "maestro: ignored an invalid piece file (the definition it would replace stays in effect):\n%v\n", err)
	}
}

// outputFile is the regular file stdout writes to, nil when it is not
// one. 'maestro pieces show code > .maestro/pieces/code.yaml' has the
// shell create that file, empty, before the catalog reads it: it is
// ignored, as it should be, but reporting it would alarm for nothing.
func outputFile(io *IOStreams) os.FileInfo {
	f, ok := io.Out.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	return fi
}

// untrustedNote says, for a valid file in a project's .maestro/pieces/
// that grants more than the sandbox and is not trusted, that the catalog
// will ignore it until 'maestro pieces trust'; "" otherwise.
func untrustedNote(io *IOStreams, file string, data []byte, p *piece.Piece) string {
	abs, err := filepath.Abs(file)
	if err != nil || filepath.Base(filepath.Dir(abs)) != "pieces" || filepath.Base(filepath.Dir(filepath.Dir(abs))) != ".maestro" {
		return ""
	}
	grants := p.Grants()
	home, err := config.Home(io.Getenv)
	if len(grants) == 0 || err != nil || filepath.Dir(abs) == filepath.Join(home, "pieces") {
		return ""
	}
	trust, err := piece.LoadTrust(filepath.Join(home, piece.TrustFile))
	if err != nil {
		return ""
	}
	// Judged as the catalog judges it: the file's real path and content.
	if data, key, err := piece.ReadPieceFile(abs); err != nil || trust.Trusted(key, data) {
		return ""
	}
	u := &piece.UntrustedError{Name: p.Name, Workspace: filepath.Dir(filepath.Dir(filepath.Dir(abs)))}
	return fmt.Sprintf("  but it grants more than the workspace sandbox (%s) and is not trusted: the catalog ignores it until you run %s",
		strings.Join(grants, "; "), u.TrustCommand())
}

// writeUntrustedRow is the `pieces list` row of a project piece ignored
// for want of trust.
func writeUntrustedRow(tw *tabwriter.Writer, u *piece.UntrustedError) {
	fmt.Fprintf(tw, "%s\t%s (UNTRUSTED, ignored)\t%s\t-\tgrants more than the sandbox; to use it: %s\n",
		u.Name, u.File, strings.Join(u.Piece.MovementNames(), ", "), u.TrustCommand())
}

func sourceLabel(e piece.Entry) string {
	switch {
	case strings.HasPrefix(e.Source, "builtin:"):
		return "builtin"
	case e.Builtin:
		return e.Source + " (overrides builtin)"
	}
	return e.Source
}

func firstLine(s string, n int) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return oneline.Cut(line, n)
}

// usePieceDemo lets a piece run on the bundled replay demo play the
// bundled piece demo, as a queued job without a model does: the demo
// scripts a run of piece replay.DemoPieceFor (the piece given, or the
// resumed session's). Another piece whose movements need a model is
// refused before anything runs, since the script cannot drive it; one
// that does not exist (the run says so) is left alone, as are other
// choices. A piece that runs only on agent CLIs never calls the demo:
// when the demo stands for no model configured (or the session's, on a
// resume), agentsOnly is true, and the choice's notice says that no
// model is needed instead of announcing the demo.
func usePieceDemo(ctx context.Context, choice *providers.Choice, name string, prior *priorRun, libs *pieceLibrary, home, workdir string) (agentsOnly bool, err error) {
	if choice.Executor != protocol.ExecutorReplay || choice.Replay != providers.DemoScenario {
		return false, nil
	}
	if name == "" && prior != nil {
		name = prior.state.Piece
	}
	if name == replay.DemoPieceFor {
		choice.Provider = replay.New(replay.DemoPiece())
		return false, nil
	}
	lib, err := libs.open(ctx, home, workdir)
	if err != nil {
		return false, failErr(err)
	}
	p, ok := lib.Get(name)
	if !ok {
		return false, nil
	}
	if !slices.ContainsFunc(p.Movements, func(m piece.Movement) bool { return m.Agent == "" }) {
		if choice.Source != "default" && prior == nil {
			return false, nil // the demo asked for (--model replay/demo)
		}
		var agents []string
		for _, m := range p.Movements {
			if !slices.Contains(agents, m.Agent) {
				agents = append(agents, m.Agent)
			}
		}
		choice.Notice = fmt.Sprintf("No model configured, and none is needed: every movement of piece %s runs on an agent CLI (%s), which calls its own model.",
			name, strings.Join(agents, ", "))
		return true, nil
	}
	return false, usageErr("no model is configured, and the bundled replay demo scripts only piece %s, not %s: "+
		"try it with --piece %s, or configure a real model (ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL, or --model provider/model) to run piece %s",
		replay.DemoPieceFor, name, replay.DemoPieceFor, name)
}

// pieceRun is what runTask hands to runPiece.
type pieceRun struct {
	o    runOptions
	task string
	h    *host.Host
	hs   *host.Session
	// follow publishes the subtasks' session logs on the event bus
	// (host.FollowSession; nil: none).
	follow   func(dir string, meta session.Meta) func(cursor int64, reason string)
	sess     *session.Session
	prior    *priorRun
	choice   *providers.Choice
	provider llm.Provider
	sb       *sandbox.Sandbox
	root     *workspace.Root
	// sink is the session log and the view; view alone is what the user
	// sees (the terminal renderer or stdout's JSON lines).
	sink  agent.Sink
	view  agent.Sink
	text  *renderer
	jsonl bool
	// libs holds the pieces loaded before the run, if any (nil: none).
	libs *pieceLibrary
}

// priorRun is the latest piece run of a session: runs live in
// <session dir>/runs/<n>/, numbered from 1.
type priorRun struct {
	n     int
	dir   string
	state *engine.State
}

// latestRun finds a session's latest piece run; nil for a plain session.
func latestRun(sessDir string) (*priorRun, error) {
	n, dir, st, err := engine.LatestRun(filepath.Join(sessDir, "runs"))
	if err != nil || n == 0 {
		return nil, err
	}
	return &priorRun{n: n, dir: dir, state: st}, nil
}

// runPiece runs (or resumes) a piece run in the session.
func runPiece(ctx context.Context, io *IOStreams, pr pieceRun) error {
	replayRun := pr.choice.Executor == protocol.ExecutorReplay
	lib, err := pr.libs.open(ctx, pr.h.Home(), pr.root.Dir())
	if err != nil {
		return failErr(err)
	}
	for _, perr := range lib.Catalog().Problems() {
		if _, ok := errors.AsType[*piece.UntrustedError](perr); ok {
			pr.sink.Event(protocol.Status{Message: "Ignored an untrusted piece file: " + perr.Error()})
			continue
		}
		pr.sink.Event(protocol.Status{Message: "Ignored an invalid piece file: " + perr.Error()})
	}
	// The session log records each run event once. The terminal draws the
	// run's events from the events themselves; a protocol-only view (-o
	// jsonl) sees each as a status line.
	events := engine.WithStatusLines(engine.SessionEvents(pr.sess), pr.view)
	if pr.text != nil {
		logged := engine.SessionEvents(pr.sess)
		events = engine.EventSinkFunc(func(r engine.Record) { logged.RunEvent(r); pr.text.RunEvent(r) })
	}
	cfg := pr.h.Config()
	web, err := host.WebTools(cfg, io.Getenv)
	if err != nil {
		return failErr(err)
	}
	sshConns, err := host.SSHConnections(cfg)
	if err != nil {
		return failErr(err)
	}
	models := pr.h.PieceModels()
	var classifier llm.Provider
	if pr.o.Piece == "" && pr.prior == nil {
		if classifier, err = pr.h.ClassifierModel(ctx, models, !replayRun); err != nil {
			return failErr(err)
		}
	}
	l := engine.Launch{
		Config: engine.Config{
			Models: models, ClassifierProvider: classifier,
			Provider: pr.provider, Workspace: pr.root, Sandbox: pr.sb, FileLimits: host.FileLimits(cfg), Web: web, SSH: sshConns, Library: lib,
			Sink: pr.sink, Events: events, Agents: agentMovements(io, pr.o.Model, agentcli.Permission(cmp.Or(pr.o.Permission, cfg.AgentPermission))),
			MaxIterations: firstPositive(pr.o.MaxIterations, cfg.MaxIterations),
			Thinking:      llm.ThinkingLevel(pr.o.Thinking),
			FollowLog:     pr.follow,
			// ReadSkill's skills: the project's ./.maestro/skills, then
			// the user's ~/.maestro/skills (docs/skills.md).
			Skills: skills.DefaultLibrary(pr.root.Dir(), pr.h.Home()),
		},
		Task: pr.task, Piece: pr.o.Piece,
	}
	if pr.hs.MCP != nil {
		l.Config.MCP = pr.hs.MCP // the session's MCP servers (docs/mcp.md)
	}
	if pr.prior != nil && !pr.prior.state.Status.Final() {
		// The unfinished run continues, with the task as the answer.
		l.Config.RunDir = pr.prior.dir
	} else {
		// A new run; after a finished one, it follows it up. On replay,
		// it continues the session's script after the turns already
		// played (a plain conversation or earlier runs).
		n := 1
		for _, m := range pr.sess.History() {
			if m.Role == llm.RoleAssistant {
				l.FirstFrame++
			}
		}
		if pr.prior != nil {
			n, l.Previous = pr.prior.n+1, pr.prior.state
		}
		l.RunID = fmt.Sprintf("%s.%d", pr.sess.ID(), n)
		l.Config.RunDir = filepath.Join(pr.sess.Dir(), "runs", strconv.Itoa(n))
	}

	started := time.Now()
	out, runErr := l.Run(ctx)
	// The session's close_reason on the event bus (docs/events.md) is the
	// run's outcome, also when no agent turn ended in it (Ctrl-C while
	// the run waits for its subtasks; a run the engine failed).
	switch {
	case errors.Is(runErr, agent.ErrCancelled) || ctx.Err() != nil || out.Status == engine.StatusCancelled:
		pr.hs.Runtime.SetCloseReason("user_stopped")
	case runErr != nil || out.Status == engine.StatusFailed:
		pr.hs.Runtime.SetCloseReason("error")
	}
	if cerr := (*engine.ClassifyError)(nil); errors.As(runErr, &cerr) {
		if ctx.Err() != nil {
			return &exitError{ExitInterrupted, errors.New("interrupted")}
		}
		return usageErr("%v", cerr.Err)
	}
	if pr.text != nil {
		pr.text.finish(agent.Result{
			Usage: out.Usage, CostUSD: out.CostUSD, CostKnown: out.CostKnown, Iterations: out.ModelCalls,
			Tools: protocol.ToolsSummary{CallsSucceeded: out.ToolCalls - out.ToolFailures, CallsFailed: out.ToolFailures},
		}, time.Since(started), replayRun)
	}
	// The result is the only output the user sees: stdout in text mode, a
	// final status line in jsonl.
	switch out.Status {
	case engine.StatusSucceeded, engine.StatusAborted, engine.StatusWaitingHuman:
		if pr.jsonl {
			pr.sink.Event(protocol.Status{Message: fmt.Sprintf("Result (%s): %s", out.Status, out.Result)})
		} else {
			fmt.Fprintln(io.Out, out.Result)
		}
	}
	closeErr := pr.sess.Close()
	id, short := pr.sess.ID(), pr.sess.ShortID()
	if pr.text != nil {
		if ended := replayEnded(pr.hs); ended != "" {
			fmt.Fprintf(io.ErrOut, "session %s · %s\n", id, ended)
		} else if out.Status == engine.StatusWaitingHuman {
			fmt.Fprintf(io.ErrOut, "session %s · the run waits for your answer: maestro run --resume %s \"your answer\"\n", id, short)
		} else {
			fmt.Fprintf(io.ErrOut, "session %s · continue with: maestro run --resume %s \"…\"\n", id, short)
		}
	}
	switch {
	case errors.Is(runErr, agent.ErrCancelled):
		return &exitError{ExitInterrupted, errors.New("interrupted")}
	case runErr != nil:
		return failErr(providers.ExplainUnknownModel(ctx, pr.choice.Provider, runErr))
	case out.Status == engine.StatusAborted:
		reason := out.Reason
		if reason == "" {
			reason = oneline.Cut(out.Result, 200)
		}
		return failErr(fmt.Errorf("the %s run was aborted: %s", out.Piece, reason))
	case closeErr != nil:
		return failErr(fmt.Errorf("save session: %w", closeErr))
	}
	return nil
}
