package mcp

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRunTaskRefusesBadArguments: run_task naming a workspace that is no
// directory, or a piece the workspace does not have, is a tool error
// saying so, and no task starts. Before, a task started and failed with
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
			return []PieceInfo{{Name: "code"}, {Name: "review"}}, nil
		},
	})
	ctx := testCtx(t)
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_task", map[string]any{"prompt": "x", "workspace": filepath.Join(dir, "missing")}, "is not an existing directory"},
		{"run_task", map[string]any{"prompt": "x", "piece": "nosuch"}, `unknown piece "nosuch"; this workspace has: code, review`},
		{"list_pieces", map[string]any{"workspace": "missing"}, `workspace "missing" is not an existing directory`},
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

func runFakeRunIfRequested() {
	marker := os.Getenv(fakeRunEnv)
	if marker == "" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
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
	started := make(chan struct{}, 1)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
			select {
			case started <- struct{}{}:
			default:
			}
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
	tk, err := f.srv.task("task-1")
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
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
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
