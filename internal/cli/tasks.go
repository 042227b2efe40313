package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/api/client"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/workspace"
)

// defaultServer is where `maestro serve` listens by default.
const defaultServer = "http://127.0.0.1:7878"

// latestJob returns the id of a task's latest job.
func latestJob(ctx context.Context, c *client.Client, taskID int64) (int64, error) {
	d, err := c.Task(ctx, taskID)
	if err != nil {
		return 0, err
	}
	if d.Task.JobID == 0 {
		return 0, failErr(fmt.Errorf("task %d has no job", taskID))
	}
	return d.Task.JobID, nil
}

// taskOptions are the flags every `tasks` subcommand shares.
type taskOptions struct {
	server, token string
	json          bool
}

func (o *taskOptions) client(io *IOStreams) (*client.Client, error) {
	server, token := o.server, o.token
	if server == "" && io.Getenv != nil {
		server = io.Getenv("MAESTRO_SERVER")
	}
	if server == "" {
		server = defaultServer
	}
	if token == "" && io.Getenv != nil {
		token = io.Getenv("MAESTRO_API_TOKEN")
	}
	c, err := client.New(server, token)
	if err != nil {
		return nil, usageErr("--server: %v (such as %s)", err, defaultServer)
	}
	c.AuthHint = "pass --token or set MAESTRO_API_TOKEN"
	if token != "" {
		// The token was sent: asking for it again would not help.
		c.AuthHint = "the server refused the token given by --token or MAESTRO_API_TOKEN: pass the token the server was started with"
	}
	return c, nil
}

// onTask is the RunE of a subcommand whose first argument is a task id:
// run gets the id and the client.
func (o *taskOptions) onTask(io *IOStreams, run func(cmd *cobra.Command, args []string, id int64, c *client.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		id, err := parseTaskID(args[0])
		if err != nil {
			return err
		}
		c, err := o.client(io)
		if err != nil {
			return err
		}
		return run(cmd, args, id, c)
	}
}

func parseTaskID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, usageErr("expected a task id (a positive whole number, as `maestro tasks list` shows), found %q: too large for a task id", s)
	}
	if err != nil || id <= 0 {
		return 0, badTaskID(s)
	}
	return id, nil
}

func badTaskID(s string) error {
	return usageErr("expected a task id (a positive whole number, as `maestro tasks list` shows), found %q", s)
}

func newTasksCmd(io *IOStreams) *cobra.Command {
	o := &taskOptions{}
	// What the server sends is shown, its control characters included,
	// never obeyed (termSafe).
	safe := *io
	safe.Out, safe.ErrOut = termSafe(io.Out, outColor(io)), termSafe(io.ErrOut, false)
	io = &safe
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Submit and follow tasks on a `maestro serve` server",
		Long: `Client of a running 'maestro serve' (docs/api.md). A task is a unit of work; the
server's workers run it as a job with a piece, and you follow its events, answer
its questions with comments, cancel or retry it.

  maestro tasks submit "summarise the report" --file report.pdf -f
  maestro tasks list
  maestro tasks logs 12 -f          # follow until the job finishes
  maestro tasks comment 12 "use the main branch"   # answers a waiting job
  maestro tasks download 12         # its deliverables (output/) into ./task-12/

The server is --server, else $MAESTRO_SERVER, else ` + defaultServer + `; the token is
--token, else $MAESTRO_API_TOKEN (needed when the server requires one).`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.server, "server", "", "API base URL (default $MAESTRO_SERVER or "+defaultServer+")")
	pf.StringVar(&o.token, "token", "", "bearer token (default $MAESTRO_API_TOKEN)")
	pf.BoolVar(&o.json, "json", false, "print the server's JSON answer instead of text (logs, and submit -f: one JSON object per line)")
	cmd.AddCommand(newTasksSubmitCmd(io, o), newTasksListCmd(io, o), newTasksShowCmd(io, o), newTasksLogsCmd(io, o),
		newTasksCommentCmd(io, o), newTasksJobActionCmd(io, o, "cancel"), newTasksJobActionCmd(io, o, "retry"),
		newTasksDownloadCmd(io, o))
	for _, sub := range cmd.Commands() {
		sub.RunE = interruptible(sub.RunE)
		if f := strings.Fields(sub.Use); len(f) > 1 && f[1] == "ID" {
			sub.Annotations = map[string]string{firstArgAnnotation: "task id"}
		}
	}
	return cmd
}

