// Package cli is Maestro's command line: cobra commands, flag parsing,
// terminal rendering and exit codes. It holds no business logic: sessions
// come from the composition root (internal/host), and commands compose the
// packages below it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// version is set at build time with -ldflags "-X …/internal/cli.version=v1.2.3".
var version = "dev"

// Exit codes.
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// IOStreams are the process's standard streams and what is known of them.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY and ErrTTY report whether Out and ErrOut are terminals.
	OutTTY, ErrTTY bool
	// Getenv reads the environment.
	Getenv func(string) string
}

// System returns the real streams.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		OutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		Getenv: os.Getenv,
	}
}

// Main runs the command line and returns the exit code.
func Main() int {
	return Run(context.Background(), System(), os.Args[1:])
}

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Run executes args and returns the exit code. Errors are printed as one
// line on ErrOut.
func Run(ctx context.Context, io *IOStreams, args []string) int {
	root := NewRoot(io)
	root.SetArgs(args)
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	root.SetContext(ctx)
	defer startTracing(ctx, io)()
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	code := ExitError
	if e, ok := errors.AsType[*exitError](err); ok {
		code = e.code
	} else {
		// Cobra's own errors are usage errors (unknown flag, bad args).
		code = ExitUsage
	}
	fmt.Fprintf(io.ErrOut, "maestro: %v\n", err)
	if code == ExitUsage {
		// The help of the command that was run (cobra returns the
		// deepest command it found, the root for an unknown one).
		path := root.CommandPath()
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(io.ErrOut, "Run '%s --help' for usage.\n", path)
	}
	return code
}

// NewRoot builds the command tree.
func NewRoot(io *IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "maestro",
		Short: "Run coding agents on real work",
		Long: `Maestro runs coding agents on real work: its own agent loop with sandboxed
tools over any model (Anthropic, OpenAI, local OpenAI-compatible servers), or a
scripted replay when no model is configured.

Quick start (no keys needed — runs the bundled replay demo):
  maestro run --workspace /tmp/demo "show me what you can do"

With a model:
  export ANTHROPIC_API_KEY=…        # or OPENAI_API_KEY, or OPENAI_BASE_URL for Ollama/vLLM
  maestro run "fix the failing test"`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(io), newRunCmd(io), newHeadlessCmd(io), newPiecesCmd(io), newAgentsCmd(io), newHostedRunnerCmd(io), newWorkerCmd(io), newServeCmd(io), newTasksCmd(io), newSessionsCmd(io), newEventsCmd(io), newMCPCmd(io))
	addEventBusFlag(root, io)
	root.SetFlagErrorFunc(flagError)
	refuseUnknownSubcommands(root)
	explainArgs(root)
	refuseFlagsAsValues(root)
	return root
}

// explainArgs adds the command's usage line to cobra's argument-count
// errors: 'maestro sessions show' said only "accepts 1 arg(s), received
// 0", naming neither the argument nor its place.
func explainArgs(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		explainArgs(c)
	}
	check := cmd.Args
	if check == nil {
		return
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return fmt.Errorf("%w (usage: %s)", err, c.UseLine())
		}
		return nil
	}
}

// refuseUnknownSubcommands makes every command group (a command with
// subcommands and no action of its own) runnable: with no argument it
// prints its help (exit 0), and an unknown subcommand is a usage error
// (exit 2) naming the ones it has. Cobra would print the help and exit 0,
// which a script takes for success.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if cmd.Parent() == nil || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		return usageErr("unknown command %q for %q: expected one of %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	}
}

func newVersionCmd(io *IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print Maestro's version",
		Long:    "Prints Maestro's version, the Go version it was built with and the headless protocol version it speaks.",
		Example: `  maestro version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(io.Out, versionString())
			return nil
		},
	}
}

func versionString() string {
	goVersion := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
	}
	return fmt.Sprintf("maestro %s %s protocol 2026-04-02", buildVersion(), goVersion)
}

// buildVersion is the binary's version: the linked-in version, else the
// module's, with the VCS revision when the build recorded one.
func buildVersion() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}
