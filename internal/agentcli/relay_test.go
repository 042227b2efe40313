package agentcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

func TestRelayArgv(t *testing.T) {
	t.Parallel()
	claude := mustDef(t, "claude-code")
	flagPrompt := &Definition{ID: "x", Args: Args{JSONOutput: []string{"--json"}, Prompt: []string{"-p", "{prompt}"}}}
	embedded := &Definition{ID: "y", Args: Args{JSONOutput: []string{"--json"}}}
	tests := []struct {
		name       string
		def        *Definition
		inv        Invocation
		wantArgs   []string
		wantPrompt string
	}{
		{name: "claude new session", def: claude, inv: Invocation{Prompt: "-- hi"},
			wantArgs:   []string{"--print", "--verbose", "--output-format", "stream-json", "--input-format", "stream-json", "--permission-prompt-tool", "stdio"},
			wantPrompt: "-- hi"},
		{name: "claude resume with system prompt", def: claude, inv: Invocation{Prompt: "go on", SessionID: "s-1", SystemPrompt: "be brief"},
			wantArgs: []string{"--print", "--verbose", "--output-format", "stream-json", "--resume", "s-1", "--append-system-prompt", "be brief",
				"--input-format", "stream-json", "--permission-prompt-tool", "stdio"},
			wantPrompt: "go on"},
		{name: "prompt flags are dropped", def: flagPrompt, inv: Invocation{Prompt: "hi"},
			wantArgs: []string{"--json", "--input-format", "stream-json", "--permission-prompt-tool", "stdio"}, wantPrompt: "hi"},
		{name: "embedded system prompt stays in the prompt", def: embedded, inv: Invocation{Prompt: "hi", SystemPrompt: "sys"},
			wantArgs:   []string{"--json", "--input-format", "stream-json", "--permission-prompt-tool", "stdio"},
			wantPrompt: "sys\n\n---\n\n# User Request\n\nhi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args, prompt, _ := tt.def.relayArgv(tt.inv)
			if diff := cmp.Diff(tt.wantArgs, args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if got := prompt; got != tt.wantPrompt {
				t.Errorf("prompt = %q, want %q", got, tt.wantPrompt)
			}
		})
	}
}

func TestRelaySupported(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{"claude-code": true, "codex": false, "gemini-cli": false, "opencode": false, "qwen-code": false} {
		if got := RelaySupported(mustDef(t, id)); got != want {
			t.Errorf("RelaySupported(%s) = %v, want %v", id, got, want)
		}
	}
}

// TestRelayFixtures parses the captured permission exchanges: allowed,
// the tool runs; denied, the tool result is an error and the result
// counts the denial.
func TestRelayFixtures(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		wantSuccess bool
		wantOutput  string
		wantDenials int
	}{
		{"permission-allow", true, "(Bash completed with no output)", 0},
		{"permission-deny", false, "Denied by user", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata", "claude-code-2.1.330", tt.name+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewParser("claude-stream-json", ParserOptions{Provider: "claude-code"})
			if err != nil {
				t.Fatal(err)
			}
			var ends []protocol.ToolEnd
			var output string
			var requests int
			for ev, err := range Parse(bytes.NewReader(data), p) {
				if err != nil {
					t.Fatal(err)
				}
				var l relayLine
				if json.Unmarshal(ev.Raw, &l) == nil && l.Type == "control_request" && l.Request.Subtype == "can_use_tool" {
					requests++
					if l.Request.ToolUseID != "toolu_perm1" || l.Request.ToolName != "Bash" || !bytes.Contains(l.Request.Input, []byte("touch maestro-relay-ok.txt")) {
						t.Errorf("can_use_tool request = %+v", l.Request)
					}
				}
				for _, m := range ev.Messages {
					switch m := m.(type) {
					case protocol.ToolEnd:
						ends = append(ends, m)
					case protocol.ToolOutput:
						output += m.Content
					}
				}
			}
			if requests != 1 || len(ends) != 1 || ends[0].Success != tt.wantSuccess || output != tt.wantOutput {
				t.Errorf("requests %d, tool ends %+v, output %q", requests, ends, output)
			}
			if r := p.Result(); r == nil || r.PermissionDenials != tt.wantDenials || r.IsError {
				t.Errorf("result = %+v, want %d denial(s)", r, tt.wantDenials)
			}
			if st := p.Stats(); st.Unknown != 0 || st.NonJSON != 0 {
				t.Errorf("stats = %+v: every line of the exchange should be known", st)
			}
		})
	}
}

// relayFake returns an executor running testdata/relay-fake with the
// built-in Claude Code definition, and the path of the fake's log.
func relayFake(t *testing.T, perm PermissionFunc) (*Executor, string) {
	t.Helper()
	bin, err := filepath.Abs("testdata/relay-fake/fake-claude-relay")
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "fake.log")
	return &Executor{Def: mustDef(t, "claude-code"), Path: bin, MaxAttempts: 1, Permission: perm,
		Env: append(os.Environ(), "FAKE_LOG="+log)}, log
}

// fakeLog reads the fake's log: argv, pids and stdin lines.
type fakeLog struct {
	argv  string
	pids  []int
	stdin []string
}

func readFakeLog(t *testing.T, path string) fakeLog {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l fakeLog
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "argv":
			l.argv = v
		case "pid", "child":
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("fake log: %q", line)
			}
			l.pids = append(l.pids, n)
		case "stdin":
			l.stdin = append(l.stdin, v)
		}
	}
	return l
}