// interruptible runs a `tasks` subcommand on a context that SIGINT, SIGTERM
// and SIGHUP cancel, and exits 130 when one did. Left to the signal's
// default, Ctrl-C killed the process mid-write: a download left its
// temporary file behind, and -f never said how it stopped.
func interruptible(run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		parent := cmd.Context()
		if parent == nil {
			parent = context.Background()
		}
		ctx, stop := untilSignalled(parent)
		defer stop()
		cmd.SetContext(ctx)
		err := run(cmd, args)
		if err != nil && ctx.Err() != nil && parent.Err() == nil {
			if e, ok := errors.AsType[*exitError](err); !ok || e.code != ExitInterrupted {
				err = &exitError{ExitInterrupted, fmt.Errorf("interrupted: %w", err)}
			}
		}
		return err
	}
}

func printJSON(io *IOStreams, v any) error {
	enc := json.NewEncoder(io.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTasksSubmitCmd(io *IOStreams, o *taskOptions) *cobra.Command {
	var (
		body, piece, profile, taskClass, payload, executor, agent string
		files                                                     []string
		priority, maxAttempts                                     int
		follow                                                    bool
	)
	cmd := &cobra.Command{
		Use:   "submit TITLE",
		Short: "Create a task (its job is queued at once) and print its id",
		Long: `Create a task. Its first job is queued at once; the server's workers pick it up.
--file sends files with the task, in the same request: they are in the task's
input/ directory before its job starts (the piece reads them from there).
--body - reads the body from standard input.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("max-attempts") && (maxAttempts < 1 || maxAttempts > 100) {
				// 0 was sent as "not given" and became 3 without a word.
				return usageErr("--max-attempts %d: expected 1-100", maxAttempts)
			}
			c, err := o.client(io)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if body == "-" {
				data, err := readAllLimited(io.In, store.MaxBodyBytes)
				if err != nil {
					return failErr(fmt.Errorf("--body -: %w", err))
				}
				body = string(data)
			}
			req := api.CreateTaskRequest{Title: args[0], Body: body, Piece: piece, Profile: profile,
				TaskClass: taskClass, Priority: priority, MaxAttempts: maxAttempts, Executor: executor, Agent: agent}
			if payload != "" {
				if !json.Valid([]byte(payload)) || !strings.HasPrefix(strings.TrimSpace(payload), "{") {
					return usageErr("--payload: expected a JSON object, found %q", payload)
				}
				req.Payload = json.RawMessage(payload)
			}
			seen := map[string]string{}
			for _, f := range files {
				switch st, err := os.Stat(f); {
				case err == nil && st.IsDir():
					return usageErr("--file %s: a directory; --file takes a file (one --file per file)", f)
				case err != nil || !st.Mode().IsRegular():
					return usageErr("--file %s: expected a readable file", f)
				}
				if prev, dup := seen[filepath.Base(f)]; dup {
					return usageErr("--file %s and --file %s would both be input/%s: rename one", prev, f, filepath.Base(f))
				}
				seen[filepath.Base(f)] = f
			}
			var created api.CreateTaskResponse
			if len(files) == 0 {
				created, err = c.CreateTask(ctx, req)
			} else {
				// One request carries the task and its files, so the job
				// cannot start before they are in input/.
				created, err = c.CreateTaskWithFiles(ctx, req, files)
			}
			if err != nil {
				return failErr(err)
			}
			switch {
			case o.json && follow:
				// One line, as the events that follow it: the output
				// is JSON Lines a script reads line by line.
				json.NewEncoder(io.Out).Encode(created)
			case o.json:
				printJSON(io, created)
			default:
				fmt.Fprintf(io.Out, "task %d created (job %d, %s)\n", created.Task.ID, created.Job.ID, created.Job.State)
				for _, f := range created.Files {
					fmt.Fprintf(io.Out, "  input/%s (%d bytes)\n", f.Path, f.Size)
				}
			}
			if follow {
				return followJob(ctx, c, io, newJobLog(io, o.json), created.Task.ID, created.Job.ID, 0)
			}
			if !o.json {
				fmt.Fprintf(io.ErrOut, "follow it with: maestro tasks logs %d -f\n", created.Task.ID)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&body, "body", "", "the task's description (- reads standard input)")
	f.StringVar(&piece, "piece", "", "run this piece (default: the classifier chooses)")
	f.StringVar(&profile, "profile", "", "only workers serving this profile run it")
	f.StringVar(&taskClass, "task-class", "", "only workers serving this task class run it")
	f.IntVar(&priority, "priority", 0, "higher runs first")
	f.IntVar(&maxAttempts, "max-attempts", 0, "attempts before the job fails, 1-100 (default 3)")
	f.StringVar(&payload, "payload", "", "job payload as a JSON object")
	f.StringArrayVar(&files, "file", nil, "upload a file to the task's input/ (repeatable)")
	f.StringVar(&executor, "executor", "", "what runs it: "+strings.Join(api.Executors(), ", ")+" (default: the server's)")
	f.StringVar(&agent, "agent", "", "with --executor agent-cli: the agent CLI (maestro agents list)")
	f.BoolVarP(&follow, "follow", "f", false, "follow the job's events until it finishes")
	return cmd
}

func newTasksListCmd(io *IOStreams, o *taskOptions) *cobra.Command {
	var limit int
	var before int64
	var tq client.TaskQuery
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Long: `List tasks, newest first: --limit of them (20 by default). When more match,
the next page's command is printed on standard error (--before the last id
shown, with the same filters); with --json the answer's next_before is that id.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usageErr("--limit %d: expected 1-1000", limit)
			}
			if before < 0 {
				return usageErr("--before %d: expected a task id (a positive whole number)", before)
			}
			c, err := o.client(io)
			if err != nil {
				return err
			}
			out, err := c.FindTasks(cmd.Context(), tq, client.Page{Limit: limit, Before: before})
			if err != nil {
				return failErr(err)
			}
			if o.json {
				return printJSON(io, out)
			}
			defer func() {
				if out.NextBefore != 0 {
					fmt.Fprintf(io.ErrOut, "more tasks: %s\n", nextListCommand(cmd, out.NextBefore))
				}
			}()
			if len(out.Tasks) == 0 {
				// A bare header read as a listing that failed.
				if tq.Owner == "" && tq.State == "" && tq.Search == "" && before == 0 {
					fmt.Fprintln(io.ErrOut, `no tasks yet; submit one with maestro tasks submit "…"`)
				} else {
					fmt.Fprintln(io.ErrOut, "no task matches the filters given (--owner, --state, --search, --before)")
				}
				return nil
			}
			tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tPIECE\tRUNS ON\tCOST\tCREATED\tTITLE")
			for _, t := range out.Tasks {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, orDash(string(t.JobState)), orDash(cmp.Or(t.Piece, t.JobPiece)),
					orDash(cmp.Or(t.JobAgent, t.JobModel)), taskCost(t), t.CreatedAt.Local().Format("2006-01-02 15:04"), firstLine(t.Title, 60))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many tasks (1-1000)")
	cmd.Flags().Int64Var(&before, "before", 0, "only tasks older than this id (the next page: the last id shown)")
	cmd.Flags().StringVar(&tq.Owner, "owner", "", "only tasks of this owner")
	cmd.Flags().StringVar(&tq.State, "state", "", "only tasks whose latest job is in one of these states (comma-separated, e.g. queued,running)")
	cmd.Flags().StringVar(&tq.Search, "search", "", "only tasks whose title or body contains this text (ignoring case), or whose id it is")
	return cmd
}

// nextListCommand is the `tasks list` that shows the page after this
// one: the flags given (never --token), with --before set to next.
func nextListCommand(cmd *cobra.Command, next int64) string {
	args := []string{cmd.CommandPath()}
	for _, name := range []string{"server", "owner", "state", "search", "limit"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			args = append(args, "--"+name, shellQuote(f.Value.String()))
		}
	}
	return strings.Join(append(args, "--before", strconv.FormatInt(next, 10)), " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newTasksShowCmd(io *IOStreams, o *taskOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a task: its jobs, their states and results, its deliverables and the comment thread",
		Args:  cobra.ExactArgs(1),
		RunE: o.onTask(io, func(cmd *cobra.Command, args []string, id int64, c *client.Client) error {
			d, err := c.Task(cmd.Context(), id)
			if err != nil {
				return failErr(err)
			}
			if o.json {
				return printJSON(io, d)
			}
			t := d.Task
			fmt.Fprintf(io.Out, "task %d: %s\n", t.ID, t.Title)
			fmt.Fprintf(io.Out, "  owner %s, piece %s, created %s\n", orDash(t.Owner), orDash(cmp.Or(t.Piece, t.JobPiece)), t.CreatedAt.Local().Format(time.RFC3339))
			if t.Body != "" {
				fmt.Fprintf(io.Out, "\n%s\n", indentLines(t.Body, "  "))
			}
			fmt.Fprintln(io.Out, "\njobs:")
			for _, j := range d.Jobs {
				fmt.Fprintf(io.Out, "  job %d: %s (attempt %d/%d)", j.ID, j.State, j.Attempt, j.MaxAttempts)
				if j.Movement != "" {
					fmt.Fprintf(io.Out, ", movement %s", j.Movement)
				}
				fmt.Fprintln(io.Out)
				if req := jobRequirements(j); req != "" {
					fmt.Fprintf(io.Out, "    %s\n", req)
				}
				if held := jobHolder(j, time.Now()); held != "" {
					fmt.Fprintf(io.Out, "    %s\n", held)
				}
				if j.State == store.StateQueued && j.ScheduledAt.After(time.Now()) {
					fmt.Fprintf(io.Out, "    next attempt at %s (the retry backoff)\n", j.ScheduledAt.Local().Format(time.RFC3339))
				}
				if j.Result != "" {
					fmt.Fprintf(io.Out, "    result:\n%s\n", indentLines(j.Result, "      "))
				}
				switch {
				case j.Error == "":
				case j.State.Terminal():
					fmt.Fprintf(io.Out, "    error: %s\n", j.Error)
				default:
					// The job goes on: the error ended an earlier attempt.
					fmt.Fprintf(io.Out, "    earlier attempt: %s\n", j.Error)
				}
				if j.State == store.StateWaitingHuman {
					fmt.Fprintf(io.Out, "    waiting for your answer: maestro tasks comment %d \"…\"\n", t.ID)
				}
			}
			printDeliverables(cmd.Context(), io, c, t.ID)
			if len(d.Comments) > 0 {
				fmt.Fprintln(io.Out, "\ncomments:")
				for _, cm := range d.Comments {
					who := cm.AuthorKind
					if cm.Author != "" {
						who += " " + cm.Author
					}
					fmt.Fprintf(io.Out, "  [%s] %s:\n%s\n", cm.CreatedAt.Local().Format("2006-01-02 15:04"), who, indentLines(cm.Body, "    "))
				}
			}
			return nil
		}),
	}
}

