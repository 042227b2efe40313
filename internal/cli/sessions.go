package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/agentcli"
)

func newSessionsCmd(io *IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List and read the sessions agent CLIs (Claude Code, Codex, …) stored on disk",
		Long: `Agent CLIs keep their own conversation history: Claude Code in
~/.claude/projects, Codex in ~/.codex/sessions, Gemini CLI in ~/.gemini/tmp,
OpenCode in ~/.local/share/opencode/opencode.db, Qwen Code in ~/.qwen/projects.
These commands read them (never write) so you can find a session to resume
with maestro run --agent X --resume ID. HOME and the CLIs' own overrides
(CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME, XDG_DATA_HOME, QWEN_HOME)
are honoured.`,
	}
	cmd.AddCommand(newSessionsListCmd(io), newSessionsShowCmd(io))
	return cmd
}

// sessionStore resolves --agent to its definition's session reader.
func sessionStore(io *IOStreams, agent string) (*agentcli.Definition, agentcli.SessionStore, error) {
	reg, err := agentRegistry(io)
	if err != nil {
		return nil, nil, failErr(err)
	}
	def, ok := reg.Get(agent)
	if !ok {
		return nil, nil, usageErr("--agent %q: unknown agent (known: %s)", agent, strings.Join(reg.IDs(), ", "))
	}
	if def.SessionStorage == "" || def.SessionStorage == "none" {
		return nil, nil, failErr(fmt.Errorf("--agent %s: its definition (%s) has session_storage: none, so Maestro cannot read its sessions", def.ID, def.Source))
	}
	store, err := agentcli.NewSessionStore(def.SessionStorage, io.Getenv)
	if err != nil {
		return nil, nil, failErr(fmt.Errorf("--agent %s: %w", def.ID, err))
	}
	return def, store, nil
}

func newSessionsListCmd(io *IOStreams) *cobra.Command {
	var agent, dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list --agent ID [--cwd DIR]",
		Short: "List an agent CLI's sessions for a project directory, newest first",
		Long: `Lists the sessions an agent CLI stored for a project directory (default: the
current directory): id, last update, message count (user and assistant
messages), model, and the title or first prompt. With --json, prints one JSON
array of {id, title, first_prompt, dir, created, updated, message_count,
model, path}; an empty result is [] (the text form fails and says where it
looked).`,
		Example: `  maestro sessions list --agent claude-code
  maestro sessions list --agent opencode --cwd ~/src/app --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			def, store, err := sessionStore(io, agent)
			if err != nil {
				return err
			}
			if dir == "" {
				if dir, err = os.Getwd(); err != nil {
					return failErr(err)
				}
			}
			list, err := store.List(cmd.Context(), dir)
			if err != nil {
				return failErr(err)
			}
			if asJSON {
				if list == nil {
					list = []agentcli.SessionInfo{}
				}
				enc := json.NewEncoder(io.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			if len(list) == 0 {
				return failErr(fmt.Errorf("no %s sessions for %s (looked in %s)", def.ID, dir, strings.Join(store.Locations(dir), ", ")))
			}
			w := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tUPDATED\tMSGS\tMODEL\tTITLE")
			for _, s := range list {
				model := s.Model
				if model == "" {
					model = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", s.ID, formatTime(s.Updated), s.MessageCount, model, truncate(s.Label(), 60))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent id (see maestro agents list)")
	cmd.Flags().StringVar(&dir, "cwd", "", "project directory (default: the current directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	_ = cmd.MarkFlagRequired("agent")
	return cmd
}

func newSessionsShowCmd(io *IOStreams) *cobra.Command {
	var agent string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show --agent ID SESSION_ID",
		Short: "Print one stored session's transcript",
		Long: `Prints the transcript of one session an agent CLI stored, whatever its project:
user and assistant messages, tool calls and their results, injected context
(shortened). With --json, prints {session, messages, stats}: messages have
role (user, assistant, tool, system), time, text, thinking, model,
tool_calls [{id, name, input}] and tool_results [{id, name, output,
is_error}]; stats count the records read and the unknown, malformed and
cut-short ones skipped.`,
		Example: `  maestro sessions show --agent codex 01a209d7-4d52-7bd2-9387-0f1ec59fe6d5
  maestro sessions show --agent opencode ses_df629a3acffeKwLVx7zPcqC3yt --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, store, err := sessionStore(io, agent)
			if err != nil {
				return err
			}
			tr, err := store.Read(cmd.Context(), args[0])
			if errors.Is(err, agentcli.ErrSessionNotFound) {
				return failErr(fmt.Errorf("%w; list them with maestro sessions list --agent %s --cwd DIR", err, agent))
			}
			if err != nil {
				return failErr(err)
			}
			if asJSON {
				enc := json.NewEncoder(io.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(tr)
			}
			printTranscript(io, tr)
			return nil
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent id (see maestro agents list)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	_ = cmd.MarkFlagRequired("agent")
	return cmd
}

func printTranscript(io *IOStreams, tr *agentcli.Transcript) {
	s := tr.Session
	fmt.Fprintf(io.Out, "session  %s\n", s.ID)
	if s.Title != "" {
		fmt.Fprintf(io.Out, "title    %s\n", s.Title)
	}
	fmt.Fprintf(io.Out, "dir      %s\ncreated  %s\nupdated  %s\n", s.Dir, formatTime(s.Created), formatTime(s.Updated))
	if s.Model != "" {
		fmt.Fprintf(io.Out, "model    %s\n", s.Model)
	}
	fmt.Fprintf(io.Out, "messages %d\npath     %s\n", s.MessageCount, s.Path)
	if st := tr.Stats; st.Unknown+st.Malformed+st.Partial > 0 {
		fmt.Fprintf(io.Out, "skipped  %d unknown, %d malformed, %d cut-short records\n", st.Unknown, st.Malformed, st.Partial)
	}
	for _, m := range tr.Messages {
		fmt.Fprintf(io.Out, "\n[%s] %s", formatTime(m.Time), m.Role)
		if m.Model != "" {
			fmt.Fprintf(io.Out, " (%s)", m.Model)
		}
		fmt.Fprintln(io.Out)
		if m.Role == agentcli.RoleSystem {
			fmt.Fprintf(io.Out, "  %s\n", truncate(strings.Join(strings.Fields(m.Text), " "), 100))
			continue
		}
		if m.Thinking != "" {
			fmt.Fprintf(io.Out, "  (thinking) %s\n", indentText(m.Thinking))
		}
		if m.Text != "" {
			fmt.Fprintf(io.Out, "  %s\n", indentText(m.Text))
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(io.Out, "  → %s %s  [%s]\n", c.Name, truncate(string(c.Input), 200), c.ID)
		}
		for _, r := range m.ToolResults {
			mark := "←"
			if r.IsError {
				mark = "← error"
			}
			fmt.Fprintf(io.Out, "  %s %s [%s]\n    %s\n", mark, r.Name, r.ID, strings.ReplaceAll(truncate(strings.TrimRight(r.Output, "\n"), 2000), "\n", "\n    "))
		}
	}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func indentText(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }
