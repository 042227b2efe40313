package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/store"
)

// defaultServer is where `maestro serve` listens by default.
const defaultServer = "http://127.0.0.1:7878"

// apiClient talks to a `maestro serve` API.
type apiClient struct {
	base  string
	token string
	// hc serves short calls (bounded); stream serves event streams (no
	// overall timeout, bounded dial and header wait).
	hc, stream *http.Client
}

func newAPIClient(server, token string) (*apiClient, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("--server: expected an http:// or https:// URL such as %s, found %q", defaultServer, server)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	return &apiClient{
		base:   strings.TrimRight(server, "/"),
		token:  token,
		hc:     &http.Client{Transport: tr, Timeout: 5 * time.Minute},
		stream: &http.Client{Transport: tr},
	}, nil
}

// apiError is an error answer of the API.
type apiError struct {
	Status int
	Body   struct {
		Error  string `json:"error"`
		Field  string `json:"field"`
		Errors []struct {
			Line    int    `json:"line"`
			Col     int    `json:"col"`
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
	}
}

func (e *apiError) Error() string {
	var b strings.Builder
	msg := e.Body.Error
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	fmt.Fprintf(&b, "server answered %d: %s", e.Status, msg)
	for _, pe := range e.Body.Errors {
		fmt.Fprintf(&b, "\n  %d:%d: %s: %s", pe.Line, pe.Col, pe.Field, pe.Message)
	}
	if e.Status == http.StatusUnauthorized {
		b.WriteString(" (pass --token or set MAESTRO_API_TOKEN)")
	}
	return b.String()
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (c *apiClient) do(ctx context.Context, method, path string, body io.Reader, ctype string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (is `maestro serve` running there? see --server)", method, c.base+path, unwrapURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{Status: resp.StatusCode}
		json.Unmarshal(data, &ae.Body)
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
		}
	}
	return nil
}

func unwrapURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

func (c *apiClient) doJSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(data), "application/json"
	}
	return c.do(ctx, method, path, body, ctype, out)
}

type taskDetail struct {
	Task     store.Task      `json:"task"`
	Jobs     []store.Job     `json:"jobs"`
	Comments []store.Comment `json:"comments"`
}

func (c *apiClient) task(ctx context.Context, id int64) (taskDetail, error) {
	var d taskDetail
	err := c.doJSON(ctx, "GET", "/api/v1/tasks/"+strconv.FormatInt(id, 10), nil, &d)
	return d, err
}

// latestJob returns the id of a task's latest job.
func (c *apiClient) latestJob(ctx context.Context, taskID int64) (int64, error) {
	d, err := c.task(ctx, taskID)
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

func (o *taskOptions) client(io *IOStreams) (*apiClient, error) {
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
	return newAPIClient(server, token)
}

func parseTaskID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, usageErr("expected a task id (a positive number, as `maestro tasks list` shows), found %q", s)
	}
	return id, nil
}

