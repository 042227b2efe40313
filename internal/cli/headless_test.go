package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/proctest"
)

// maestroBinDir is the directory maestroBinary built into; TestMain
// removes it (each run of the package left a 110 MB binary in /tmp).
var maestroBinDir string

// maestroBinary builds cmd/maestro once for the subprocess tests.
var maestroBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "maestro-headless-")
	if err != nil {
		return "", err
	}
	maestroBinDir = dir
	return proctest.Build(context.Background(), "cmd/maestro", dir)
})

// headlessEnv is the environment of a machine with no model configured.
func headlessEnv(home string) []string {
	return proctest.NoModelEnv(home)
}

// headlessProcess is `maestro headless --workspace ws` of the built
// binary on a machine with no model and Maestro's home at home, its
// stderr captured, bounded to 60 s.
func headlessProcess(t *testing.T, home, ws string) (context.Context, *exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return maestroProcess(t, home, "headless", "--workspace", ws)
}

// maestroProcess is `maestro args…` of the built binary, as
// headlessProcess.
func maestroProcess(t *testing.T, home string, args ...string) (context.Context, *exec.Cmd, *bytes.Buffer) {
	t.Helper()
	bin, err := maestroBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = headlessEnv(home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return ctx, cmd, &stderr
}

// embedder drives a `maestro headless` process over its pipes.
type embedder struct {
	t      *testing.T
	ctx    context.Context
	stdin  io.WriteCloser
	frames chan map[string]any
	seen   []string
}

func (e *embedder) send(line string) {
	e.t.Helper()
	if _, err := io.WriteString(e.stdin, line+"\n"); err != nil {
		e.t.Fatalf("write %s: %v", line, err)
	}
}

// next returns the next frame, failing on timeout or end of output.
func (e *embedder) next() map[string]any {
	e.t.Helper()
	select {
	case f, ok := <-e.frames:
		if !ok {
			e.t.Fatalf("stdout ended; frames so far: %v", e.seen)
		}
		e.seen = append(e.seen, f["type"].(string))
		return f
	case <-e.ctx.Done():
		e.t.Fatalf("timed out; frames so far: %v", e.seen)
	}
	return nil
}

// TestHeadlessSubprocess drives the built binary exactly as an embedder
// would: hello, a prompt on the bundled replay demo, every approval
// answered, read to the last response_end, shutdown, exit 0.
func TestHeadlessSubprocess(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	ctx, cmd, stderr := headlessProcess(t, t.TempDir(), ws)
	stdin, stdout := proctest.StartPiped(t, cmd)
	frames, _ := readFrames(t, stdout)
	e := &embedder{t: t, ctx: ctx, stdin: stdin, frames: frames}

	if f := e.next(); f["type"] != "ready" || f["executor_type"] != "replay" {
		t.Fatalf("first frame = %v, want ready with executor_type replay", f)
	}
	if f := e.next(); f["type"] != "session_info" {
		t.Fatalf("second frame = %v, want session_info", f)
	}
	e.send(`{"type":"hello","protocol_version":"2026-04-02","client_info":{"name":"subprocess-test"},"capabilities":{"server_requests":["approval"]}}`)
	if f := e.next(); f["type"] != "hello_ok" || f["connection_id"] != "local" {
		t.Fatalf("answer to hello = %v, want hello_ok from connection local", f)
	}
	// The bundled demo plays one model turn per frame; its Write, Edit and
	// Bash calls need approval.
	demo := replay.Demo()
	wantApprovals := 0
	for _, fr := range demo.Frames {
		for _, st := range fr.Statements {
			if st.Kind == replay.KindToolCall && (st.Tool == "Write" || st.Tool == "Edit" || st.Tool == "Bash") {
				wantApprovals++
			}
		}
	}
	e.send(`{"type":"prompt","content":"show me what you can do"}`)
	ends, approvals := 0, 0
	for ends < len(demo.Frames) {
		f := e.next()
		switch f["type"] {
		case "server_request":
			if f["request_type"] != "approval" {
				t.Fatalf("unexpected server request %v", f)
			}
			approvals++
			e.send(fmt.Sprintf(`{"type":"server_request_response","request_id":%q,"request_type":"approval","approved":true}`, f["request_id"]))
		case "tool_end":
			if f["success"] != true {
				t.Errorf("tool call failed: %v", f)
			}
		case "response_end":
			ends++
		case "error":
			t.Fatalf("error frame: %v", f)
		}
	}
	if approvals != wantApprovals {
		t.Errorf("answered %d approvals, want %d", approvals, wantApprovals)
	}
	e.send(`{"type":"shutdown"}`)
	for f := range frames {
		t.Errorf("frame after shutdown: %v", f)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("maestro headless exited with %v\nstderr:\n%s", err, stderr.String())
	}
	if entries, err := os.ReadDir(ws); err != nil || len(entries) == 0 {
		t.Errorf("the approved writes left nothing in the workspace: %v", err)
	}
}

// TestHeadlessStdoutClosed: a client that closes its end of stdout
// mid-session does not kill Maestro with SIGPIPE (the process died of the
// signal, the run left unfinished in the session log): the session shuts
// down, its log ends with the aborted run, and the exit status is 1 with
// the reason on stderr.
func TestHeadlessStdoutClosed(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	_, cmd, stderr := headlessProcess(t, home, t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := startStdoutPipe(t, cmd)
	// ready and session_info come unasked: once both are read, the next
	// write is the prompt's, the one that must find stdout closed (closed
	// after ready alone, session_info's write failed first, now and then,
	// and the run never started).
	br := bufio.NewReader(r)
	for _, frame := range []string{`"type":"ready"`, `"type":"session_info"`} {
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, frame) {
			t.Fatalf("read %s: %q, %v", frame, line, err)
		}
	}
	r.Close()
	if _, err := io.WriteString(stdin, `{"type":"prompt","content":"hello"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	stdin.Close()
	wantBrokenPipeEnd(t, err, stderr, home)
}

// startStdoutPipe starts cmd with its stdout on a pipe and returns the
// read end, which the test closes to play a reader that goes away.
func startStdoutPipe(t *testing.T, cmd *exec.Cmd) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return r
}

// wantBrokenPipeEnd checks how a process whose stdout reader went away
// ended (err, from Wait): status 1 saying broken pipe, and the one session
// log under home ending the run as interrupted.
func wantBrokenPipeEnd(t *testing.T, err error, stderr *bytes.Buffer, home string) {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitError || !strings.Contains(stderr.String(), "broken pipe") {
		t.Fatalf("exit: %v, want status %d saying broken pipe; stderr:\n%s", err, ExitError, stderr.String())
	}
	logs, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "events.jsonl"))
	if len(logs) != 1 {
		t.Fatalf("session logs %v, want one", logs)
	}
	data, err := os.ReadFile(logs[0])
	if err != nil || !bytes.Contains(data, []byte(`"Operation aborted: the run was interrupted"`)) {
		t.Errorf("the session log does not end the run (%v):\n%s", err, data)
	}
}

// TestHeadlessStartupFailure: a client gets one fatal error message on
// stdout, the details go to stderr, and the exit status is non-zero.
func TestHeadlessStartupFailure(t *testing.T) {
	t.Parallel()
	badTools := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(badTools, []byte(`{"name":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	badName := filepath.Join(t.TempDir(), "names.json")
	if err := os.WriteFile(badName, []byte(`[{"name":"bad name!","description":"d","input_schema":{"type":"object"}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	twice := filepath.Join(t.TempDir(), "twice.json")
	if err := os.WriteFile(twice, []byte(`[{"name":"t"},{"name":"t"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"approval mode", []string{"--approval-mode", "sometimes"}, ExitUsage, `--approval-mode "sometimes": expected prompt, auto or fail`},
		{"missing scenario", []string{"--replay", "/nonexistent/scenario.yaml"}, ExitError, "load replay scenario"},
		{"client tools", []string{"--client-tools", badTools}, ExitUsage, "--client-tools"},
		{"workspace", []string{"--workspace", "/nonexistent/dir"}, ExitUsage, "--workspace"},
		// 0 is the flag's "not given": typed, it ran the default 50 calls.
		{"max iterations 0", []string{"--max-iterations", "0"}, ExitUsage, "--max-iterations must be positive, got 0"},
		{"max iterations -1", []string{"--max-iterations", "-1"}, ExitUsage, "--max-iterations must be positive, got -1"},
		// Cobra's refusals wrote nothing on stdout.
		{"unknown flag", []string{"--bogus"}, ExitUsage, "unknown flag: --bogus"},
		{"flag value", []string{"--max-iterations", "x"}, ExitUsage, `--max-iterations "x": expected a whole number`},
		{"argument", []string{"extra"}, ExitUsage, `unknown command "extra" for "maestro headless"`},
		// It said "cannot unmarshal object into Go value of type []runtime.ClientTool".
		{"client tools type", []string{"--client-tools", badTools}, ExitUsage, "expected a JSON array of {\"name\", \"description\", \"input_schema\"}, found JSON object"},
		// The runtime's checks of a tool exited 1, the file's other faults 2.
		{"client tool name", []string{"--client-tools", badName}, ExitUsage, `--client-tools: ` + badName + `: client tool "bad name!": a name is 1 to 64 letters`},
		{"client tool twice", []string{"--client-tools", twice}, ExitUsage, `client tool "t": the name is empty or already taken`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, nil, append([]string{"headless"}, tt.args...)...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d\nstderr: %s", r.code, tt.code, r.stderr)
			}
			frames := r.frames(t)
			if len(frames) != 1 {
				t.Fatalf("stdout has %d frames, want one fatal error:\n%s", len(frames), r.stdout)
			}
			f := frames[0]
			msg, _ := f["message"].(string)
			if f["type"] != "error" || f["fatal"] != true || f["error_type"] != "fatal" ||
				!strings.HasPrefix(msg, "Headless startup failed: ") || !strings.Contains(msg, tt.contains) {
				t.Errorf("stdout = %v, want a fatal error containing %q", f, tt.contains)
			}
			if !strings.Contains(r.stderr, tt.contains) {
				t.Errorf("stderr does not explain the failure: %q", r.stderr)
			}
		})
	}
}

// TestHeadlessLimitVariables: an attachment limit set to something other
// than a positive whole number is a start-up failure naming the variable;
// it fell back to the default in silence (10 MiB for 50MB, or 0).
func TestHeadlessLimitVariables(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"MAESTRO_HEADLESS_MAX_ATTACHMENT_BYTES", "MAESTRO_HEADLESS_MAX_TEXT_CHARS"} {
		for _, v := range []string{"50MB", "0", "-1"} {
			r := runCLI(t, map[string]string{name: v}, "headless", "--workspace", t.TempDir())
			frames := r.frames(t)
			want := fmt.Sprintf("%s %q: expected a positive whole number", name, v)
			if r.code != ExitUsage || len(frames) != 1 || frames[0]["fatal"] != true || !strings.Contains(fmt.Sprint(frames[0]["message"]), want) {
				t.Errorf("%s=%s: exit %d, stdout %v; want %d and a fatal error saying %s", name, v, r.code, frames, ExitUsage, want)
			}
		}
	}
}

// TestHeadlessEndOfInput: in-process, a hello then end of input is a clean
// exit 0 after the handshake, and the session is saved.
func TestHeadlessEndOfInput(t *testing.T) {
	t.Parallel()
	home, ws := t.TempDir(), t.TempDir()
	var stdout, stderr bytes.Buffer
	ios := &IOStreams{
		In:     strings.NewReader(`{"type":"hello","protocol_version":"2026-04-02"}` + "\n"),
		Out:    &stdout,
		ErrOut: &stderr,
		Getenv: func(k string) string {
			if k == "MAESTRO_HOME" {
				return home
			}
			return ""
		},
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if code := Run(ctx, ios, []string{"headless", "--workspace", ws}); code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr.String())
	}
	r := result{stdout: stdout.String()}
	var types []string
	for _, f := range r.frames(t) {
		types = append(types, f["type"].(string))
	}
	if got, want := strings.Join(types, " "), "ready session_info hello_ok connection_info"; got != want {
		t.Errorf("frames = %s, want %s", got, want)
	}
	sessions, err := filepath.Glob(filepath.Join(home, "sessions", "*", "events.jsonl"))
	if err != nil || len(sessions) != 1 {
		t.Fatalf("session logs = %v, %v; want one", sessions, err)
	}
	data, err := os.ReadFile(sessions[0])
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 4 {
		t.Errorf("session log has %d records, want the 4 frames:\n%s", n, data)
	}
}

// readFrames validates and decodes the frames a headless process writes
// to out, in the background; frames and done close at out's end.
func readFrames(t *testing.T, out io.Reader) (frames chan map[string]any, done chan struct{}) {
	v, err := validator()
	if err != nil {
		t.Fatal(err)
	}
	frames, done = make(chan map[string]any, 64), make(chan struct{})
	go func() {
		defer close(frames)
		defer close(done)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if err := v.ValidateServerFrame(sc.Bytes()); err != nil {
				t.Errorf("frame does not validate: %s: %v", sc.Text(), err)
			}
			var f map[string]any
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Errorf("stdout line is not JSON: %q", sc.Text())
				continue
			}
			frames <- f
		}
	}()
	return frames, done
}