// jobHolder says which worker slot holds a dispatching or running job
// and when it last heartbeated the job; when it has missed its beats (a
// worker killed, its machine gone, or the database out of its reach),
// that it may be gone and what happens to the job when its lease expires.
// `tasks show` said only "running (attempt 1/3)" until then. The slot
// heartbeats every lease/3 (queue.Pool), and each heartbeat sets the
// lease to expire a lease later, so the interval is read off the job.
func jobHolder(j store.Job, now time.Time) string {
	if (j.State != store.StateRunning && j.State != store.StateDispatching) || j.LeaseOwner == "" {
		return ""
	}
	held := "held by worker " + j.LeaseOwner
	if j.HeartbeatAt.IsZero() {
		return held
	}
	age := max(now.Sub(j.HeartbeatAt), 0).Round(time.Second)
	every := j.LeaseExpiresAt.Sub(j.HeartbeatAt) / 3
	if every <= 0 || age <= 2*every {
		return fmt.Sprintf("%s, seen %s ago", held, age)
	}
	then := "goes back to the queue (this attempt counted)"
	if j.Attempt >= j.MaxAttempts {
		then = "fails (this was its last attempt)"
	}
	at := j.LeaseExpiresAt.Local().Format(time.RFC3339)
	if left := j.LeaseExpiresAt.Sub(now); left > 0 {
		return fmt.Sprintf("%s, not seen for %s (it heartbeats every %s): it may be gone; if so the job %s when its lease expires at %s (in %s)",
			held, age, every.Round(time.Second), then, at, left.Round(time.Second))
	}
	return fmt.Sprintf("%s, not seen for %s (it heartbeats every %s): its lease expired at %s, so the job %s at the reaper's next pass",
		held, age, every.Round(time.Second), at, then)
}

// jobRequirements says what decides where and when a job runs, when it
// was asked for: only workers serving its profile or task class claim it
// (one no worker serves stays queued), and higher priorities go first.
func jobRequirements(j store.Job) string {
	var parts []string
	if j.Profile != "" {
		parts = append(parts, "profile "+j.Profile)
	}
	if j.TaskClass != "" {
		parts = append(parts, "task class "+j.TaskClass)
	}
	s := ""
	if len(parts) > 0 {
		s = "only workers serving " + strings.Join(parts, " and ") + " run it"
	}
	if j.Priority != 0 {
		s = strings.TrimPrefix(s+fmt.Sprintf(", priority %d", j.Priority), ", ")
	}
	return s
}

func indentLines(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

func newTasksLogsCmd(io *IOStreams, o *taskOptions) *cobra.Command {
	var follow bool
	var after int64
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print the events of a task's latest job (-f follows until it finishes)",
		Long: `Print the event log of the task's latest job, rendered as 'maestro run' renders
a run: the job's status changes and comments (time-stamped, with their event
number), the ▶ REPLAY badge of a scripted job, each movement as a header, the
assistant's text, thinking (dimmed), one line per tool call with its outcome,
transitions, the run's result and a usage line when the job finishes.
-f keeps following over Server-Sent Events until the job finishes, printing the
assistant's text as it streams; if the connection drops it reconnects and
resumes after the last event received (Last-Event-ID), so nothing is missed or
repeated. --json prints every event as one line of JSON, exactly as the API
returns it. Colours only on a terminal, and never with NO_COLOR set.`,
		Args: cobra.ExactArgs(1),
		RunE: o.onTask(io, func(cmd *cobra.Command, args []string, id int64, c *client.Client) error {
			if after < 0 {
				return usageErr("--after %d: expected an event number, 0 or more", after)
			}
			jobID, err := latestJob(cmd.Context(), c, id)
			if err != nil {
				return failErr(err)
			}
			log := newJobLog(io, o.json)
			if follow {
				return followJob(cmd.Context(), c, io, log, id, jobID, after)
			}
			for {
				page, err := c.JobEvents(cmd.Context(), jobID, after, 0)
				if err != nil {
					log.close()
					return failErr(err)
				}
				for _, e := range page.Events {
					log.add(e.Raw, e.JobEvent)
				}
				if page.NextAfter == 0 {
					log.close()
					switch {
					case o.json || page.State.Terminal() || page.State == "":
					case page.State == store.StateWaitingHuman:
						// Following would only wait: the job waits for the user.
						fmt.Fprintf(io.ErrOut, "job %d waits for your answer: maestro tasks comment %d \"…\"\n", jobID, id)
					default:
						fmt.Fprintf(io.ErrOut, "job %d is %s; follow it with: maestro tasks logs %d -f\n", jobID, page.State, id)
					}
					return nil
				}
				after = page.NextAfter
			}
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow new events until the job finishes")
	cmd.Flags().Int64Var(&after, "after", 0, "start after this event number")
	return cmd
}

// followJob prints the job's events after `after` as they come, over SSE,
// until the server ends the stream (client.FollowJob resumes a dropped
// connection with Last-Event-ID), then how the job ended.
func followJob(ctx context.Context, c *client.Client, io *IOStreams, log *jobLog, taskID, jobID, after int64) error {
	_, err := c.FollowJob(ctx, jobID, after, client.FollowOptions{
		Event: func(e client.Event) {
			log.add(e.Raw, e.JobEvent)
			if e.Type == store.JobEventStatus && !log.asJSON {
				var s store.StatusEvent
				json.Unmarshal(e.Data, &s)
				if s.State == store.StateWaitingHuman {
					fmt.Fprintf(io.ErrOut, "the job waits for an answer: maestro tasks comment %d \"…\"\n", taskID)
				}
			}
		},
		StreamError: func(e api.Error) {
			log.close()
			fmt.Fprintf(io.ErrOut, "server: %s\n", e.Error)
		},
		Reconnect: func(err error, after int64, pause time.Duration) {
			fmt.Fprintf(io.ErrOut, "connection lost (%v); resuming after event %d in %s\n", err, after, pause)
		},
	})
	log.close()
	switch {
	case ctx.Err() != nil:
		return &exitError{ExitInterrupted, fmt.Errorf("interrupted; job %d goes on on the server: maestro tasks logs %d -f follows it again", jobID, taskID)}
	case err != nil:
		return failErr(err)
	}
	return reportEnd(ctx, c, io, log, jobID)
}

// reportEnd prints how the job ended (and its result, unless the log
// showed it already) and fails the command when it did not succeed.
func reportEnd(ctx context.Context, c *client.Client, io *IOStreams, log *jobLog, jobID int64) error {
	j, err := c.Job(ctx, jobID)
	if err != nil {
		return failErr(err)
	}
	if !log.asJSON {
		fmt.Fprintf(io.ErrOut, "job %d %s\n", j.ID, j.State)
		if j.Result != "" && strings.TrimRight(j.Result, "\n") != strings.TrimRight(log.result, "\n") {
			fmt.Fprintln(io.Out, j.Result)
		}
	}
	if j.State != store.StateSucceeded {
		msg := fmt.Sprintf("job %d ended %s", j.ID, j.State)
		if j.Error != "" {
			msg += ": " + j.Error
		}
		return failErr(errors.New(msg))
	}
	return nil
}

func newTasksCommentCmd(io *IOStreams, o *taskOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "comment ID TEXT",
		Short: "Comment on a task; a job waiting for an answer resumes with it",
		Args:  cobra.ExactArgs(2),
		RunE: o.onTask(io, func(cmd *cobra.Command, args []string, id int64, c *client.Client) error {
			out, err := c.Comment(cmd.Context(), id, args[1])
			if err != nil {
				return failErr(err)
			}
			if o.json {
				return printJSON(io, out)
			}
			fmt.Fprintf(io.Out, "comment %d added to task %d\n", out.Comment.ID, id)
			for _, j := range out.ResumedJobs {
				fmt.Fprintf(io.Out, "job %d resumed (%s)\n", j.ID, j.State)
			}
			return nil
		}),
	}
}

// newTasksJobActionCmd builds `tasks cancel` and `tasks retry`, which act
// on the task's latest job.
func newTasksJobActionCmd(io *IOStreams, o *taskOptions, action string) *cobra.Command {
	var reason string
	var extra int
	short := "Cancel the task's running or queued job"
	if action == "retry" {
		short = "Queue the task's failed, aborted or cancelled job again"
	}
	cmd := &cobra.Command{
		Use:   action + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: o.onTask(io, func(cmd *cobra.Command, args []string, id int64, c *client.Client) error {
			if action == "retry" && (extra < 1 || extra > store.MaxAttemptsLimit) {
				return usageErr("--extra %d: expected 1-%d", extra, store.MaxAttemptsLimit)
			}
			jobID, err := latestJob(cmd.Context(), c, id)
			if err != nil {
				return failErr(err)
			}
			var out api.JobResponse
			if action == "cancel" {
				out.Job, err = c.CancelJob(cmd.Context(), jobID, reason)
			} else {
				out.Job, err = c.RetryJob(cmd.Context(), jobID, extra)
			}
			if err != nil {
				return failErr(err)
			}
			if o.json {
				return printJSON(io, out)
			}
			fmt.Fprintf(io.Out, "job %d of task %d is %s\n", out.Job.ID, id, out.Job.State)
			return nil
		}),
	}
	if action == "cancel" {
		cmd.Flags().StringVar(&reason, "reason", "", "why (shown on the job)")
	} else {
		cmd.Flags().IntVar(&extra, "extra", 1, "attempts to add, 1-100")
	}
	return cmd
}

// printDeliverables lists a task's deliverables for `tasks show`. The task
// itself was shown already, so a failure is a note, not an error.
func printDeliverables(ctx context.Context, io *IOStreams, c *client.Client, taskID int64) {
	list, err := c.Deliverables(ctx, taskID)
	files := list.Files
	switch {
	case err != nil:
		fmt.Fprintf(io.Out, "\ndeliverables: not available (%v)\n", err)
		return
	case len(files) == 0:
		fmt.Fprintln(io.Out, "\ndeliverables: none yet (output/ is empty)")
		return
	}
	var total int64
	width := 0
	for _, f := range files {
		total += f.Size
		width = max(width, len(humanSize(f.Size)))
	}
	fmt.Fprintln(io.Out, "\ndeliverables (output/):")
	for _, f := range files {
		fmt.Fprintf(io.Out, "  %*s  %s  %s\n", width, humanSize(f.Size), f.Modified.Local().Format("2006-01-02 15:04"), f.Path)
	}
	fmt.Fprintf(io.Out, "  %d file(s), %s · maestro tasks download %d\n", len(files), humanSize(total), taskID)
	if list.Truncated {
		fmt.Fprintln(io.Out, "  and more: the server's listing of output/ stopped at its limit")
	}
}

// humanSize writes a byte count for people: 512 B, 1.5 KiB, 3.0 MiB.
func humanSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// deliverablePath checks a deliverable path — from the server's list or
// the command line — before anything is written: relative, slash-separated,
// no "..", no backslash or NUL, naming a file. A hostile or broken server
// cannot make the download write outside its directory (the writes go
// through an os.Root as well, which also refuses symlink escapes).
func deliverablePath(p string) (string, error) {
	clean, broken := workspace.CheckSlashPath(p)
	if broken == "" && !filepath.IsLocal(filepath.FromSlash(clean)) {
		broken = "naming a file"
	}
	if broken != "" {
		return "", fmt.Errorf("deliverable path %q: expected a relative path inside output/, %s", p, broken)
	}
	return clean, nil
}

func newTasksDownloadCmd(ios *IOStreams, o *taskOptions) *cobra.Command {
	var outDir string
	var force bool
	cmd := &cobra.Command{
		Use:   "download ID [PATH…]",
		Short: "Download a task's deliverables (its output/ files) into ./task-ID/",
		Long: `Download the files a task's jobs wrote under output/ (see 'maestro tasks show').
With no PATH, every deliverable; a PATH names a file or a directory of output/.
Files keep their relative paths under -o DIR (default ./task-ID/). An existing
file is never overwritten unless --force is given: the download refuses before
writing anything. A path from the server that would leave DIR ("..", absolute,
a symlink out of DIR) is refused. Each file is written to a temporary name
and renamed when complete, so an interrupted download leaves no partial file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: o.onTask(ios, func(cmd *cobra.Command, args []string, id int64, c *client.Client) error {
			for _, a := range args[1:] {
				if _, err := deliverablePath(strings.TrimSuffix(a, "/")); err != nil {
					return usageErr("%v", err)
				}
			}
			ctx := cmd.Context()
			list, err := c.Deliverables(ctx, id)
			if err != nil {
				return failErr(err)
			}
			sel, err := selectDeliverables(list.Files, args[1:])
			if err != nil {
				return failErr(fmt.Errorf("task %d: %w", id, err))
			}
			if outDir == "" {
				outDir = fmt.Sprintf("task-%d", id)
			}
			if len(sel) == 0 {
				fmt.Fprintf(ios.ErrOut, "task %d has no deliverables yet (output/ is empty)\n", id)
				if o.json {
					// A script reading the answer gets one, with no file.
					printJSON(ios, downloaded{Dir: outDir, Files: []api.Deliverable{}})
				}
				return nil
			}
			written, err := download(ctx, c, id, sel, outDir, force)
			if o.json {
				printJSON(ios, downloaded{Dir: outDir, Files: append([]api.Deliverable{}, written...)})
			} else {
				var total int64
				for _, f := range written {
					total += f.Size
					fmt.Fprintf(ios.Out, "wrote %s (%s)\n", filepath.Join(outDir, filepath.FromSlash(f.Path)), humanSize(f.Size))
				}
				if err == nil {
					fmt.Fprintf(ios.Out, "%d file(s), %s in %s\n", len(written), humanSize(total), outDir)
				}
			}
			if err != nil {
				return failErr(err)
			}
			if list.Truncated {
				// Exit 0 would say the task's deliverables are here.
				return failErr(fmt.Errorf("task %d: incomplete: the server's listing of output/ stopped at its limits (entries, depth or length of paths), so only the %d file(s) it listed were fetched", id, len(list.Files)))
			}
			return nil
		}),
	}
	cmd.Flags().StringVarP(&outDir, "output", "o", "", "directory to write into (default ./task-ID/)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

// downloaded is what `tasks download --json` prints: the directory and
// the files written into it ([] when none).
type downloaded struct {
	Dir   string            `json:"dir"`
	Files []api.Deliverable `json:"files"`
}

// selectDeliverables checks every listed path and keeps those the
// arguments name (a file, or a directory and everything under it; all of
// them when there are no arguments).
func selectDeliverables(files []api.Deliverable, args []string) ([]api.Deliverable, error) {
	for i, f := range files {
		p, err := deliverablePath(f.Path)
		if err != nil {
			return nil, fmt.Errorf("the server listed a deliverable that cannot be written safely, refusing to download: %w", err)
		}
		files[i].Path = p
	}
	if len(args) == 0 {
		return files, nil
	}
	var sel []api.Deliverable
	seen := map[string]bool{}
	for _, a := range args {
		p, err := deliverablePath(strings.TrimSuffix(a, "/"))
		if err != nil {
			return nil, err
		}
		n := 0
		for _, f := range files {
			if f.Path == p || strings.HasPrefix(f.Path, p+"/") {
				n++
				if !seen[f.Path] {
					seen[f.Path] = true
					sel = append(sel, f)
				}
			}
		}
		if n == 0 && len(files) == 0 {
			return nil, fmt.Errorf("no deliverable %q: output/ is empty", a)
		}
		if n == 0 {
			names := make([]string, 0, len(files))
			for _, f := range files {
				names = append(names, f.Path)
			}
			return nil, fmt.Errorf("no deliverable %q (output/ holds: %s)", a, orDash(strings.Join(names, ", ")))
		}
	}
	return sel, nil
}

// download writes files into dir (created if needed) and returns what it
// wrote. Every conflict with an existing file is reported before anything
// is written.
func download(ctx context.Context, c *client.Client, taskID int64, files []api.Deliverable, dir string, force bool) ([]api.Deliverable, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("-o %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("-o %s: %w", dir, err)
	}
	defer root.Close()
	var exist []string
	for _, f := range files {
		name := filepath.FromSlash(f.Path)
		fi, err := root.Lstat(name)
		switch {
		case err == nil && fi.IsDir():
			return nil, fmt.Errorf("%s is a directory: cannot write the deliverable %s there", filepath.Join(dir, name), f.Path)
		case err == nil && !force:
			exist = append(exist, filepath.Join(dir, name))
		}
	}
	if len(exist) > 0 {
		return nil, fmt.Errorf("%s already exist(s); pass --force to overwrite, or -o another directory", strings.Join(exist, ", "))
	}
	var written []api.Deliverable
	for _, f := range files {
		n, err := downloadOne(ctx, c, root, taskID, f.Path)
		if err != nil {
			return written, fmt.Errorf("download %s: %w", f.Path, err)
		}
		written = append(written, api.Deliverable{Path: f.Path, Size: n, Modified: f.Modified})
	}
	return written, nil
}

// downloadOne fetches one deliverable into root: a temporary file beside
// the target, renamed over it once complete.
func downloadOne(ctx context.Context, c *client.Client, root *os.Root, taskID int64, p string) (int64, error) {
	// The destination first: a path the root refuses costs no request.
	name := filepath.FromSlash(p)
	if d := filepath.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".maestro-download")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := c.DownloadDeliverable(ctx, taskID, p, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return 0, err
	}
	return n, nil
}

// taskCost is the list's COST column: what the task's latest job cost so
// far, "-" before it started.
func taskCost(t store.Task) string {
	if t.JobExecutor == "" && t.JobCostUSD == 0 {
		return "-"
	}
	return fmt.Sprintf("$%.4f", t.JobCostUSD)
}
