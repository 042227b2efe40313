package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/protocol"
)

// agentRegistry loads the built-in agent CLI definitions and the user's
// ~/.maestro/agents/*.yaml. An invalid user file is reported on stderr
// (file:line:col) and left out; the other definitions still work.
func agentRegistry(io *IOStreams) (*agentcli.Registry, error) {
	reg, _, err := agentRegistryProblems(io)
	return reg, err
}

// agentRegistryProblems is agentRegistry, also returning the load problems
// of user files (already reported on stderr).
func agentRegistryProblems(io *IOStreams) (*agentcli.Registry, error, error) {
	home, err := config.Home(io.Getenv)
	if err != nil {
		return nil, nil, err
	}
	reg, problems := agentcli.Load(agentsDir(home))
	if reg == nil {
		return nil, nil, problems
	}
	if problems != nil {
		fmt.Fprintf(io.ErrOut, "warning: agent definitions left out:\n%s\n", problems)
	}
	return reg, problems, nil
}

// agentsDir holds the user's agent definitions.
func agentsDir(home string) string { return filepath.Join(home, "agents") }

func newAgentsCmd(io *IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Agent CLIs Maestro can drive (Claude Code, Codex, Gemini CLI, OpenCode, Qwen Code, your own)",
		Long: `Agent CLIs are described by YAML definitions: the built-in ones, plus any
~/.maestro/agents/*.yaml (or *.yml) you write (see docs/agent-clis.md).
'maestro run --agent ID' runs a task on one of them.`,
		Example: `  maestro agents list
  maestro agents show claude-code
  maestro run --agent claude-code "fix the failing test"`,
	}
	cmd.AddCommand(newAgentsListCmd(io), newAgentsShowCmd(io), newAgentsParseCmd(io))
	return cmd
}

// agentInfo is one agent of maestro agents list --json / show --json.
type agentInfo struct {
	agentcli.Info
	// SlashCommands (show only) and why there are none.
	SlashCommands *agentcli.SlashCommands `json:"slash_commands,omitempty"`
	SlashProblem  string                  `json:"slash_commands_problem,omitempty"`
}

// describeAgent describes def; a binary found whose version probe failed
// is reported on stderr, as agents list reports it.
func describeAgent(cmd *cobra.Command, io *IOStreams, def *agentcli.Definition) agentInfo {
	infos, dets := agentcli.DescribeAll(cmd.Context(), []*agentcli.Definition{def}, io.Getenv("PATH"))
	warnProbes(io, dets)
	return agentInfo{Info: infos[0]}
}

// warnProbes says which binaries were found but did not tell their
// version, and why (one that hangs did not answer in time).
func warnProbes(io *IOStreams, dets []agentcli.Detection) {
	for _, det := range dets {
		if det.Path != "" && det.Err != nil {
			fmt.Fprintf(io.ErrOut, "warning: %s: version unknown: %v\n", det.ID, det.Err)
		}
	}
}

// agentsListed is maestro agents list --json: the agents, and the user
// files left out with their faults.
type agentsListed struct {
	Agents  []agentInfo `json:"agents"`
	Invalid []string    `json:"invalid"`
}

