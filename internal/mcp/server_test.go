package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// deployIgnored is why the catalog ignored a piece file.
const deployIgnored = "/p/deploy.yaml:3:1: colour: unknown field"

// TestRunTaskRefusesBadArguments: run_task naming a workspace that is no
// directory, or a piece the workspace does not have, is a tool error
// saying so (the file of an ignored piece and why: it said "unknown
// piece", the invalid or untrusted file unmentioned), and no task
// starts. Before, a task started and failed with
// maestro run's terminal output ("exit status 2", the replay banner,
// "Run 'maestro run --help' for usage."), answered as a result that was
// not an error.
func TestRunTaskRefusesBadArguments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := NewServer(ServerOptions{
		Exe: filepath.Join(dir, "no-maestro"), // a task that starts fails otherwise
		Dir: dir,
		Pieces: func(context.Context, string) ([]PieceInfo, error) {
			return []PieceInfo{{Name: "code"}, {Name: "review"}, {Name: "deploy", Source: "/p/deploy.yaml", Ignored: deployIgnored}}, nil
		},
	})
	ctx := testCtx(t)
	cs := connect(t, srv)
	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_task", map[string]any{"prompt": "x", "workspace": filepath.Join(dir, "missing")}, "is not an existing directory"},
		{"run_task", map[string]any{"prompt": "x", "piece": "nosuch"}, `unknown piece "nosuch"; this workspace has: code, review`},
		{"run_task", map[string]any{"prompt": "x", "piece": "deploy"}, "piece \"deploy\" is not in effect: its file is ignored:\n" + deployIgnored},
		// A relative path is the server's directory's: the error says
		// which (a client whose directory is another could not tell).
		{"list_pieces", map[string]any{"workspace": "missing"}, `workspace "missing" is not an existing directory (a relative path is taken from ` + dir + `, the server's directory)`},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !res.IsError || !strings.Contains(text.String(), tt.want) {
			t.Errorf("%s %v: error %v %q, want an error containing %q", tt.tool, tt.args, res.IsError, text.String(), tt.want)
		}
	}
	srv.mu.Lock()
	n := len(srv.tasks)
	srv.mu.Unlock()
	if n != 0 {
		t.Errorf("%d tasks started, want none", n)
	}
}

// fakeRunEnv makes the test binary a `maestro run -o jsonl` that starts
// (ready, one status line) and runs until it is interrupted, then writes
// "interrupted" to the file the variable names and exits as maestro run
// does (130). Killed, it writes nothing.
const fakeRunEnv = "MAESTRO_MCPTEST_FAKE_RUN"

// fakeLinesEnv makes the test binary a `maestro run -o jsonl` that
// prints that many status lines ("line 1", …) and asks a question
// (waiting_human), or, resumed (--resume), prints two ("resumed 1", …)
// and succeeds.
const fakeLinesEnv = "MAESTRO_MCPTEST_FAKE_LINES"

// fakeRefusedEnv makes the test binary a `maestro run` that refuses its
// arguments as maestro run does, the variable's value its message: on
// stderr, with the hint for a terminal, exit status 2.
const fakeRefusedEnv = "MAESTRO_MCPTEST_FAKE_REFUSED"

func runFakeRunIfRequested() {
	if msg := os.Getenv(fakeRefusedEnv); msg != "" {
		fmt.Fprintf(os.Stderr, "maestro: %s\nRun 'maestro run --help' for usage.\n", msg)
		os.Exit(2)
	}
	if n, err := strconv.Atoi(os.Getenv(fakeLinesEnv)); err == nil {
		fmt.Println(`{"type":"ready","session_id":"s-1"}`)
		prefix, end := "line", "Result (waiting_human): Which one?"
		if slices.Contains(os.Args, "--resume") {
			n, prefix, end = 2, "resumed", "Result (succeeded): done"
		}
		for i := 1; i <= n; i++ {
			fmt.Printf(`{"type":"status","message":"%s %d"}`+"\n", prefix, i)
		}
		fmt.Printf(`{"type":"status","message":%q}`+"\n", end)
		os.Exit(0)
	}
	marker := os.Getenv(fakeRunEnv)
	if marker == "" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	// Its pid, for a test to end a run its server left behind.
	_ = os.WriteFile(marker+".pid", []byte(strconv.Itoa(os.Getpid())), 0o600)
	fmt.Println(`{"type":"ready","session_id":"s-1"}`)
	fmt.Println(`{"type":"status","message":"working"}`)
	<-sig
	_ = os.WriteFile(marker, []byte("interrupted"), 0o600)
	os.Exit(130)
}

// fakeRun is a server whose tasks are fake runs (fakeRunEnv), served to
// a client in memory, with a run_task waiting on a run that has started
// (its first progress line came: it handles interrupts).
type fakeRun struct {
	srv *Server
	cs  *sdk.ClientSession
	// marker is the file the run writes when interrupted.
	marker string
	// cancel cancels the run_task call, and answered is its error.
	cancel   context.CancelFunc
	answered chan error
	// ended is closed when the server has stopped.
	ended chan struct{}
	// stdin is the server's stdin.
	stdin io.Closer
	// onProgress, when set, is called on each progress notification
	// after the first.
	mu         sync.Mutex
	onProgress func()
}

func startFakeRun(t *testing.T) *fakeRun {
	t.Helper()
	dir := t.TempDir()
	f := &fakeRun{marker: filepath.Join(dir, "interrupted"), answered: make(chan error, 1), ended: make(chan struct{})}
	f.srv = NewServer(ServerOptions{Exe: os.Args[0], Env: append(os.Environ(), fakeRunEnv+"="+f.marker), Dir: dir})
	// Pipes, as `maestro mcp`'s stdin and stdout are.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	f.stdin = inW
	st := &sdk.IOTransport{Reader: inR, Writer: outW}
	ct := &sdk.IOTransport{Reader: outR, Writer: inW}
	t.Cleanup(func() { inW.Close(); outR.Close() })
	go func() {
		defer close(f.ended)
		f.srv.Run(testCtx(t), st)
	}()
	started := make(chan struct{})
	var first sync.Once
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
			f.mu.Lock()
			on := f.onProgress
			f.mu.Unlock()
			if on != nil {
				on()
			}
			first.Do(func() { close(started) })
		},
	})
	var err error
	if f.cs, err = c.Connect(testCtx(t), ct, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cs.Close() })
	var call context.Context
	call, f.cancel = context.WithCancel(testCtx(t))
	go func() {
		params := &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "work"}}
		params.SetProgressToken("p")
		_, err := f.cs.CallTool(call, params)
		f.answered <- err
	}()
	select {
	case <-started:
	case <-testCtx(t).Done():
		t.Fatal("the task's run did not start")
	}
	return f
}

// interrupted checks that the run was interrupted, not killed.
func (f *fakeRun) interrupted(t *testing.T) {
	t.Helper()
	if data, err := os.ReadFile(f.marker); string(data) != "interrupted" {
		t.Errorf("the run was not interrupted (killed?): %q, %v", data, err)
	}
}

// A run_task the client cancels mid-way stops its task: the run is
// interrupted (as Ctrl-C would, so that it stops its commands) and the
// task fails saying why. It ran on for up to two hours, a task the
// client never learned the id of.
func TestCancelledRunTaskStopsItsTask(t *testing.T) {
	t.Parallel()
	f := startFakeRun(t)
	f.cancel()
	if err := <-f.answered; err == nil {
		t.Fatal("the cancelled run_task answered")
	}
	tk, err := f.srv.task(f.srv.idPrefix + "1")
	if err != nil {
		t.Fatal(err)
	}
	tk.mu.Lock()
	done := tk.done
	tk.mu.Unlock()
	select {
	case <-done:
	case <-testCtx(t).Done():
		t.Fatal("the task of a cancelled run_task still runs")
	}
	if info := tk.info(); info.Status != TaskFailed || info.Error != "stopped: the client cancelled the call" {
		t.Errorf("task after the cancelled call: %+v", info)
	}
	f.interrupted(t)
}

// A client that goes away mid-call (its stdin closed) stops the tasks as
// interrupted runs, not killed ones (a killed maestro run left its Bash
// commands running outside bwrap).
func TestDisconnectInterruptsTheRuns(t *testing.T) {
	t.Parallel()
	f := startFakeRun(t)
	f.stdin.Close()
	select {
	case <-f.ended:
	case <-testCtx(t).Done():
		t.Fatal("the server did not stop with its client")
	}
	f.interrupted(t)
}

// An empty answer is refused and the task keeps waiting for one: it
// resumed the run with an empty task, which maestro run refuses ("the
// task is empty", exit 2), and the task failed for good, its question
// no longer answerable.
func TestEmptyAnswerKeepsTheQuestion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := NewServer(ServerOptions{Exe: filepath.Join(dir, "no-maestro"), Dir: dir})
	srv.tasks["task-1"] = &task{id: "task-1", status: TaskWaitingHuman, session: "s-1", result: "Whom shall I greet?"}
	ctx := testCtx(t)
	cs := connect(t, srv)
	for _, answer := range []string{"", " \n"} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "answer_question", Arguments: map[string]any{"task_id": "task-1", "answer": answer}})
		if err != nil {
			t.Fatal(err)
		}
		if text := resultText(res); !res.IsError || text != "answer_question: answer is empty" {
			t.Errorf("answer %q: error %v %q, want an error saying the answer is empty", answer, res.IsError, text)
		}
	}
	if info := srv.tasks["task-1"].info(); info.Status != TaskWaitingHuman || info.Result != "Whom shall I greet?" {
		t.Errorf("task after empty answers: %+v, want it waiting with its question", info)
	}
}

// Every progress line of a run is sent, numbered 1, 2, 3…, the last ones
// too (the answer came before them when the run ended at once), and
// answer_question sends the resumed run's lines only (it sent the
// earlier runs' again first).
func TestProgressOfARunAndItsResume(t *testing.T) {
	t.Parallel()
	srv := NewServer(ServerOptions{Exe: os.Args[0], Env: append(os.Environ(), fakeLinesEnv+"=3"), Dir: t.TempDir()})
	cs, got := progressClient(t, srv)
	run := &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "work"}}
	run.SetProgressToken("run")
	if res, err := cs.CallTool(testCtx(t), run); err != nil || res.IsError {
		t.Fatalf("run_task: %v %v", res, err)
	}
	answer := &sdk.CallToolParams{Name: "answer_question", Arguments: map[string]any{"task_id": srv.idPrefix + "1", "answer": "that one"}}
	answer.SetProgressToken("answer")
	if res, err := cs.CallTool(testCtx(t), answer); err != nil || res.IsError {
		t.Fatalf("answer_question: %v %v", res, err)
	}
	// The notifications precede the answers on the stream, but the
	// client may hand them over after.
	if r := got("run", 3); !slices.Equal(r, []string{"1 line 1", "2 line 2", "3 line 3"}) {
		t.Errorf("run_task's progress: %q, want the run's three lines", r)
	}
	if a := got("answer", 2); !slices.Equal(a, []string{"1 resumed 1", "2 resumed 2"}) {
		t.Errorf("answer_question's progress: %q, want the resumed run's two lines", a)
	}
}

// A task keeps its latest 1000 progress lines; a call waiting on it sent
// none past the 1000th.
func TestProgressPastAThousandLines(t *testing.T) {
	t.Parallel()
	const lines = maxProgress + 100
	f := startFakeRun(t) // its run has printed its line ("working")
	tk, err := f.srv.task(f.srv.idPrefix + "1")
	if err != nil {
		t.Fatal(err)
	}
	// The run's lines, each once the one before has come to the client
	// (a run is slower than the notifications, mostly).
	next := make(chan struct{}, 1)
	f.mu.Lock()
	f.onProgress = func() { next <- struct{}{} }
	f.mu.Unlock()
	for i := 2; i <= lines; i++ {
		tk.progress("line " + strconv.Itoa(i))
		select {
		case <-next:
		case <-testCtx(t).Done():
			t.Fatalf("line %d was not sent", i)
		}
	}
	f.cancel()
	<-f.answered
}

// progressClient connects a client to srv in memory; got returns the
// progress notifications of a token as "<progress> <message>", once
// there are at least n (or the test's time is up).
func progressClient(t *testing.T, srv *Server) (cs *sdk.ClientSession, got func(token string, n int) []string) {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(testCtx(t), st)
	var mu sync.Mutex
	seen := map[any][]string{}
	more := make(chan struct{}, 1)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			seen[req.Params.ProgressToken] = append(seen[req.Params.ProgressToken], fmt.Sprintf("%g %s", req.Params.Progress, req.Params.Message))
			select {
			case more <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(testCtx(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	ctx := testCtx(t)
	return cs, func(token string, n int) []string {
		for {
			mu.Lock()
			lines := slices.Clone(seen[token])
			mu.Unlock()
			if len(lines) >= n {
				return lines
			}
			select {
			case <-more:
			case <-ctx.Done():
				return lines
			}
		}
	}
}

// list_pieces lists apart the piece files that are not in effect, with
// the reason (they were left out without a word).
func TestListPiecesSaysWhatItIgnored(t *testing.T) {
	t.Parallel()
	srv := NewServer(ServerOptions{Dir: t.TempDir(), Pieces: func(context.Context, string) ([]PieceInfo, error) {
		return []PieceInfo{{Name: "code", Description: "d"}, {Name: "deploy", Source: "/p/deploy.yaml", Ignored: deployIgnored}}, nil
	}})
	cs, _ := progressClient(t, srv)
	res, err := cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: "list_pieces", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_pieces: %v %v", res, err)
	}
	want := `{"ignored":[{"ignored":"` + deployIgnored + `","name":"deploy","source":"/p/deploy.yaml"}],"pieces":[{"description":"d","name":"code"}]}`
	if got := resultText(res); got != want {
		t.Errorf("list_pieces:\n got %s\nwant %s", got, want)
	}
}

// connect serves srv to a client in memory.
func connect(t *testing.T, srv *Server) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(testCtx(t), st)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(testCtx(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// A task id is not given again by another server: a client whose
// `maestro mcp` restarted (Claude Code's reconnect, a second instance)
// asking for an earlier task got the new server's task of the same
// number (each began at task-1), another task's status and result
// answered as its own. An id this server did not give is a tool error
// that says so.
func TestTaskIDsAreNotReused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var ids []string
	for range 2 {
		srv := NewServer(ServerOptions{Exe: os.Args[0], Env: append(os.Environ(), fakeLinesEnv+"=1"), Dir: dir})
		t.Cleanup(srv.Close)
		cs := connect(t, srv)
		res, err := cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "work"}})
		if err != nil || res.IsError {
			t.Fatalf("run_task: %v %v", err, res.Content)
		}
		var info TaskInfo
		if err := json.Unmarshal([]byte(resultText(res)), &info); err != nil || info.Status != TaskWaitingHuman {
			t.Fatalf("run_task answered %v (%v), want a waiting_human task", info, err)
		}
		for _, id := range ids {
			res, err := cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: "task_status", Arguments: map[string]any{"task_id": id}})
			if err != nil {
				t.Fatal(err)
			}
			if text := resultText(res); !res.IsError || !strings.Contains(text, "this server did not start it") {
				t.Errorf("task_status of the earlier server's %s: error %v %q, want an error saying this server did not start it", id, res.IsError, text)
			}
		}
		ids = append(ids, info.TaskID)
	}
	if ids[0] == ids[1] {
		t.Errorf("two servers gave the same task id %s", ids[0])
	}
}

// A task maestro run refuses (no model configured and a piece the replay
// demo does not script) fails with maestro run's reason alone: the error
// was "maestro run: exit status 2", the reason, then "Run 'maestro run
// --help' for usage.", a terminal's hint the model calling run_task
// could do nothing with.
func TestRefusedRunSaysWhy(t *testing.T) {
	t.Parallel()
	const why = "no model is configured, and the bundled replay demo scripts only piece general, not code"
	srv := NewServer(ServerOptions{Exe: os.Args[0], Env: append(os.Environ(), fakeRefusedEnv+"="+why), Dir: t.TempDir()})
	t.Cleanup(srv.Close)
	res, err := connect(t, srv).CallTool(testCtx(t), &sdk.CallToolParams{Name: "run_task", Arguments: map[string]any{"prompt": "work"}})
	if err != nil {
		t.Fatal(err)
	}
	var info TaskInfo
	if err := json.Unmarshal([]byte(resultText(res)), &info); err != nil {
		t.Fatal(err)
	}
	if want := "maestro run refused the task: " + why; info.Status != TaskFailed || info.Error != want {
		t.Errorf("task %s, error %q; want failed, %q", info.Status, info.Error, want)
	}
}
