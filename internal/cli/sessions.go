package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/oneline"
)

func newSessionsCmd(io *IOStreams) *cobra.Command {
	// A session's text (prompts, the model's answers, tool output) is
	// shown with its control characters as text, never obeyed (termSafe).
	safe := *io
	safe.Out, safe.ErrOut = termSafe(io.Out, false), termSafe(io.ErrOut, false)
	io = &safe
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List and read sessions: Maestro's own, or those agent CLIs (Claude Code, Codex, …) stored",
		Long: `Every maestro run (and every headless, serve or --agent session) is a session
of Maestro's own with an event log under ~/.maestro/sessions (MAESTRO_HOME).
'maestro sessions list' lists them, newest first: the shortest id prefix
'maestro run --resume' takes, when it started, the executor (replay, model,
agent CLI), its status and its first prompt; 'maestro sessions show ID' prints
one with its conversation. Ids start with their creation time, so sessions of
the same minute share their first characters: use the prefix the list shows.

With --agent ID, the commands read the sessions an agent CLI keeps itself
instead: Claude Code in ~/.claude/projects, Codex in ~/.codex/sessions,
Gemini CLI in ~/.gemini/tmp, OpenCode in ~/.local/share/opencode/opencode.db,
Qwen Code in ~/.qwen/projects. They are read, never written, so you can find
a session to resume with maestro run --agent X --resume ID. HOME and the
CLIs' own overrides (CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME,
XDG_DATA_HOME, QWEN_HOME) are honoured.`,
		Example: `  maestro sessions list
  maestro sessions show 01a2179e-a19
  maestro run --resume 01a2179e-a19 "now add a test for it"
  maestro sessions list --agent claude-code`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSessionsListCmd(io), newSessionsShowCmd(io))
	return cmd
}

// cliSessionID is the shape of an agent CLI's own session id (a UUID,
// OpenCode's ses_…), the only ids sessionOfAgent looks up.
var cliSessionID = regexp.MustCompile(`^[A-Za-z0-9_-]{8,}$`)

// sessionOfAgent names the agent CLI that stored the session id (its own
// id, as maestro sessions list --agent X prints it), "" when none did.
// Definitions that fail to load were reported elsewhere.
func sessionOfAgent(ctx context.Context, io *IOStreams, id string) string {
	if !cliSessionID.MatchString(id) {
		return ""
	}
	home, err := config.Home(io.Getenv)
	if err != nil {
		return ""
	}
	reg, _ := agentcli.Load(agentsDir(home))
	if reg == nil {
		return ""
	}
	for _, def := range reg.All() {
		if def.SessionStorage == "" || def.SessionStorage == "none" || !def.Capabilities.SessionStorage {
			continue
		}
		store, err := agentcli.NewSessionStore(def.SessionStorage, io.Getenv)
		if err != nil {
			continue
		}
		if _, err := store.Read(ctx, id); err == nil {
			return def.ID
		}
	}
	return ""
}

// noMaestroSession adds to "session not found: ID" (no Maestro session)
// how to go on: when an agent CLI stored a session of that id, the command
// that takes it (use, with %[1]s the agent and %[2]s the id), else how to
// list Maestro's sessions. An id copied from maestro sessions list --agent
// X was only ever "not found".
func noMaestroSession(ctx context.Context, io *IOStreams, err error, id, use string) error {
	if agent := sessionOfAgent(ctx, io, id); agent != "" {
		return fmt.Errorf("%w; it is %s's own session id: %s", err, agent, fmt.Sprintf(use, agent, id))
	}
	return fmt.Errorf("%w; list them with maestro sessions list", err)
}

