package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/protocol"
)

// agentRegistry loads the built-in agent CLI definitions and the user's
// ~/.maestro/agents/*.yaml.
func agentRegistry(io *IOStreams) (*agentcli.Registry, error) {
	home, err := config.Home(io.Getenv)
	if err != nil {
		return nil, err
	}
	return agentcli.Load(filepath.Join(home, "agents"))
}

func newAgentsCmd(io *IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Agent CLIs Maestro can drive (Claude Code, Codex, Gemini CLI, OpenCode, Qwen Code, your own)",
		Long: `Agent CLIs are described by YAML definitions: the built-in ones, plus any
~/.maestro/agents/*.yaml you write (see docs/agent-clis.md).`,
	}
	cmd.AddCommand(newAgentsListCmd(io), newAgentsParseCmd(io))
	return cmd
}

func newAgentsListCmd(io *IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List agent CLIs: detected binary, version and capabilities",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, err := agentRegistry(io)
			if err != nil {
				return failErr(err)
			}
			w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tVERSION\tPATH\tCAPABILITIES")
			for _, def := range reg.All() {
				det := agentcli.Detect(cmd.Context(), def, io.Getenv("PATH"))
				version, path := det.Version, det.Path
				if path == "" {
					version, path = "-", "not found ("+def.Binary+")"
				} else if version == "" {
					version = "?"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", def.ID, version, path, strings.Join(capabilityNames(def.Capabilities), ","))
			}
			return w.Flush()
		},
	}
}

// capabilityNames lists the true capabilities by YAML name.
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
			p, err := agentcli.NewParser(def.Parser, agentcli.ParserOptions{Provider: def.ID, Classifier: agentcli.NewClassifier(def)})
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