func newAgentsListCmd(io *IOStreams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List agent CLIs: detected binary, version and capabilities",
		Long: `Lists every agent CLI definition: built-in, user file (~/.maestro/agents/*.yaml)
or override (a user file replacing a built-in). An invalid user file is
reported with its line and column and left out; the others are listed.
Each binary is looked up on PATH (or at the absolute path its definition
gives); "not found" names the binary that is missing, "unusable" one that
is there but cannot be run (not executable, a directory), and its version is
what the binary reports. The binaries are asked at the same time; "?" is one
whose version probe failed or did not answer within 5 s, and a warning on
stderr says which and why.`,
		Example: `  maestro agents list
  maestro agents list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, problems, err := agentRegistryProblems(io)
			if err != nil {
				return failErr(err)
			}
			infos, dets := agentcli.DescribeAll(cmd.Context(), reg.All(), io.Getenv("PATH"))
			defer warnProbes(io, dets)
			if asJSON {
				out := agentsListed{Agents: []agentInfo{}, Invalid: []string{}}
				for _, info := range infos {
					out.Agents = append(out.Agents, agentInfo{Info: info})
				}
				if problems != nil {
					out.Invalid = strings.Split(problems.Error(), "\n")
				}
				return printJSON(io, out)
			}
			w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tVERSION\tPATH\tCAPABILITIES")
			for i, def := range reg.All() {
				version, path := infos[i].Version, infos[i].Path
				if path == "" {
					version, path = "-", notFound(infos[i])
				} else if version == "" {
					version = "?"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", def.ID, version, path, strings.Join(capabilityNames(def.Capabilities), ","))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: display name, source, binary, version and every capability flag")
	return cmd
}

func newAgentsShowCmd(io *IOStreams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one agent CLI: source, binary, parser, every capability and its slash commands",
		Long: `Shows one agent CLI definition and its slash commands, read where the CLI
publishes them: OpenCode's resolved configuration (opencode debug config),
Claude Code's init event (the list its last run through Maestro published).
The version and slash-command probes run at the same time, each bounded by
5 s: one that does not answer is reported as such.`,
		Example: `  maestro agents show claude-code
  maestro agents show opencode --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			reg, err := agentRegistry(io)
			if err != nil {
				return failErr(err)
			}
			def, ok := reg.Get(args[0])
			if !ok {
				return usageErr("%q: unknown agent (known: %s)", args[0], strings.Join(reg.IDs(), ", "))
			}
			home, err := config.Home(io.Getenv)
			if err != nil {
				return failErr(err)
			}
			// The slash-command probe runs beside the version probe: each
			// is bounded by agentcli.ProbeTimeout, together too.
			bin, _ := def.Resolve(io.Getenv("PATH"))
			var sc agentcli.SlashCommands
			slashDone := make(chan error, 1)
			go func() {
				var err error
				sc, err = agentcli.ReadSlashCommands(cmd.Context(), def, bin, agentcli.SlashCommandsDir(agentsDir(home)), probeEnv(io))
				slashDone <- err
			}()
			info := describeAgent(cmd, io, def)
			if err := <-slashDone; err != nil {
				info.SlashProblem = err.Error()
			} else {
				info.SlashCommands = &sc
			}
			if asJSON {
				return printJSON(io, info)
			}
			printAgent(io, info)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// probeEnv is the environment a CLI probe runs with: the process's, with
// HOME and PATH as io sees them.
func probeEnv(io *IOStreams) []string {
	env := os.Environ()
	for _, k := range []string{"HOME", "PATH"} {
		if v := io.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func printAgent(io *IOStreams, info agentInfo) {
	w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	src := info.Source
	if info.File != "" {
		src += " (" + info.File + ")"
	}
	path, version := info.Path, info.Version
	if path == "" {
		path, version = notFound(info.Info), "-"
	}
	fmt.Fprintf(w, "id\t%s\nname\t%s\nsource\t%s\nbinary\t%s\nversion\t%s\nparser\t%s\nsession storage\t%s\n",
		info.ID, info.Name, src, path, version, info.Parser, info.SessionStorage)
	var on, off []string
	for name, v := range info.Capabilities {
		if v {
			on = append(on, name)
		} else {
			off = append(off, name)
		}
	}
	slices.Sort(on)
	slices.Sort(off)
	fmt.Fprintf(w, "capabilities\t%s\nwithout\t%s\n", strings.Join(on, ", "), strings.Join(off, ", "))
	if info.SlashCommands != nil {
		list := strings.Join(prefixed("/", info.SlashCommands.Commands), " ")
		if list == "" {
			list = "none" // a blank looked like a fault
		}
		fmt.Fprintf(w, "slash commands\t%s\n\t(from %s)\n", list, info.SlashCommands.Source)
	} else {
		fmt.Fprintf(w, "slash commands\t-\t%s\n", info.SlashProblem)
	}
	_ = w.Flush()
}

func prefixed(p string, list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = p + s
	}
	return out
}

// capabilityNames lists the true capabilities by short name (the table of
// maestro agents list; --json has every flag by its YAML name).
func capabilityNames(c agentcli.Capabilities) []string {
	pairs := []struct {
		name string
		on   bool
	}{
		{"resume", c.Resume}, {"read_only", c.ReadOnlyMode}, {"json", c.JSONOutput}, {"images", c.ImageInput},
		{"sessions", c.SessionStorage}, {"cost", c.CostTracking}, {"usage", c.UsageStats}, {"model", c.ModelSelection},
		{"thinking", c.ThinkingDisplay}, {"extra_dirs", c.AdditionalDirectories}, {"system_prompt", c.AppendSystemPrompt},
	}
	var out []string
	for _, p := range pairs {
		if p.on {
			out = append(out, p.name)
		}
	}
	return out
}

func newAgentsParseCmd(io *IOStreams) *cobra.Command {
	var agent string
	var raw bool
	cmd := &cobra.Command{
		Use:   "parse --agent ID < stream.jsonl",
		Short: "Parse an agent CLI's raw stdout stream from stdin into Maestro events (JSON lines)",
		Long: `Reads a CLI's raw stream (e.g. claude --output-format stream-json) on stdin and
prints the headless-protocol events Maestro derives from it, one JSON object per
line, followed by a summary line {"type":"parse_summary",…} with the session id,
final result, classified error and counters. For debugging adapters.`,
		Example: `  claude -p --verbose --output-format stream-json "hi" | maestro agents parse --agent claude-code`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, err := agentRegistry(io)
			if err != nil {
				return failErr(err)
			}
			def, ok := reg.Get(agent)
			if !ok {
				return usageErr("--agent %q: unknown agent (known: %s)", agent, strings.Join(reg.IDs(), ", "))
			}
			p, err := agentcli.NewParser(def.Parser, agentcli.DefinitionParserOptions(def))
			if err != nil {
				return failErr(err)
			}
			var firstErr *agentcli.AgentError
			for ev, err := range agentcli.Parse(io.In, p) {
				if err != nil {
					return failErr(err)
				}
				if ev.Error != nil && firstErr == nil {
					firstErr = ev.Error
				}
				for _, m := range ev.Messages {
					if err := protocol.Encode(io.Out, m); err != nil {
						return failErr(err)
					}
				}
				if raw && ev.Raw != nil && len(ev.Messages) == 0 {
					fmt.Fprintf(io.ErrOut, "unmapped: %s\n", ev.Raw)
				}
			}
			summary := parseSummary{SessionID: p.SessionID(), Result: p.Result(), Stats: p.Stats()}
			if firstErr != nil {
				summary.ErrorCategory, summary.ErrorMessage = string(firstErr.Category), firstErr.Message
			}
			return protocol.Encode(io.Out, summary)
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent id whose parser to use (see maestro agents list)")
	cmd.Flags().BoolVar(&raw, "show-unmapped", false, "print lines that map to no event on stderr")
	_ = cmd.MarkFlagRequired("agent")
	return cmd
}

// parseSummary closes the output of maestro agents parse.
type parseSummary struct {
	SessionID     string           `json:"session_id"`
	Result        *agentcli.Result `json:"result"`
	ErrorCategory string           `json:"error_category,omitempty"`
	ErrorMessage  string           `json:"error_message,omitempty"`
	Stats         agentcli.Stats   `json:"stats"`
}

// MessageType names the summary line.
func (parseSummary) MessageType() string { return "parse_summary" }

// notFound is the PATH column of a CLI with no usable binary: the file
// that is there but cannot be run, or the binary looked for.
func notFound(info agentcli.Info) string {
	if info.Unusable != "" {
		return "unusable (" + info.Unusable + ")"
	}
	return "not found (" + info.Binary + ")"
}