func TestRelayAnswersPermission(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{true, false} {
		t.Run("allow="+strconv.FormatBool(allow), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []PermissionRequest
			x, logPath := relayFake(t, func(_ context.Context, r PermissionRequest) (PermissionDecision, error) {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
				return PermissionDecision{Allow: allow, Message: "not today"}, nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var c collected
			var ends []protocol.ToolEnd
			res, err := x.Run(ctx, Request{Invocation: Invocation{Prompt: "create the file", Dir: t.TempDir()}}, func(ev Event) {
				c.sink(ev)
				for _, m := range ev.Messages {
					if e, ok := m.(protocol.ToolEnd); ok {
						ends = append(ends, e)
					}
				}
			})
			if err != nil || res.Err != nil || res.ExitCode != 0 {
				t.Fatalf("run: err %v, agent error %v, exit %d", err, res.Err, res.ExitCode)
			}
			if len(got) != 1 {
				t.Fatalf("permission requests = %+v, want 1", got)
			}
			r := got[0]
			if r.CallID != "toolu_perm1" || r.Tool != "Bash" || r.Description != "Create a file" ||
				!strings.Contains(string(r.Input), `"command":"touch maestro-relay-ok.txt"`) || r.RequestID == "" {
				t.Errorf("permission request = %+v", r)
			}
			if len(ends) != 1 || ends[0].Success != allow {
				t.Errorf("tool ends = %+v, want one with success %v", ends, allow)
			}
			wantDenials := 0
			if !allow {
				wantDenials = 1
			}
			if res.Result == nil || res.Result.PermissionDenials != wantDenials {
				t.Errorf("result = %+v", res.Result)
			}
			l := readFakeLog(t, logPath)
			if !strings.Contains(l.argv, "--input-format stream-json --permission-prompt-tool stdio") || strings.Contains(l.argv, "create the file") {
				t.Errorf("argv = %q: want the relay flags and no prompt", l.argv)
			}
			if len(l.stdin) != 3 {
				t.Fatalf("stdin lines = %q, want initialize, the prompt and one answer", l.stdin)
			}
			if !strings.Contains(l.stdin[0], `"subtype":"initialize"`) || !strings.Contains(l.stdin[1], `"text":"create the file"`) {
				t.Errorf("stdin = %q", l.stdin)
			}
			var answer struct {
				Type     string `json:"type"`
				Response struct {
					Subtype   string `json:"subtype"`
					RequestID string `json:"request_id"`
					Response  struct {
						Behavior     string          `json:"behavior"`
						Message      string          `json:"message"`
						UpdatedInput json.RawMessage `json:"updatedInput"`
					} `json:"response"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(l.stdin[2]), &answer); err != nil {
				t.Fatalf("answer %q: %v", l.stdin[2], err)
			}
			a := answer.Response
			wantBehavior, wantMessage := "allow", ""
			if !allow {
				wantBehavior, wantMessage = "deny", "not today"
			}
			if answer.Type != "control_response" || a.Subtype != "success" || a.RequestID != r.RequestID ||
				a.Response.Behavior != wantBehavior || a.Response.Message != wantMessage {
				t.Errorf("answer = %s", l.stdin[2])
			}
			if allow && !bytes.Equal(a.Response.UpdatedInput, r.Input) {
				t.Errorf("updatedInput = %s, want %s", a.Response.UpdatedInput, r.Input)
			}
		})
	}
}

// TestRelayInterrupt interrupts while a permission request is pending:
// the decision's context ends and the CLI's whole process group is gone
// within 2 s.
func TestRelayInterrupt(t *testing.T) {
	t.Parallel()
	asked := make(chan struct{})
	decided := make(chan error, 1)
	x, logPath := relayFake(t, func(ctx context.Context, _ PermissionRequest) (PermissionDecision, error) {
		close(asked)
		<-ctx.Done()
		decided <- ctx.Err()
		return PermissionDecision{}, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runCtx, interrupt := context.WithCancel(ctx)
	type outcome struct {
		err error
		at  time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		_, err := x.Run(runCtx, Request{Invocation: Invocation{Prompt: "create the file"}}, func(Event) {})
		done <- outcome{err, time.Now()}
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the permission request never arrived")
	}
	at := time.Now()
	interrupt()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		t.Fatal("the run did not end after the interrupt")
	}
	if d := o.at.Sub(at); d > 2*time.Second {
		t.Errorf("the run ended %v after the interrupt, want < 2s", d)
	}
	if !errors.Is(o.err, ErrInterrupted) {
		t.Errorf("err = %v, want ErrInterrupted", o.err)
	}
	if err := <-decided; !errors.Is(err, context.Canceled) {
		t.Errorf("the pending decision saw %v, want context.Canceled", err)
	}
	l := readFakeLog(t, logPath)
	if len(l.pids) != 2 {
		t.Fatalf("fake log pids = %v", l.pids)
	}
	for _, pid := range l.pids {
		if proctest.Alive(pid, 500*time.Millisecond) {
			t.Errorf("process %d of the CLI's group still runs after the interrupt", pid)
		}
	}
	if slices.ContainsFunc(l.stdin, func(s string) bool { return strings.Contains(s, "control_response") }) {
		t.Errorf("an interrupted request was answered: %q", l.stdin)
	}
}
