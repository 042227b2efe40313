package agentcli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// fakeExecutor returns an executor for the user-defined adapter in
// testdata/user-adapter, loaded exactly as ~/.maestro/agents/*.yaml is.
func fakeExecutor(t *testing.T) (*Executor, string) {
	t.Helper()
	dir, err := filepath.Abs("testdata/user-adapter")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := Load(dir)
	if err != nil {
		t.Fatalf("load user adapters: %v", err)
	}
	def, ok := reg.Get("fake-agent")
	if !ok {
		t.Fatalf("user adapter not loaded; ids: %v", reg.IDs())
	}
	state := t.TempDir()
	env := append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "FAKE_STATE="+state)
	return &Executor{Def: def, Env: env, Backoff: func(int, *AgentError) time.Duration { return 0 }}, state
}

type collected struct {
	types      []string
	text       string
	errorTypes []protocol.ErrorType
}

func (c *collected) sink(ev Event) {
	for _, m := range ev.Messages {
		c.types = append(c.types, m.MessageType())
		if ch, ok := m.(protocol.ResponseChunk); ok {
			c.text += ch.Content
		}
		if e, ok := m.(protocol.Error); ok {
			c.errorTypes = append(c.errorTypes, e.ErrorType)
		}
	}
}

func TestUserAdapterRuns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		req          Request
		wantText     string
		wantCategory Category
		wantAttempts int
		wantReseeded bool
		wantTypes    string
	}{
		{name: "plain", req: Request{Invocation: Invocation{Prompt: "hello"}}, wantText: "fake says: hello", wantAttempts: 1,
			wantTypes: "response_start response_chunk response_end"},
		{name: "auth failure from stderr", req: Request{Invocation: Invocation{Prompt: "fail-auth"}}, wantCategory: AuthExpired, wantAttempts: 1,
			wantTypes: "error"},
		{name: "rate limit is retried", req: Request{Invocation: Invocation{Prompt: "rate-once"}}, wantText: "fake says: rate-once", wantAttempts: 2,
			wantTypes: "error status response_start response_chunk response_end"},
		{name: "lost session is reseeded", req: Request{Invocation: Invocation{Prompt: "go on", SessionID: "dead-session"}, Transcript: "user: hi"},
			wantText: "fake says: Earlier conversation", wantAttempts: 2, wantReseeded: true,
			wantTypes: "error status response_start response_chunk response_end"},
		// A CLI session id given as is (maestro run --agent X --resume ID)
		// that the CLI does not know: nothing to continue, no fresh session.
		{name: "unknown session without a transcript fails", req: Request{Invocation: Invocation{Prompt: "go on", SessionID: "dead-session"}},
			wantCategory: SessionNotFound, wantAttempts: 1, wantTypes: "error"},
		{name: "noise is tolerated", req: Request{Invocation: Invocation{Prompt: "noise"}}, wantText: "fake says: noise", wantAttempts: 1,
			wantTypes: "response_start response_chunk response_end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x, _ := fakeExecutor(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var c collected
			res, err := x.Run(ctx, tt.req, c.sink)
			if err != nil {
				t.Fatal(err)
			}
			var gotCat Category
			if res.Err != nil {
				gotCat = res.Err.Category
			}
			if gotCat != tt.wantCategory {
				t.Errorf("category = %q, want %q (err %v)", gotCat, tt.wantCategory, res.Err)
			}
			if !strings.HasPrefix(c.text, tt.wantText) {
				t.Errorf("text = %q, want prefix %q", c.text, tt.wantText)
			}
			if res.Attempts != tt.wantAttempts || res.Reseeded != tt.wantReseeded {
				t.Errorf("attempts, reseeded = %d, %v; want %d, %v", res.Attempts, res.Reseeded, tt.wantAttempts, tt.wantReseeded)
			}
			if diff := cmp.Diff(tt.wantTypes, strings.Join(c.types, " ")); diff != "" {
				t.Errorf("event types (-want +got):\n%s", diff)
			}
			// The lost session's error is recovered from: transient, not
			// "error (fatal)" before the answer.
			if tt.wantReseeded && c.errorTypes[0] != protocol.ErrorTransient {
				t.Errorf("error types = %q, want the recovered one transient", c.errorTypes)
			}
			if tt.wantCategory == "" && res.SessionID != "11111111-2222-4333-8444-555555555555" {
				t.Errorf("session id = %q", res.SessionID)
			}
		})
	}
}

func TestUserAdapterNoiseCounted(t *testing.T) {
	t.Parallel()
	x, _ := fakeExecutor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := x.Run(ctx, Request{Invocation: Invocation{Prompt: "noise"}}, func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Stats; s.Unknown != 1 || s.NonJSON != 1 || s.Partial != 1 {
		t.Errorf("stats = %+v, want 1 unknown, 1 non-JSON, 1 partial", s)
	}
}

// An interrupt ends the run promptly: the CLI's process group gets
// SIGTERM, then SIGKILL after KillGrace (1 s), and Run returns. A child in
// the group dies with it; a descendant that left the group (its own
// session) is out of the group kill's reach and holds the pipes open, so
// Run stops reading them killDrain after the SIGKILL instead of waiting
// for that descendant to end (it would have waited the full 30 s).
func TestInterruptKillsProcessGroup(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		prompt string
		// inGroup: the child is in the CLI's process group and must die.
		inGroup bool
	}{
		{"hang", true},
		{"hang-detached", false},
	} {
		t.Run(tt.prompt, func(t *testing.T) {
			t.Parallel()
			x, _ := fakeExecutor(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			runCtx, interrupt := context.WithCancel(ctx)
			// The fake starts a grandchild and reports its pid on stdout.
			childPID := make(chan int, 1)
			type out struct {
				err error
				at  time.Time
			}
			done := make(chan out, 1)
			go func() {
				_, err := x.Run(runCtx, Request{Invocation: Invocation{Prompt: tt.prompt}}, func(ev Event) {
					var l struct {
						Subtype string `json:"subtype"`
						PID     int    `json:"pid"`
					}
					if json.Unmarshal(ev.Raw, &l) == nil && l.Subtype == "child" {
						childPID <- l.PID
					}
				})
				done <- out{err, time.Now()}
			}()
			var pid int
			select {
			case pid = <-childPID:
			case <-ctx.Done():
				t.Fatal("the fake CLI never reported its child")
			}
			if !tt.inGroup {
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			}
			at := time.Now()
			interrupt()
			var o out
			select {
			case o = <-done:
			case <-ctx.Done():
				t.Fatal("Run did not return after the interrupt")
			}
			if !errors.Is(o.err, ErrInterrupted) {
				t.Errorf("err = %v, want ErrInterrupted", o.err)
			}
			// The group's own members end within the grace period (1 s);
			// a descendant outside it holds the pipes until killDrain after
			// the SIGKILL, and stderr for killDrain more.
			want := 2 * time.Second
			if !tt.inGroup {
				want += 2*killDrain + time.Second
			}
			if d := o.at.Sub(at); d > want {
				t.Errorf("interrupt took %v, want < %v", d, want)
			}
			if !tt.inGroup {
				return
			}
			// SIGKILL is delivered at once but the process takes a moment to
			// exit (it may then linger as a zombie, which counts as gone).
			if proctest.Alive(pid, 2*time.Second) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("child %d of the CLI survived the interrupt", pid)
			}
		})
	}
}

func TestDetectUserAdapter(t *testing.T) {
	t.Parallel()
	x, _ := fakeExecutor(t)
	det := Detect(context.Background(), x.Def, envValue(x.Env, "PATH"))
	if det.Err != nil || det.Version != "1.2.3" || !strings.HasSuffix(det.Path, "/fake-agent") {
		t.Errorf("Detect = %+v", det)
	}
	missing := Detect(context.Background(), &Definition{ID: "x", Binary: "no-such-agent-cli"}, t.TempDir())
	if missing.Err == nil || missing.Path != "" {
		t.Errorf("Detect(missing) = %+v", missing)
	}
}

// aiderExecutor runs testdata/generic's aider-like fake (parser: text),
// one attempt.
func aiderExecutor(t *testing.T) *Executor {
	t.Helper()
	generic, _ := filepath.Abs(filepath.Join("testdata", "generic"))
	reg, _ := Load(generic) // broken.yaml beside the fakes is left out
	def, ok := reg.Get("fake-aider")
	if !ok {
		t.Fatal("fake-aider not loaded")
	}
	return &Executor{Def: def, Path: filepath.Join(generic, "fake-aider"), MaxAttempts: 1, Env: []string{"PATH=/usr/bin:/bin"}}
}

// TestInterruptedStreamIsNoAnswer: a CLI whose stream has no result line
// (the text parser, OpenCode mid-turn) is interrupted after part of its
// answer. The end of its stream is the kill, not the end of the turn:
// Run returns ErrInterrupted with no result, so `maestro run` exits 130
// and logs the cancellation instead of taking half an answer for the
// whole (it exited 0 with the text parser).
func TestInterruptedStreamIsNoAnswer(t *testing.T) {
	t.Parallel()
	aider := aiderExecutor(t)
	generic := filepath.Dir(aider.Path)
	fixture, _ := filepath.Abs(filepath.Join("testdata", "opencode-1.18.33", "tool-turn.jsonl"))
	for _, tt := range []struct {
		name string
		x    *Executor
		// at: the event after which the user interrupts.
		at string
	}{
		{"text", aider, "response_chunk"},
		// Its first step (a tool call) is over; the turn is not.
		{"opencode", &Executor{Def: mustDef(t, "opencode"), Path: filepath.Join(generic, "cat-fixture"),
			Env: []string{"PATH=/usr/bin:/bin", "FIXTURE=" + fixture, "HANG_AFTER=3"}}, "tool_end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.x.MaxAttempts = 1
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			runCtx, interrupt := context.WithCancel(ctx)
			res, err := tt.x.Run(runCtx, Request{Invocation: Invocation{Prompt: "hang", Dir: t.TempDir()}}, func(ev Event) {
				for _, m := range ev.Messages {
					if m.MessageType() == tt.at {
						interrupt()
					}
				}
			})
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("err = %v, want ErrInterrupted", err)
			}
			if res == nil || res.Result != nil {
				t.Errorf("result = %+v, want none: the turn did not end", res)
			}
		})
	}
}

// TestExitWithoutResult: a CLI that exits 0 without a result (it printed
// nothing, or nothing its parser reads, as another version of the CLI
// might) failed no one: `maestro run --agent` answered nothing and exited
// 0. One killed by a signal said "exited with code -1".
// scriptExecutor runs claude-code's definition on a shell script, once.
func scriptExecutor(t *testing.T, script string) *Executor {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cli")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Executor{Def: mustDef(t, "claude-code"), Path: bin, MaxAttempts: 1, Env: []string{"PATH=/usr/bin:/bin"}}
}

// runScript runs prompt "hi" on x (resuming session, if given) within 20
// s, and returns the result, the error messages published and the session
// ids announced. A run that reaches the bound fails the test.
func runScript(t *testing.T, x *Executor, session string) (res *RunResult, errs, sessions []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := x.Run(ctx, Request{Invocation: Invocation{Prompt: "hi", SessionID: session, Dir: t.TempDir()}}, func(ev Event) {
		if ev.SessionID != "" {
			sessions = append(sessions, ev.SessionID)
		}
		for _, m := range ev.Messages {
			if e, ok := m.(protocol.Error); ok {
				errs = append(errs, e.Message)
			}
		}
	})
	if err != nil || ctx.Err() != nil {
		t.Fatalf("run: %v (bound: %v)", err, ctx.Err())
	}
	return res, errs, sessions
}

func TestExitWithoutResult(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, script string
		want         string
	}{
		{"silent", "exit 0", "Agent exited with code 0 without a result: it printed nothing"},
		{"other format", "echo '<html>oops</html>'; echo '{not json'",
			`Agent exited with code 0 without a result: none of its 2 line(s) of output is a claude-stream-json event (the first: "<html>oops</html>")`},
		{"stderr", "echo 'config file is broken' >&2", "Agent exited with code 0 without a result: config file is broken"},
		{"signal", `echo '{"type":"system","subtype":"init","session_id":"s-1"}'; kill -SEGV $$`,
			"Agent was killed by a signal (segmentation fault)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x := scriptExecutor(t, tt.script)
			res, published, _ := runScript(t, x, "")
			if res.Err == nil || res.Err.Category != AgentCrashed || res.Err.Message != tt.want {
				t.Errorf("err = %#v\nwant agent_crashed %q", res.Err, tt.want)
			}
			if len(published) != 1 {
				t.Errorf("published errors = %q, want the one", published)
			}
		})
	}
}

// TestPromptOnStdin: OpenCode's run wraps each argument holding a space in
// double quotes, escaping those inside, so a prompt on its command line
// reached the model as "\"say hi\"" (its stored sessions show it). Its
// definition sends the prompt on stdin, which it reads as it is: the
// prompt, byte for byte, and no prompt argument.
func TestPromptOnStdin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, _ := filepath.Abs(filepath.Join("testdata", "generic", "cat-fixture"))
	fixture, _ := filepath.Abs(filepath.Join("testdata", "opencode-1.18.33", "plain-turn.jsonl"))
	argsOut, stdinOut := filepath.Join(dir, "args"), filepath.Join(dir, "stdin")
	x := &Executor{Def: mustDef(t, "opencode"), Path: bin, MaxAttempts: 1,
		Env: []string{"PATH=/usr/bin:/bin", "FIXTURE=" + fixture, "ARGS_OUT=" + argsOut, "STDIN_OUT=" + stdinOut}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const prompt = "say \"hi\"  there\n-x --- and more"
	res, err := x.Run(ctx, Request{Invocation: Invocation{Prompt: prompt, Dir: t.TempDir()}}, func(Event) {})
	if err != nil || res.Err != nil || res.Result == nil {
		t.Fatalf("run: %v, %+v", err, res)
	}
	stdin, _ := os.ReadFile(stdinOut)
	args, _ := os.ReadFile(argsOut)
	if string(stdin) != prompt {
		t.Errorf("stdin = %q, want the prompt %q", stdin, prompt)
	}
	if want := "run\n--format\njson\n--thinking\n"; string(args) != want {
		t.Errorf("args = %q, want %q (no prompt)", args, want)
	}
}

// TestInterruptDuringRetryWait: Ctrl-C while the executor waits to retry a
// rate-limited attempt interrupts the turn. The failed attempt's error
// result came back as the turn's result, which `maestro run` took for an
// answer: exit 0, no cancellation.
func TestInterruptDuringRetryWait(t *testing.T) {
	t.Parallel()
	x, _ := fakeExecutor(t)
	x.Backoff = func(int, *AgentError) time.Duration { return time.Hour }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runCtx, interrupt := context.WithCancel(ctx)
	res, err := x.Run(runCtx, Request{Invocation: Invocation{Prompt: "rate-once"}}, func(ev Event) {
		for _, m := range ev.Messages {
			if s, ok := m.(protocol.Status); ok && strings.Contains(s.Message, "retrying in") {
				interrupt()
			}
		}
	})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if res == nil || res.Result != nil {
		t.Errorf("result = %+v, want none", res)
	}
}

// TestNoResumeSeedsTranscript: --resume of a Maestro session on a CLI
// without resume started a new CLI session knowing nothing of the
// conversation; the transcript now comes with the prompt, as for a
// session the CLI lost.
func TestNoResumeSeedsTranscript(t *testing.T) {
	t.Parallel()
	x := aiderExecutor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var c collected
	res, err := x.Run(ctx, Request{Invocation: Invocation{Prompt: "go on", SessionID: "aid-42", Dir: t.TempDir()}, Transcript: "user: remember 7"}, c.sink)
	if err != nil || res.Err != nil {
		t.Fatalf("run: %v, %+v", err, res)
	}
	if !strings.Contains(c.text, "remember 7") || !strings.Contains(c.text, "go on") || !res.Reseeded {
		t.Errorf("text = %q, reseeded %v: want the transcript and the prompt", c.text, res.Reseeded)
	}
	if !strings.HasPrefix(strings.Join(c.types, " "), "status ") {
		t.Errorf("events = %q, want a status first", c.types)
	}
}

// TestLineOverLimit: a stream line over the limit stopped the reading and
// the turn failed with "exited … without a result", which hid why; the
// rest of the stream (its result here) was drained unread while the CLI
// worked on. The error names the limit, and the CLI is stopped.
func TestLineOverLimit(t *testing.T) {
	t.Parallel()
	x := scriptExecutor(t, `echo '{"type":"system","subtype":"init","session_id":"s-1"}'
head -c 1025 /dev/zero | tr '\0' a; echo
echo '{"type":"result","subtype":"success","result":"done","session_id":"s-1"}'
while :; do echo '{"type":"noise"}'; done`)
	x.maxLine = 1024
	res, published, _ := runScript(t, x, "") // the CLI is not left running
	const want = "Maestro stopped the agent: a line of its claude-stream-json output is longer than the 1 KiB limit, so the rest of its stream could not be read"
	if res.Err == nil || res.Err.Category != AgentCrashed || res.Err.Message != want {
		t.Errorf("err = %#v\nwant agent_crashed %q", res.Err, want)
	}
	if len(published) != 1 || !strings.Contains(published[0], "1 KiB limit") {
		t.Errorf("published errors = %q, want the one naming the limit", published)
	}
}

// TestUnknownResumeNotAnnounced: Claude Code's answer to --resume of an id
// it does not know is one error result carrying that id; the event gave it
// as the CLI's session, so "Claude Code session <id>" was printed before
// the failure as if the session had been found.
func TestUnknownResumeNotAnnounced(t *testing.T) {
	t.Parallel()
	const id = "0b5b8f7e-1111-2222-3333-444455556666"
	x := scriptExecutor(t, `echo '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":"`+id+`","errors":["No conversation found with session ID: `+id+`"]}'
echo 'No conversation found with session ID: `+id+`' >&2; exit 1`)
	res, _, announced := runScript(t, x, id)
	if res.Err == nil || res.Err.Category != SessionNotFound {
		t.Errorf("err = %#v, want session_not_found", res.Err)
	}
	if len(announced) != 0 {
		t.Errorf("session ids announced: %q, want none (the CLI knows no such session)", announced)
	}
}
