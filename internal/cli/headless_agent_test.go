package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli/agentclitest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/session"
)

// agentHeadless is a `maestro headless --agent …` session driven over its
// pipes, in-process (agentEnv.start) or as a real process
// (agentEnv.startProcess).
type agentHeadless struct {
	e      *embedder
	stdin  io.WriteCloser
	code   chan int
	stderr *bytes.Buffer
}

// agentEnv is a machine for `maestro headless --agent`: a Maestro home
// holding the user-defined fake adapter (kept across the sessions started
// in it) and a PATH where "claude" is the fake permission-relay CLI and
// "fake-agent" runs the fake through testdata/start-logger, which records
// every start in bin (internal/agentcli/testdata).
type agentEnv struct {
	home, bin, path string
}

func newAgentEnv(t *testing.T) *agentEnv {
	t.Helper()
	td, err := filepath.Abs("../agentcli/testdata")
	if err != nil {
		t.Fatal(err)
	}
	ae := &agentEnv{home: t.TempDir(), bin: t.TempDir()}
	agentclitest.InstallUserAdapter(t, ae.home)
	for link, target := range map[string]string{
		"claude":     filepath.Join(td, "relay-fake", "fake-claude-relay"),
		"fake-agent": filepath.Join(td, "start-logger"),
		"target":     filepath.Join(td, "user-adapter", "fake-agent"),
	} {
		if err := os.Symlink(target, filepath.Join(ae.bin, link)); err != nil {
			t.Fatal(err)
		}
	}
	ae.path = ae.bin + string(os.PathListSeparator) + os.Getenv("PATH")
	return ae
}

// firstStart is the pid of the first agent CLI start-logger recorded: the
// leader of the CLI's process group.
func (ae *agentEnv) firstStart(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ae.bin, "starts.log"))
	if err != nil {
		t.Fatal(err)
	}
	leader, err := strconv.Atoi(strings.Fields(string(data))[0])
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

func startAgentHeadlessTest(t *testing.T, args ...string) *agentHeadless {
	t.Helper()
	return newAgentEnv(t).start(t, append([]string{"--workspace", t.TempDir()}, args...)...)
}

// start runs `maestro headless ARGS` in-process.
func (ae *agentEnv) start(t *testing.T, args ...string) *agentHeadless {
	t.Helper()
	env := map[string]string{"MAESTRO_HOME": ae.home, "PATH": ae.path}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &agentHeadless{stdin: inW, code: make(chan int, 1), stderr: &bytes.Buffer{}}
	streams := &IOStreams{In: inR, Out: outW, ErrOut: h.stderr, Getenv: func(k string) string { return env[k] }}
	go func() {
		h.code <- Run(ctx, streams, append([]string{"headless"}, args...))
		outW.Close()
	}()
	h.read(t, ctx, outR)
	return h
}

// startProcess runs `maestro headless ARGS` as a process of the built
// binary.
func (ae *agentEnv) startProcess(t *testing.T, args ...string) *agentHeadless {
	t.Helper()
	exe, err := maestroBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, exe, append([]string{"headless"}, args...)...)
	cmd.Env = append(headlessEnv(ae.home), "PATH="+ae.path)
	h := &agentHeadless{code: make(chan int, 1), stderr: &bytes.Buffer{}}
	cmd.Stderr = h.stderr
	var out io.ReadCloser
	h.stdin, out = proctest.StartPiped(t, cmd)
	done := h.read(t, ctx, out)
	go func() {
		<-done // Wait closes stdout: only once it has been read to its end
		_ = cmd.Wait()
		h.code <- cmd.ProcessState.ExitCode()
	}()
	return h
}

// read validates and decodes the frames on out; done closes at its end.
func (h *agentHeadless) read(t *testing.T, ctx context.Context, out io.Reader) (done chan struct{}) {
	frames, done := readFrames(t, out)
	h.e = &embedder{t: t, ctx: ctx, stdin: h.stdin, frames: frames}
	return done
}

// starts returns the argument vectors fake-agent was started with, in
// order.
func (ae *agentEnv) starts(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for n := 0; ; n++ {
		data, err := os.ReadFile(filepath.Join(ae.bin, fmt.Sprintf("argv-%d", n)))
		if errors.Is(err, fs.ErrNotExist) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00"))
	}
}

// until reads frames up to one of type typ, answering approvals with
// approve, and returns it.
func (h *agentHeadless) until(typ string, approve bool) map[string]any {
	for {
		f := h.e.next()
		if f["type"] == "server_request" && typ != "server_request" {
			h.e.send(fmt.Sprintf(`{"type":"server_request_response","request_id":%q,"request_type":"approval","approved":%v}`, f["request_id"], approve))
		}
		if f["type"] == typ {
			return f
		}
	}
}

func (h *agentHeadless) shutdown(t *testing.T) {
	t.Helper()
	h.e.send(`{"type":"shutdown"}`)
	for f := range h.e.frames {
		t.Errorf("frame after shutdown: %v", f)
	}
	if code := <-h.code; code != 0 {
		t.Fatalf("maestro headless exited %d\nstderr:\n%s", code, h.stderr)
	}
}

func TestHeadlessAgentUserAdapter(t *testing.T) {
	t.Parallel()
	h := startAgentHeadlessTest(t, "--agent", "fake-agent", "--model", "fake-agent/fake-9")
	if f := h.e.next(); f["type"] != "ready" || f["provider"] != "fake-agent" || f["model"] != "fake-9" || f["executor_type"] != "live" {
		t.Fatalf("first frame = %v", f)
	}
	h.e.send(`{"type":"prompt","content":"hello"}`)
	if f := h.until("response_chunk", false); f["content"] != "fake says: hello" {
		t.Errorf("chunk = %v", f)
	}
	if f := h.until("response_end", false); f["usage"].(map[string]any)["model_id"] != "fake-9" {
		t.Errorf("response_end = %v", f)
	}
	h.shutdown(t)
}

func TestHeadlessAgentApprovalRelay(t *testing.T) {
	t.Parallel()
	for _, approve := range []bool{true, false} {
		t.Run(fmt.Sprint("approve=", approve), func(t *testing.T) {
			t.Parallel()
			h := startAgentHeadlessTest(t, "--agent", "claude-code")
			h.e.send(`{"type":"hello","protocol_version":"2026-04-02","capabilities":{"server_requests":["approval"]}}`)
			h.e.send(`{"type":"prompt","content":"create the file"}`)
			req := h.until("server_request", approve)
			if req["request_type"] != "approval" || req["tool"] != "Bash" || req["call_id"] != "toolu_perm1" {
				t.Errorf("server_request = %v", req)
			}
			h.e.send(fmt.Sprintf(`{"type":"server_request_response","request_id":%q,"request_type":"approval","approved":%v}`, req["request_id"], approve))
			if f := h.until("tool_end", approve); f["success"] != approve {
				t.Errorf("tool_end = %v, want success %v", f, approve)
			}
			h.until("response_end", approve)
			h.shutdown(t)
		})
	}
}

func TestHeadlessAgentUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--agent", "no-such-agent"},
		{"--agent", "fake-agent", "--replay", "x.yaml"},
		{"--agent", "fake-agent", "--sandbox", "off"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			h := startAgentHeadlessTest(t, args...)
			f := h.e.next()
			if f["type"] != "error" || f["fatal"] != true || !strings.Contains(f["message"].(string), args[len(args)-2]) {
				t.Errorf("frame = %v, want a fatal startup error naming %s", f, args[len(args)-2])
			}
			if code := <-h.code; code != ExitUsage {
				t.Errorf("exit %d, want %d", code, ExitUsage)
			}
		})
	}
}

const fakeCLISession = "11111111-2222-4333-8444-555555555555" // the id fake-agent reports

// storedMeta reads a session's metadata as the store has it on disk.
func (ae *agentEnv) storedMeta(t *testing.T, id string) session.Meta {
	t.Helper()
	metas, err := session.NewStore(filepath.Join(ae.home, "sessions")).List()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("no session %s in the store (have %+v)", id, metas)
	return session.Meta{}
}

// setAgentSession rewrites the CLI session id stored in a session's
// metadata file (as if the CLI had since lost the stored one).
func (ae *agentEnv) setAgentSession(t *testing.T, id, cliSession string) {
	t.Helper()
	path := filepath.Join(ae.home, "sessions", id, "session.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["agent_session"] = cliSession
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// resumeArg returns the session id argv resumes ("" when it does not).
func resumeArg(argv []string) string {
	if i := slices.Index(argv, "--resume"); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
}

// startup reads ready and session_info and returns them.
func (h *agentHeadless) startup(t *testing.T) (ready, info map[string]any) {
	t.Helper()
	if ready = h.e.next(); ready["type"] != "ready" {
		t.Fatalf("first frame = %v, want ready", ready)
	}
	if info = h.e.next(); info["type"] != "session_info" {
		t.Fatalf("second frame = %v, want session_info", info)
	}
	return ready, info
}

// prompt sends a prompt and returns the text of its response chunks, read
// up to response_end.
func (h *agentHeadless) prompt(content string) string {
	h.e.send(fmt.Sprintf(`{"type":"prompt","content":%q}`, content))
	var text strings.Builder
	for {
		f := h.until("response_chunk", false)
		text.WriteString(f["content"].(string))
		for {
			f = h.e.next()
			if f["type"] == "response_end" {
				return text.String()
			}
			if f["type"] == "response_chunk" {
				text.WriteString(f["content"].(string))
			}
		}
	}
}

// A headless --agent session outlives its process: the first process
// stores the CLI's session id with the Maestro session; a second process
// started with --resume (the session_info id, no --agent) resumes the CLI
// session with the CLI's resume flag; a third, after the CLI lost that
// session, starts a fresh one seeded with the transcript read back from the
// Maestro log. Each step is a real `maestro headless` process.
func TestHeadlessAgentResumeAfterRestart(t *testing.T) {
	t.Parallel()
	ae := newAgentEnv(t)
	ws := t.TempDir()

	// Process 1: a new session, one turn.
	p1 := ae.startProcess(t, "--workspace", ws, "--agent", "fake-agent", "--model", "fake-9")
	_, info := p1.startup(t)
	id, _ := info["session_id"].(string)
	if id == "" {
		t.Fatalf("session_info = %v, want a session id", info)
	}
	if got := p1.prompt("remember teal"); got != "fake says: remember teal" {
		t.Errorf("process 1 answer = %q", got)
	}
	p1.shutdown(t)
	if m := ae.storedMeta(t, id); m.Agent != "fake-agent" || m.AgentSession != fakeCLISession || m.Model != "fake-9" {
		t.Fatalf("stored meta after process 1 = %+v, want agent fake-agent, agent_session %s, model fake-9", m, fakeCLISession)
	}

	// Process 2: --resume alone picks the agent, model and workspace.
	p2 := ae.startProcess(t, "--resume", id)
	ready, info := p2.startup(t)
	if ready["provider"] != "fake-agent" || ready["model"] != "fake-9" || info["session_id"] != id {
		t.Errorf("process 2 ready = %v, session_info = %v; want fake-agent/fake-9 and session %s", ready, info, id)
	}
	if got := p2.prompt("and now"); got != "fake says: and now" {
		t.Errorf("process 2 answer = %q", got)
	}
	p2.shutdown(t)

	// Process 3: the CLI no longer has the stored session.
	const gone = "22222222-2222-4333-8444-555555555555" // fake-agent knows only 1111…
	ae.setAgentSession(t, id, gone)
	p3 := ae.startProcess(t, "--agent", "fake-agent", "--resume", id[:13])
	p3.startup(t)
	got := p3.prompt("third")
	for _, want := range []string{"User: remember teal", "Assistant: fake says: remember teal", "User: and now", "Assistant: fake says: and now"} {
		if !strings.Contains(got, want) {
			t.Errorf("process 3: the fresh CLI session got %q; want the logged conversation (%q) in it", got, want)
		}
	}
	p3.shutdown(t)
	if m := ae.storedMeta(t, id); m.AgentSession != fakeCLISession {
		t.Errorf("stored agent_session after the reseed = %q, want the fresh session %s", m.AgentSession, fakeCLISession)
	}

	starts := ae.starts(t)
	if len(starts) != 4 {
		t.Fatalf("fake-agent starts = %q, want 4", starts)
	}
	for i, want := range []string{"", fakeCLISession, gone, ""} {
		if got := resumeArg(starts[i]); got != want {
			t.Errorf("start %d = %q: resumes %q, want %q", i, starts[i], got, want)
		}
	}
	if !slices.Contains(starts[1], "fake-9") {
		t.Errorf("start 1 = %q, want the stored model fake-9", starts[1])
	}
}

// --resume with an id that is no Maestro session takes it as the CLI's own
// session id; a Maestro session of another kind is refused.
func TestHeadlessAgentResumeIDs(t *testing.T) {
	t.Parallel()
	ae := newAgentEnv(t)
	h := ae.start(t, "--workspace", t.TempDir(), "--agent", "fake-agent", "--resume", fakeCLISession)
	_, info := h.startup(t)
	h.prompt("hello")
	h.shutdown(t)
	if starts := ae.starts(t); len(starts) != 1 || resumeArg(starts[0]) != fakeCLISession {
		t.Errorf("starts = %q, want one resuming %s", starts, fakeCLISession)
	}
	agentID := info["session_id"].(string)
	if m := ae.storedMeta(t, agentID); m.Agent != "fake-agent" || m.AgentSession != fakeCLISession {
		t.Errorf("stored meta = %+v", m)
	}

	own, err := session.NewStore(filepath.Join(ae.home, "sessions")).Create(session.Meta{Workspace: t.TempDir(), Provider: "replay", Model: "demo", ExecutorType: "replay", Replay: "builtin:demo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent", "fake-agent", "--resume", own.ID()}, "own loop"},
		{[]string{"--agent", "claude-code", "--resume", agentID}, "ran on --agent fake-agent, not claude-code"},
		{[]string{"--resume", agentID, "--sandbox", "off"}, "--sandbox applies to Maestro's own agent loop, not to --agent fake-agent"},
		{[]string{"--agent", "fake-agent", "--resume", agentID, "--model", "x"}, "drop --model"},
	} {
		h := ae.start(t, tc.args...)
		f := h.e.next()
		if msg, _ := f["message"].(string); f["type"] != "error" || f["fatal"] != true || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: frame = %v, want a fatal startup error with %q", tc.args, f, tc.want)
		}
		if code := <-h.code; code != ExitUsage {
			t.Errorf("%q: exit %d, want %d", tc.args, code, ExitUsage)
		}
	}
	if starts := ae.starts(t); len(starts) != 1 {
		t.Errorf("refused resumes started the CLI: %q", starts)
	}
}

// An interrupt stops a headless --agent run within 2 s and kills the CLI's
// whole process group (fake-agent leaves a child behind it).
func TestHeadlessAgentInterruptKillsProcessGroup(t *testing.T) {
	t.Parallel()
	ae := newAgentEnv(t)
	h := ae.start(t, "--workspace", t.TempDir(), "--agent", "fake-agent")
	h.startup(t)
	h.e.send(`{"type":"hello","protocol_version":"2026-04-02","capabilities":{"raw_agent_events":true}}`)
	h.e.send(`{"type":"prompt","content":"hang"}`)
	child := 0
	for child == 0 {
		f := h.until("raw_agent_event", false)
		ev, _ := f["event"].(map[string]any)
		if pid, ok := ev["pid"].(float64); ok && ev["subtype"] == "child" {
			child = int(pid)
		}
	}
	leader := ae.firstStart(t)
	at := time.Now()
	h.e.send(`{"type":"interrupt"}`)
	for {
		f := h.e.next()
		if f["type"] == "error" {
			if f["error_type"] != "cancelled" {
				t.Errorf("error after the interrupt = %v, want error_type cancelled", f)
			}
			break
		}
	}
	if d := time.Since(at); d > 2*time.Second {
		t.Errorf("the run ended %v after the interrupt, want < 2s", d)
	}
	for _, pid := range []int{leader, child} {
		if proctest.Alive(pid, 500*time.Millisecond) {
			t.Errorf("process %d of the CLI's group survived the interrupt", pid)
		}
	}
	h.shutdown(t)
}