func newTasksCmd(io *IOStreams) *cobra.Command {
	o := &taskOptions{}
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

The server is --server, else $MAESTRO_SERVER, else ` + defaultServer + `; the token is
--token, else $MAESTRO_API_TOKEN (needed when the server requires one).`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.server, "server", "", "API base URL (default $MAESTRO_SERVER or "+defaultServer+")")
	pf.StringVar(&o.token, "token", "", "bearer token (default $MAESTRO_API_TOKEN)")
	pf.BoolVar(&o.json, "json", false, "print the server's JSON answer instead of text")
	cmd.AddCommand(newTasksSubmitCmd(io, o), newTasksListCmd(io, o), newTasksShowCmd(io, o), newTasksLogsCmd(io, o),
		newTasksCommentCmd(io, o), newTasksJobActionCmd(io, o, "cancel"), newTasksJobActionCmd(io, o, "retry"))
	return cmd
}

func printJSON(io *IOStreams, v any) error {
	enc := json.NewEncoder(io.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTasksSubmitCmd(io *IOStreams, o *taskOptions) *cobra.Command {
	var (
		body, piece, profile, taskClass, payload string
		files                                    []string
		priority, maxAttempts                    int
		follow                                   bool
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
			req := map[string]any{"title": args[0]}
			for k, v := range map[string]string{"body": body, "piece": piece, "profile": profile, "task_class": taskClass} {
				if v != "" {
					req[k] = v
				}
			}
			if priority != 0 {
				req["priority"] = priority
			}
			if maxAttempts != 0 {
				req["max_attempts"] = maxAttempts
			}
			if payload != "" {
				if !json.Valid([]byte(payload)) {
					return usageErr("--payload: expected a JSON object, found %q", payload)
				}
				req["payload"] = json.RawMessage(payload)
			}
			seen := map[string]string{}
			for _, f := range files {
				if st, err := os.Stat(f); err != nil || !st.Mode().IsRegular() {
					return usageErr("--file %s: expected a readable file", f)
				}
				if prev, dup := seen[filepath.Base(f)]; dup {
					return usageErr("--file %s and --file %s would both be input/%s: rename one", prev, f, filepath.Base(f))
				}
				seen[filepath.Base(f)] = f
			}
			var created struct {
				Task  store.Task `json:"task"`
				Job   store.Job  `json:"job"`
				Files []struct {
					Path string `json:"path"`
					Size int64  `json:"size"`
				} `json:"files,omitempty"`
			}
			if len(files) == 0 {
				err = c.doJSON(ctx, "POST", "/api/v1/tasks", req, &created)
			} else {
				// One request carries the task and its files, so the job
				// cannot start before they are in input/.
				err = c.createWithFiles(ctx, req, files, &created)
			}
			if err != nil {
				return failErr(err)
			}
			if o.json {
				printJSON(io, created)
			} else {
				fmt.Fprintf(io.Out, "task %d created (job %d, %s)\n", created.Task.ID, created.Job.ID, created.Job.State)
				for _, f := range created.Files {
					fmt.Fprintf(io.Out, "  input/%s (%d bytes)\n", f.Path, f.Size)
				}
			}
			if follow {
				return c.followJob(ctx, io, created.Job.ID, 0, o.json)
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
	f.IntVar(&maxAttempts, "max-attempts", 0, "attempts before the job fails (default 3)")
	f.StringVar(&payload, "payload", "", "job payload as a JSON object")
	f.StringArrayVar(&files, "file", nil, "upload a file to the task's input/ (repeatable)")
	f.BoolVarP(&follow, "follow", "f", false, "follow the job's events until it finishes")
	return cmd
}

// createWithFiles creates a task with files: POST /api/v1/tasks as
// multipart/form-data, the task's JSON in the "task" part, then one
// "file" part per file (named by its base name), streamed from disk.
func (c *apiClient) createWithFiles(ctx context.Context, task map[string]any, files []string, out any) error {
	data, err := json.Marshal(task)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeTaskParts(mw, data, files))
	}()
	err = c.do(ctx, "POST", "/api/v1/tasks", pr, mw.FormDataContentType(), out)
	pr.CloseWithError(io.ErrClosedPipe) // stops the writer if the request ended early
	return err
}

// writeTaskParts writes the multipart body of createWithFiles.
func writeTaskParts(mw *multipart.Writer, task []byte, files []string) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="task"`)
	h.Set("Content-Type", "application/json")
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(task); err != nil {
		return err
	}
	for _, name := range files {
		if err := writeFilePart(mw, name); err != nil {
			return err
		}
	}
	return mw.Close()
}

func writeFilePart(mw *multipart.Writer, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("--file %s: %w", name, err)
	}
	defer f.Close()
	w, err := mw.CreateFormFile("file", filepath.Base(name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("--file %s: %w", name, err)
	}
	return nil
}

func newTasksListCmd(io *IOStreams, o *taskOptions) *cobra.Command {
	var limit int
	var owner string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client(io)
			if err != nil {
				return err
			}
			q := url.Values{}
			q.Set("limit", strconv.Itoa(limit))
			if owner != "" {
				q.Set("owner", owner)
			}
			var out struct {
				Tasks      []store.Task `json:"tasks"`
				NextBefore int64        `json:"next_before,omitempty"`
			}
			if err := c.doJSON(cmd.Context(), "GET", "/api/v1/tasks?"+q.Encode(), nil, &out); err != nil {
				return failErr(err)
			}
			if o.json {
				return printJSON(io, out)
			}
			tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tPIECE\tCREATED\tTITLE")
			for _, t := range out.Tasks {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", t.ID, orDash(string(t.JobState)), orDash(t.Piece), t.CreatedAt.Local().Format("2006-01-02 15:04"), firstLine(t.Title, 60))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many tasks (at most 1000)")
	cmd.Flags().StringVar(&owner, "owner", "", "only tasks of this owner")
	return cmd
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
		Short: "Show a task: its jobs, their states and results, and the comment thread",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTaskID(args[0])
			if err != nil {
				return err
			}
			c, err := o.client(io)
			if err != nil {
				return err
			}
			d, err := c.task(cmd.Context(), id)
			if err != nil {
				return failErr(err)
			}
			if o.json {
				return printJSON(io, d)
			}
			t := d.Task
			fmt.Fprintf(io.Out, "task %d: %s\n", t.ID, t.Title)
			fmt.Fprintf(io.Out, "  owner %s, piece %s, created %s\n", orDash(t.Owner), orDash(t.Piece), t.CreatedAt.Local().Format(time.RFC3339))
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
				if j.Result != "" {
					fmt.Fprintf(io.Out, "    result:\n%s\n", indentLines(j.Result, "      "))
				}
				if j.Error != "" {
					fmt.Fprintf(io.Out, "    error: %s\n", j.Error)
				}
				if j.State == store.StateWaitingHuman {
					fmt.Fprintf(io.Out, "    waiting for your answer: maestro tasks comment %d \"…\"\n", t.ID)
				}
			}
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
		},
	}
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
		Long: `Print the event log of the task's latest job: status changes, movements, tool
calls, comments. -f keeps following over Server-Sent Events until the job
finishes; if the connection drops it reconnects and resumes after the last
event received (Last-Event-ID), so nothing is missed or repeated.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTaskID(args[0])
			if err != nil {
				return err
			}
			c, err := o.client(io)
			if err != nil {
				return err
			}
			jobID, err := c.latestJob(cmd.Context(), id)
			if err != nil {
				return failErr(err)
			}
			if follow {
				return c.followJob(cmd.Context(), io, jobID, after, o.json)
			}
			for {
				var page struct {
					Events    []store.JobEvent `json:"events"`
					NextAfter int64            `json:"next_after"`
				}
				path := fmt.Sprintf("/api/v1/jobs/%d/events?after=%d", jobID, after)
				if err := c.doJSON(cmd.Context(), "GET", path, nil, &page); err != nil {
					return failErr(err)
				}
				for _, e := range page.Events {
					printEvent(io, e, o.json)
				}
				if page.NextAfter == 0 {
					return nil
				}
				after = page.NextAfter
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow new events until the job finishes")
	cmd.Flags().Int64Var(&after, "after", 0, "start after this event number")
	return cmd
}

// printEvent prints one job event: a line of text, or its JSON.
func printEvent(io *IOStreams, e store.JobEvent, asJSON bool) {
	if asJSON {
		data, _ := json.Marshal(e)
		fmt.Fprintf(io.Out, "%s\n", data)
		return
	}
	ts := e.CreatedAt.Local().Format("15:04:05")
	switch e.Type {
	case store.EventTypeStatus:
		var s store.StatusEvent
		json.Unmarshal(e.Data, &s)
		line := fmt.Sprintf("%s #%d status %s", ts, e.Seq, s.State)
		if s.Attempt > 0 {
			line += fmt.Sprintf(" (attempt %d)", s.Attempt)
		}
		if s.Reason != "" {
			line += " " + s.Reason
		}
		if s.Error != "" {
			line += ": " + s.Error
		}
		fmt.Fprintln(io.Out, line)
	case "comment":
		var c struct {
			AuthorKind string `json:"author_kind"`
			Author     string `json:"author"`
			Body       string `json:"body"`
		}
		json.Unmarshal(e.Data, &c)
		fmt.Fprintf(io.Out, "%s #%d comment from %s: %s\n", ts, e.Seq, c.AuthorKind, firstLine(c.Body, 200))
	case "protocol":
		// The job's first protocol event says what drives its model
		// turns: a replay job is badged as one.
		var ready struct {
			Type         string `json:"type"`
			Provider     string `json:"provider"`
			Model        string `json:"model"`
			ExecutorType string `json:"executor_type"`
		}
		if json.Unmarshal(e.Data, &ready) == nil && ready.Type == "ready" {
			if ready.ExecutorType == "replay" {
				fmt.Fprintf(io.Out, "%s #%d ▶ REPLAY scripted model turns (%s/%s), tools run for real\n", ts, e.Seq, ready.Provider, ready.Model)
			} else {
				fmt.Fprintf(io.Out, "%s #%d model %s/%s\n", ts, e.Seq, ready.Provider, ready.Model)
			}
			return
		}
		printRawEvent(io, ts, e)
	default:
		printRawEvent(io, ts, e)
	}
}

// printRawEvent prints an event as its type, its inner kind and its data.
func printRawEvent(io *IOStreams, ts string, e store.JobEvent) {
	label, body := e.Type, e.Data
	// Engine run events ({"kind", "data"}) and agent protocol messages
	// ({"type", …}) are labelled by their own kind.
	var inner struct {
		Kind string          `json:"kind"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(e.Data, &inner) == nil {
		switch {
		case inner.Kind != "":
			label += " " + inner.Kind
			if len(inner.Data) > 0 {
				body = inner.Data
			}
		case inner.Type != "":
			label += " " + inner.Type
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, body) != nil {
		buf.Reset()
		buf.Write(body)
	}
	data := buf.String()
	if len(data) > 300 {
		data = data[:300] + "…"
	}
	fmt.Fprintf(io.Out, "%s #%d %s %s\n", ts, e.Seq, label, data)
}

// followJob prints the job's events after `after` as they come, over SSE,
// until the server sends `event: end`. A dropped connection is resumed
// with Last-Event-ID after a growing pause; ten failures in a row give up.
func (c *apiClient) followJob(ctx context.Context, io *IOStreams, jobID, after int64, asJSON bool) error {
	failures := 0
	for {
		ended, got, err := c.streamOnce(ctx, io, jobID, &after, asJSON)
		if ended {
			return c.reportEnd(ctx, io, jobID, asJSON)
		}
		if ctx.Err() != nil {
			return &exitError{ExitInterrupted, ctx.Err()}
		}
		if ae, ok := errors.AsType[*apiError](err); ok && ae.Status < 500 {
			return failErr(err)
		}
		if got {
			failures = 0
		}
		failures++
		if failures > 10 {
			return failErr(fmt.Errorf("following job %d: giving up after 10 failed connections: %v", jobID, err))
		}
		pause := time.Duration(min(failures, 5)) * time.Second
		if err != nil {
			fmt.Fprintf(io.ErrOut, "connection lost (%v); resuming after event %d in %s\n", err, after, pause)
		}
		select {
		case <-ctx.Done():
			return &exitError{ExitInterrupted, ctx.Err()}
		case <-time.After(pause):
		}
	}
}

// reportEnd prints how the job ended and fails the command when it did
// not succeed.
func (c *apiClient) reportEnd(ctx context.Context, io *IOStreams, jobID int64, asJSON bool) error {
	var out struct {
		Job store.Job `json:"job"`
	}
	if err := c.doJSON(ctx, "GET", "/api/v1/jobs/"+strconv.FormatInt(jobID, 10), nil, &out); err != nil {
		return failErr(err)
	}
	j := out.Job
	if !asJSON {
		fmt.Fprintf(io.ErrOut, "job %d %s\n", j.ID, j.State)
		if j.Result != "" {
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

// streamOnce reads one SSE connection. It reports whether the stream
// ended with `event: end`, whether any event arrived, and why it stopped
// otherwise.
func (c *apiClient) streamOnce(ctx context.Context, ios *IOStreams, jobID int64, after *int64, asJSON bool) (ended, got bool, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/jobs/%d/events", c.base, jobID), nil)
	if err != nil {
		return false, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return false, false, unwrapURL(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		ae := &apiError{Status: resp.StatusCode}
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ae.Body)
		return false, false, ae
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var event, data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return false, got, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			switch event {
			case "":
			case "end":
				return true, got, nil
			case "error":
				fmt.Fprintf(ios.ErrOut, "server: %s\n", data)
			default:
				var e store.JobEvent
				if json.Unmarshal([]byte(data), &e) == nil && e.Seq > *after {
					printEvent(ios, e, asJSON)
					*after = e.Seq
					got = true
					if e.Type == store.EventTypeStatus && !asJSON {
						var s store.StatusEvent
						json.Unmarshal(e.Data, &s)
						if s.State == store.StateWaitingHuman {
							fmt.Fprintf(ios.ErrOut, "the job waits for an answer: maestro tasks comment <task id> \"…\"\n")
						}
					}
				}
			}
			event, data = "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
}

func newTasksCommentCmd(io *IOStreams, o *taskOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "comment ID TEXT",
		Short: "Comment on a task; a job waiting for an answer resumes with it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTaskID(args[0])
			if err != nil {
				return err
			}
			c, err := o.client(io)
			if err != nil {
				return err
			}
			var out struct {
				Comment     store.Comment `json:"comment"`
				ResumedJobs []store.Job   `json:"resumed_jobs"`
			}
			if err := c.doJSON(cmd.Context(), "POST", "/api/v1/tasks/"+strconv.FormatInt(id, 10)+"/comments", map[string]string{"body": args[1]}, &out); err != nil {
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
		},
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
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTaskID(args[0])
			if err != nil {
				return err
			}
			c, err := o.client(io)
			if err != nil {
				return err
			}
			jobID, err := c.latestJob(cmd.Context(), id)
			if err != nil {
				return failErr(err)
			}
			body := map[string]any{}
			if reason != "" {
				body["reason"] = reason
			}
			if extra > 0 {
				body["extra"] = extra
			}
			var out struct {
				Job store.Job `json:"job"`
			}
			if err := c.doJSON(cmd.Context(), "POST", fmt.Sprintf("/api/v1/jobs/%d/%s", jobID, action), body, &out); err != nil {
				return failErr(err)
			}
			if o.json {
				return printJSON(io, out)
			}
			fmt.Fprintf(io.Out, "job %d of task %d is %s\n", out.Job.ID, id, out.Job.State)
			return nil
		},
	}
	if action == "cancel" {
		cmd.Flags().StringVar(&reason, "reason", "", "why (shown on the job)")
	} else {
		cmd.Flags().IntVar(&extra, "extra", 1, "attempts to add")
	}
	return cmd
}