// otherAgentSession adds to a run's session_not_found on --resume ID
// (the CLI does not know ID) the agent CLI whose own session id ID is,
// when another one stored it: a Claude Code id given to --agent codex
// failed with Codex's "no rollout found" alone.
func otherAgentSession(ctx context.Context, io *IOStreams, err error, id, agent string) error {
	var ae *agentcli.AgentError
	if id == "" || !errors.As(err, &ae) || ae.Category != agentcli.SessionNotFound {
		return err
	}
	if other := sessionOfAgent(ctx, io, id); other != "" && other != agent {
		var ee *exitError
		if errors.As(err, &ee) {
			return &exitError{ee.code, fmt.Errorf("%w; it is %s's own session id: maestro run --agent %s --resume %s \"…\"", ee.err, other, other, id)}
		}
	}
	return err
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
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--agent ID] [--cwd DIR]",
		Short: "List Maestro's sessions (or an agent CLI's with --agent), newest first",
		Long: `Without --agent, lists Maestro's own sessions, newest first (all of them, or
those of workspace --cwd DIR; --limit N keeps the N newest): the shortest id
prefix --resume takes, when the session started, the executor (replay and its
scenario, model provider/model, or agent CLI and its id; the agent CLIs a
piece's movements ran on when every one ran on a CLI), the status and the
first line of the first prompt. The status of a piece session is its latest
run's (piece: running, waiting_human, succeeded, aborted, failed, cancelled,
or interrupted: stopped mid-run, by Ctrl-C or its process's end, and
--resume restarts the movement); of a plain session, how its last turn
ended: answered, failed, interrupted, running (a process runs it now),
unfinished (stopped mid-turn) or empty. With --json, prints
one JSON array of {id, short_id, started, updated, workspace, executor
(replay, model or agent_cli), provider, model, replay, agent, agent_session,
agents (a piece's agent CLIs), status, reason, piece, first_prompt, log}; no
sessions is [].

With --agent ID, lists the sessions that agent CLI stored for a project
directory (default: the current directory): id, last update, message count
(user and assistant messages), model, and the title or first prompt. With
--json, prints one JSON array of {id, title, first_prompt, dir, created,
updated, message_count, model, path}; an empty result is [] (the text form
fails and says where it looked).`,
		Example: `  maestro sessions list
  maestro sessions list --cwd ~/src/app --json
  maestro sessions list --agent claude-code
  maestro sessions list --agent opencode --cwd ~/src/app --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageErr("--limit must not be negative")
			}
			if agent == "" {
				if dir != "" {
					abs, err := filepath.Abs(dir)
					if err != nil {
						return usageErr("--cwd %s: %v", dir, err)
					}
					dir = abs
				}
				return listMaestroSessions(io, dir, limit, asJSON)
			}
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
			if limit > 0 && len(list) > limit {
				list = list[:limit]
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
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", s.ID, formatTime(s.Updated), s.MessageCount, model, oneline.Truncate(s.Label(), 60))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "an agent CLI's own sessions (see maestro agents list) instead of Maestro's")
	cmd.Flags().StringVar(&dir, "cwd", "", "workspace or project directory (Maestro's sessions: all by default; --agent: the current directory)")
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many, the newest (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSessionsShowCmd(io *IOStreams) *cobra.Command {
	var agent string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show [--agent ID] SESSION_ID",
		Short: "Print one session with its conversation",
		Long: `Without --agent, prints one of Maestro's own sessions, named by its id or a
unique prefix of 8+ characters (an ambiguous prefix lists the sessions it
matches): the resume command, first prompt, workspace, start and last update,
executor, status (and the reason of a failed turn), then its conversation:
user and assistant messages, tool calls and their results. A compaction
summary (docs/compaction.md) is shown where the messages it replaced end,
before those it kept, marked "compaction". With --json, prints {session,
messages}: session as an entry of 'maestro sessions list --json', messages
as below, a summary with compaction {kept, tokens_before, tokens_after,
replaced}.

With --agent ID, prints the transcript of one session that agent CLI stored,
whatever its project: user and assistant messages, tool calls and their
results, injected context (shortened). With --json, prints {session,
messages, stats}: stats count the records read and the unknown, malformed
and cut-short ones skipped.

Messages have role (user, assistant, tool, system), time, text, thinking,
model, tool_calls [{id, name, input}] and tool_results [{id, name, output,
is_error}].`,
		Example: `  maestro sessions show 01a2179e-a19
  maestro sessions show 01a2179e-a191-7348-a57a-07ea3b44cf6f --json
  maestro sessions show --agent codex 01a209d7-4d52-7bd2-9387-0f1ec59fe6d5
  maestro sessions show --agent opencode ses_df629a3acffeKwLVx7zPcqC3yt --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" {
				return showMaestroSession(cmd.Context(), io, args[0], asJSON)
			}
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
	cmd.Flags().StringVar(&agent, "agent", "", "an agent CLI's own session (see maestro agents list) instead of Maestro's")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
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
	printMessages(io, tr.Messages)
}

// printMessages prints a transcript's messages.
func printMessages(io *IOStreams, msgs []agentcli.SessionMessage) {
	for _, m := range msgs {
		fmt.Fprintf(io.Out, "\n[%s] %s", formatTime(m.Time), m.Role)
		if m.Model != "" {
			fmt.Fprintf(io.Out, " (%s)", m.Model)
		}
		fmt.Fprintln(io.Out)
		if m.Role == agentcli.RoleSystem {
			fmt.Fprintf(io.Out, "  %s\n", oneline.Cut(m.Text, 100))
			continue
		}
		if m.Thinking != "" {
			fmt.Fprintf(io.Out, "  (thinking) %s\n", indentText(m.Thinking))
		}
		if m.Text != "" {
			fmt.Fprintf(io.Out, "  %s\n", indentText(m.Text))
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(io.Out, "  → %s %s  [%s]\n", c.Name, oneline.Truncate(string(c.Input), 200), c.ID)
		}
		for _, r := range m.ToolResults {
			mark := "←"
			if r.IsError {
				mark = "← error"
			}
			fmt.Fprintf(io.Out, "  %s %s [%s]\n    %s\n", mark, r.Name, r.ID, strings.ReplaceAll(oneline.Truncate(strings.TrimRight(r.Output, "\n"), 2000), "\n", "\n    "))
		}
	}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func indentText(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }
