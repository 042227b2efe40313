package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/workspace"
)

// Task statuses a task_status answer gives: running, then one of the
// piece run's final statuses (succeeded, failed, aborted) or
// waiting_human (answer it with answer_question).
const (
	TaskRunning      = "running"
	TaskSucceeded    = "succeeded"
	TaskFailed       = "failed"
	TaskWaitingHuman = "waiting_human"
)

// PieceInfo is one piece list_pieces reports, or one piece file it
// ignored (Ignored set).
type PieceInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Source      string `json:"source,omitempty"`
	// Ignored says why the file Source is not in effect (invalid, or a
	// project piece the user has not trusted); empty for a piece that is.
	Ignored string `json:"ignored,omitempty"`
}

// ServerOptions configure Maestro as an MCP server (`maestro mcp`).
type ServerOptions struct {
	// Exe is Maestro's executable: each task is a `maestro run -o jsonl`
	// of it (a session of its own, the same rules as on the command line).
	Exe string
	// Env is the tasks' environment.
	Env []string
	// Dir is the default workspace of a task (the server's directory).
	Dir string
	// Workspace, when set, checks a workspace a client names and returns
	// the directory to use (serve's workspace policy); nil accepts any.
	Workspace func(dir string) (string, error)
	// Fresh, when set, gives a task that names no workspace a fresh
	// directory instead of Dir (serve).
	Fresh func() (string, error)
	// Pieces lists the pieces a task in workspace can run.
	Pieces func(ctx context.Context, workspace string) ([]PieceInfo, error)
	// MaxWait bounds how long run_task and answer_question wait for a task
	// before returning it still running (default 10 minutes).
	MaxWait time.Duration
	// TaskTimeout bounds one task's process (default 2 hours).
	TaskTimeout time.Duration
	Version     string
	Logger      *slog.Logger
}

// NewServer returns Maestro as an MCP server: the tools list_pieces,
// run_task, task_status, task_result and answer_question (docs/mcp.md).
// Tasks end with the context the server runs under (Close).
func NewServer(o ServerOptions) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 10 * time.Minute
	}
	if o.TaskTimeout <= 0 {
		o.TaskTimeout = 2 * time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Task ids carry a part of their own to each server: each began at
	// task-1, so a client whose server restarted (a reconnect, a second
	// instance) asking for an earlier task got the new one of that number.
	var idPart [4]byte
	_, _ = rand.Read(idPart[:])
	s := &Server{o: o, ctx: ctx, cancel: cancel, tasks: map[string]*task{}, idPrefix: "task-" + hex.EncodeToString(idPart[:]) + "-"}
	s.MCP = sdk.NewServer(&sdk.Implementation{Name: "maestro", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "Maestro runs coding and research tasks with its pieces (multi-step workflows). " +
			"Call list_pieces, then run_task; when a task waits for an answer, call answer_question.",
		Logger: o.Logger,
	})
	sdk.AddTool(s.MCP, &sdk.Tool{Name: "list_pieces", Description: "List the pieces (workflows) Maestro can run in a workspace.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, s.listPieces)
	sdk.AddTool(s.MCP, &sdk.Tool{Name: "run_task", Description: "Run a task with Maestro: a prompt, optionally a piece and a workspace directory. " +
		"Waits for the task (progress as notifications) unless wait is false; returns its id, status and result."}, s.runTask)
	sdk.AddTool(s.MCP, &sdk.Tool{Name: "task_status", Description: "The status of a task run_task started, with its latest progress.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, s.taskStatus)
	sdk.AddTool(s.MCP, &sdk.Tool{Name: "task_result", Description: "The result of a task that ended (or the question of one waiting for an answer).",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, s.taskStatus)
	sdk.AddTool(s.MCP, &sdk.Tool{Name: "answer_question", Description: "Answer the question of a task waiting for the user (status waiting_human); the task goes on."}, s.answer)
	return s
}

// Server is Maestro as an MCP server and its tasks.
type Server struct {
	MCP    *sdk.Server
	o      ServerOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	tasks map[string]*task
	next  int
	// idPrefix starts the ids of this server's tasks (task-<8 hex>-).
	idPrefix string
}

// Run serves t until the client goes away or ctx ends, then stops the
// tasks. It is the SDK's Server.Run without its logs: that logged an
// ERROR "server run cancelled" when ctx ended (Ctrl-C, SIGTERM from the
// client), and an error the caller reports again.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	defer s.Close()
	ss, err := s.MCP.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-ended
		return ctx.Err()
	case err := <-ended:
		return err
	}
}

// Close stops the running tasks and waits for them.
func (s *Server) Close() {
	s.cancel()
	s.wg.Wait()
}

type listIn struct {
	Workspace string `json:"workspace,omitempty" jsonschema:"the workspace directory (default: the server's directory)"`
}

type listOut struct {
	Pieces []PieceInfo `json:"pieces"`
	// Ignored are the piece files not in effect, and why.
	Ignored []PieceInfo `json:"ignored,omitempty"`
}

func (s *Server) listPieces(ctx context.Context, _ *sdk.CallToolRequest, in listIn) (*sdk.CallToolResult, listOut, error) {
	ws, err := s.workspace(in.Workspace, false)
	if err != nil {
		return nil, listOut{}, err
	}
	pieces, err := s.o.Pieces(ctx, ws)
	if err != nil {
		return nil, listOut{}, err
	}
	var out listOut
	for _, p := range pieces {
		if p.Ignored != "" {
			out.Ignored = append(out.Ignored, p)
		} else {
			out.Pieces = append(out.Pieces, p)
		}
	}
	return nil, out, nil
}

// workspace is the directory of a task (run: it runs there) or of a
// listing naming dir.
func (s *Server) workspace(dir string, run bool) (string, error) {
	switch {
	case dir == "" && run && s.o.Fresh != nil:
		return s.o.Fresh()
	case dir == "":
		return s.o.Dir, nil
	case s.o.Workspace != nil:
		return s.o.Workspace(dir)
	}
	at, from := dir, ""
	if !filepath.IsAbs(at) {
		at = filepath.Join(s.o.Dir, at)
		from = fmt.Sprintf(" (a relative path is taken from %s, the server's directory)", s.o.Dir)
	}
	if fi, err := os.Stat(at); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("workspace %q is not an existing directory%s", workspace.Excerpt(dir), from)
	}
	return dir, nil
}

// checkPiece refuses a piece the workspace does not have, with the names
// it has, before a task is started for it (the task would fail with
// maestro run's usage error, meant for a terminal). When the pieces
// cannot be listed the task decides.
func (s *Server) checkPiece(ctx context.Context, ws, name string) error {
	if name == "" || s.o.Pieces == nil {
		return nil
	}
	pieces, err := s.o.Pieces(ctx, ws)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(pieces))
	var ignored []string
	for _, p := range pieces {
		switch {
		case p.Ignored != "" && p.Name == name:
			ignored = append(ignored, p.Ignored)
		case p.Ignored != "":
		case p.Name == name:
			return nil
		default:
			names = append(names, p.Name)
		}
	}
	if len(ignored) > 0 {
		// Said as maestro run --piece says it: the file is there, and
		// why it does not count.
		return fmt.Errorf("piece %q is not in effect: its file is ignored:\n%s", workspace.Excerpt(name), strings.Join(ignored, "\n"))
	}
	return fmt.Errorf("unknown piece %q; this workspace has: %s (list_pieces describes them)", workspace.Excerpt(name), strings.Join(names, ", "))
}

type runIn struct {
	Prompt    string `json:"prompt" jsonschema:"the task"`
	Piece     string `json:"piece,omitempty" jsonschema:"the piece to run (default: Maestro picks one)"`
	Workspace string `json:"workspace,omitempty" jsonschema:"the workspace directory (default: the server's directory)"`
	Wait      *bool  `json:"wait,omitempty" jsonschema:"wait for the task to end or to ask a question (default true)"`
}

// TaskInfo is what run_task, task_status, task_result and answer_question
// answer.
type TaskInfo struct {
	TaskID    string `json:"task_id"`
	Status    string `json:"status"`
	SessionID string `json:"session_id,omitempty"`
	// Result is the task's result, or its question when it waits.
	Result string `json:"result,omitempty"`
	// Progress are the task's latest progress lines.
	Progress []string `json:"progress,omitempty"`
	Error    string   `json:"error,omitempty"`
}

func (s *Server) runTask(ctx context.Context, req *sdk.CallToolRequest, in runIn) (*sdk.CallToolResult, TaskInfo, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return nil, TaskInfo{}, errors.New("run_task: prompt is empty")
	}
	ws, err := s.workspace(in.Workspace, true)
	if err != nil {
		return nil, TaskInfo{}, fmt.Errorf("run_task: %w", err)
	}
	if err := s.checkPiece(ctx, ws, in.Piece); err != nil {
		return nil, TaskInfo{}, fmt.Errorf("run_task: %w", err)
	}
	args := []string{"run", "-o", "jsonl", "--workspace", ws}
	if in.Piece != "" {
		args = append(args, "--piece", in.Piece)
	}
	s.mu.Lock()
	s.next++
	t := &task{id: s.idPrefix + strconv.Itoa(s.next), status: TaskRunning}
	s.tasks[t.id] = t
	s.mu.Unlock()
	s.start(t, append(args, "--", in.Prompt))
	return s.await(ctx, req, t, in.Wait, 0)
}

type taskIn struct {
	TaskID string `json:"task_id"`
}

func (s *Server) taskStatus(_ context.Context, _ *sdk.CallToolRequest, in taskIn) (*sdk.CallToolResult, TaskInfo, error) {
	t, err := s.task(in.TaskID)
	if err != nil {
		return nil, TaskInfo{}, err
	}
	return nil, t.info(), nil
}

type answerIn struct {
	TaskID string `json:"task_id"`
	Answer string `json:"answer"`
	Wait   *bool  `json:"wait,omitempty" jsonschema:"wait for the task to end or to ask again (default true)"`
}

func (s *Server) answer(ctx context.Context, req *sdk.CallToolRequest, in answerIn) (*sdk.CallToolResult, TaskInfo, error) {
	t, err := s.task(in.TaskID)
	if err != nil {
		return nil, TaskInfo{}, err
	}
	if strings.TrimSpace(in.Answer) == "" {
		// Refused before the task is resumed: maestro run refuses an
		// empty task, which failed the task for good (its question
		// could no longer be answered).
		return nil, TaskInfo{}, errors.New("answer_question: answer is empty")
	}
	t.mu.Lock()
	status, sess, from := t.status, t.session, t.lines
	waiting := status == TaskWaitingHuman && sess != ""
	if waiting {
		t.status, t.result, t.errText = TaskRunning, "", ""
	}
	t.mu.Unlock()
	if !waiting {
		return nil, TaskInfo{}, fmt.Errorf("task %s is %s, not waiting for an answer", in.TaskID, status)
	}
	s.start(t, []string{"run", "-o", "jsonl", "--resume", sess, "--", in.Answer})
	return s.await(ctx, req, t, in.Wait, from)
}

func (s *Server) task(id string) (*task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("no task %q: this server did not start it (a server knows the tasks it started until it stops, "+
			"and stops them then; each task's run stays a session in 'maestro sessions list')", id)
	}
	return t, nil
}

// await waits for t to leave running (unless wait is false), sending its
// progress lines from the from-th on (counted as t.lines) to the client
// as progress notifications when the call carries a progress token.
func (s *Server) await(ctx context.Context, req *sdk.CallToolRequest, t *task, wait *bool, from int) (*sdk.CallToolResult, TaskInfo, error) {
	if wait != nil && !*wait {
		return nil, t.info(), nil
	}
	token := req.Params.GetProgressToken()
	timer := time.NewTimer(s.o.MaxWait)
	defer timer.Stop()
	sent := from // the lines sent so far, counted as t.lines
	for ended := false; ; {
		t.mu.Lock()
		done, changed := t.done, t.changed
		// The lines since the last sent that t still keeps (it keeps
		// the latest maxProgress).
		n := min(t.lines-sent, len(t.seen))
		lines, first := t.seen[len(t.seen)-n:], t.lines-n
		sent = t.lines
		t.mu.Unlock()
		if token != nil {
			for i, line := range lines {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Message: line, Progress: float64(first - from + i + 1)})
			}
		}
		if ended {
			return nil, t.info(), nil
		}
		select {
		case <-done:
			// Once more: the lines the run printed last are sent
			// before the answer (they were dropped).
			ended = true
		case <-changed:
		case <-timer.C:
			return nil, t.info(), nil // still running: poll task_status
		case <-ctx.Done():
			// The client cancelled the call (or went away): the run it
			// started or resumed is stopped. Left running, it went on
			// changing the workspace for up to TaskTimeout, a task the
			// client of a cancelled run_task never learned the id of.
			t.stop(done, "stopped: the client cancelled the call")
			return nil, TaskInfo{}, ctx.Err()
		}
	}
}

// task is one task: a `maestro run -o jsonl` process (and the resumes
// that answer its questions).
type task struct {
	id string

	mu      sync.Mutex
	status  string
	session string
	result  string
	errText string
	seen    []string      // the latest progress lines (maxProgress), in order
	lines   int           // the progress lines ever seen
	done    chan struct{} // closed when the current process ended
	changed chan struct{} // closed and replaced at each progress line
	// cancel stops the current process; stopped says why it was.
	cancel  context.CancelFunc
	stopped string
}

// stop stops t's process whose done channel is done, if it still runs,
// recording why (the task's error).
func (t *task) stop(done chan struct{}, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done != done || t.cancel == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	t.stopped = why
	t.cancel()
}

// stopGrace is how long a task's process has to end once interrupted
// before it is killed.
const stopGrace = 10 * time.Second

// maxProgress bounds the progress lines a task keeps.
const maxProgress = 1000

func (t *task) info() TaskInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	info := TaskInfo{TaskID: t.id, Status: t.status, SessionID: t.session, Result: t.result, Error: t.errText}
	info.Progress = slices.Clone(t.seen[max(0, len(t.seen)-20):])
	return info
}

// start runs Maestro with args for t and follows its frames.
func (s *Server) start(t *task, args []string) {
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(s.ctx, s.o.TaskTimeout)
	t.mu.Lock()
	t.done, t.changed, t.cancel, t.stopped = done, make(chan struct{}), cancel, ""
	t.mu.Unlock()
	cmd := exec.CommandContext(ctx, s.o.Exe, args...)
	cmd.Env, cmd.Dir = s.o.Env, s.o.Dir
	// Stopped (the client cancelled the call or went away, the server
	// stops, the task timed out), the run is interrupted as Ctrl-C
	// would: it stops its commands and records the interruption in its
	// session. Killed, it left them running (outside bwrap, which dies
	// with it), a command writing to the workspace minutes later.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = stopGrace
	// So is it when this server dies without stopping it (SIGKILL, the
	// OOM killer): it ran on, a quiet command to its end, until it next
	// wrote to its dead stdout. The signal follows the thread that starts
	// the child, and Maestro ends none of its threads (no goroutine exits
	// locked to one).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGINT}
	var stderr bytes.Buffer
	cmd.Stderr = &limited{b: &stderr, n: 64 << 10}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		cancel()
		t.finish(TaskFailed, "", fmt.Sprintf("start maestro run: %v", err))
		close(done)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer close(done)
		status, result := t.follow(out)
		werr := cmd.Wait()
		t.mu.Lock()
		stopped := t.stopped
		t.mu.Unlock()
		switch {
		case status != "":
			t.finish(status, result, "")
		case stopped != "":
			t.finish(TaskFailed, result, stopped)
		case werr != nil:
			t.finish(TaskFailed, result, runError(werr, stderr.String()))
		default:
			t.finish(TaskSucceeded, result, "")
		}
	}()
}

// runError is the error of a run that failed: maestro run's stderr, and
// its exit status unless it is 2 (a usage error: the run refused its
// arguments), said as a refusal without the hint for a terminal ("Run
// 'maestro run --help' for usage.") a client could do nothing with.
func runError(werr error, stderr string) string {
	msg := strings.TrimSpace(stderr)
	if exit, ok := errors.AsType[*exec.ExitError](werr); !ok || exit.ExitCode() != 2 || msg == "" {
		return strings.TrimSpace(fmt.Sprintf("maestro run: %v\n%s", werr, msg))
	}
	var lines []string
	for line := range strings.SplitSeq(msg, "\n") {
		if !strings.HasPrefix(line, "Run 'maestro ") || !strings.HasSuffix(line, " for usage.") {
			lines = append(lines, line)
		}
	}
	return "maestro run refused the task: " + strings.TrimPrefix(strings.Join(lines, "\n"), "maestro: ")
}

// follow reads a run's JSON lines: the session id, progress (status
// lines and tool calls), the final "Result (<status>): …" status line of
// a piece run, else the last answer text of a plain run.
func (t *task) follow(r io.Reader) (status, result string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	var answer strings.Builder
	for sc.Scan() {
		var f struct {
			Type      string `json:"type"`
			SessionID string `json:"session_id"`
			Message   string `json:"message"`
			Tool      string `json:"tool"`
			Content   string `json:"content"`
		}
		if json.Unmarshal(sc.Bytes(), &f) != nil {
			continue
		}
		line := ""
		switch f.Type {
		case "ready", "session_info":
			t.mu.Lock()
			if f.SessionID != "" {
				t.session = f.SessionID
			}
			t.mu.Unlock()
		case "status":
			if rest, ok := strings.CutPrefix(f.Message, "Result ("); ok {
				if st, res, ok := strings.Cut(rest, "): "); ok {
					status, result = st, res
					continue
				}
			}
			line = f.Message
		case "tool_call":
			line = "tool " + f.Tool
		case "response_start":
			answer.Reset()
		case "response_chunk":
			answer.WriteString(f.Content)
		case "error":
			line = "error: " + f.Message
		}
		if line != "" {
			t.progress(line)
		}
	}
	if status == "" {
		result = answer.String()
	}
	return status, result
}

func (t *task) progress(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen = append(t.seen, line)
	t.lines++
	if len(t.seen) > maxProgress {
		t.seen = t.seen[len(t.seen)-maxProgress:]
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *task) finish(status, result, errText string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status, t.result, t.errText = status, result, errText
}

// limited keeps the first n bytes written to it.
type limited struct {
	b *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
