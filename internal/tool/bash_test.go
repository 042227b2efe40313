package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/sandbox/sandboxtest"
)

// bashKinds builds one sandbox of each kind (bwrap skips loudly, or fails
// with CI=true, when bubblewrap is unavailable).
var bashKinds = []struct {
	name string
	new  func(t *testing.T) *sandbox.Sandbox
}{
	{"bwrap", func(t *testing.T) *sandbox.Sandbox { return sandboxtest.Bwrap(t, sandbox.Config{}) }},
	{"landlock", func(t *testing.T) *sandbox.Sandbox { return sandboxtest.Landlock(t, sandbox.Config{}) }},
	{"off", func(t *testing.T) *sandbox.Sandbox { return sandboxtest.Off(t, sandbox.Config{}) }},
}

// bashCall runs the tool with a JSON input and a bounded context.
func bashCall(t *testing.T, tl Tool, input string, output func(string)) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return tl.Run(ctx, Call{ID: "call-1", Input: json.RawMessage(input), Output: output})
}

func bashInput(command string, timeout int) string {
	in, _ := json.Marshal(BashInput{Command: command, TimeoutSeconds: timeout})
	return string(in)
}

func TestBashSpec(t *testing.T) {
	t.Parallel()
	tl := NewBash(sandboxtest.Landlock(t, sandbox.Config{}), t.TempDir(), BashOptions{})
	spec := tl.Spec()
	if spec.Name != "Bash" || tl.ReadOnly() {
		t.Errorf("Bash spec name %q, read-only %v", spec.Name, tl.ReadOnly())
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(spec.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if _, ok := schema.Properties["timeout_seconds"]; !ok || len(schema.Properties) != 2 {
		t.Errorf("schema properties = %v", schema.Properties)
	}
	if diff := cmp.Diff([]string{"command"}, schema.Required); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	for _, want := range []string{"Sandboxed (Landlock)", "TCP connections are blocked", "Package installs"} {
		if !strings.Contains(spec.Description, want) {
			t.Errorf("landlock description lacks %q: %s", want, spec.Description)
		}
	}
	if strings.Contains(spec.Description, "Allowed commands") {
		t.Errorf("landlock description names an allowlist nobody configured: %s", spec.Description)
	}
	off := NewBash(sandboxtest.Off(t, sandbox.Config{}), t.TempDir(), BashOptions{AllowedCommands: []string{"echo"}})
	if d := off.Spec().Description; !strings.HasSuffix(d, "Allowed commands: echo.") || strings.Contains(d, "Sandboxed") {
		t.Errorf("off description with an allowlist: %s", d)
	}
}

func TestBashResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		want    Result
	}{
		{"output", `printf 'a\nb\n'`, Result{Content: "a\nb\n"}},
		{"no output", "true", Result{Content: "(no output)"}},
		{"interleaved exit code", "echo out; echo err >&2; echo out2; exit 3", Result{Content: "out\nerr\nout2\nexit code 3", IsError: true}},
		{"no trailing newline", "printf x; false", Result{Content: "x\nexit code 1", IsError: true}},
		// A shell's 128+N names the signal (a limit's: SIGXCPU, SIGXFSZ,
		// SIGKILL); it was only "exit code 137", as bwrap reports its
		// shell killed by a signal.
		{"killed by a signal", "{ sh -c 'kill -9 $$'; } 2>/dev/null; exit $?", Result{Content: "exit code 137 (a command killed by signal 9: killed)", IsError: true}},
		{"policy", "pip install requests", Result{IsError: true}},
	}
	for _, kind := range bashKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			tl := NewBash(kind.new(t), t.TempDir(), BashOptions{})
			for _, tt := range tests {
				got, err := bashCall(t, tl, bashInput(tt.command, 0), nil)
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if tt.name == "policy" {
					if !got.IsError || !strings.Contains(got.Content, "packages cannot be installed") {
						t.Errorf("%s: %+v, want an error result about package installs", tt.name, got)
					}
					continue
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", tt.name, diff)
				}
			}
		})
	}
}

func TestBashLandlockDenials(t *testing.T) {
	t.Parallel()
	tl := NewBash(sandboxtest.Landlock(t, sandbox.Config{}), t.TempDir(), BashOptions{})
	for command, want := range map[string]string{
		"cat /etc/shadow":           "Permission denied",
		"touch /etc/maestro-x":      "Permission denied",
		"ls -la && cat missing.txt": "exit code 1",
	} {
		got, err := bashCall(t, tl, bashInput(command, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !got.IsError || !strings.Contains(got.Content, want) {
			t.Errorf("%s: %+v, want an error result containing %q", command, got, want)
		}
	}
}

func TestBashAllowedCommandsOverride(t *testing.T) {
	t.Parallel()
	tl := NewBash(sandboxtest.Bwrap(t, sandbox.Config{}), t.TempDir(), BashOptions{AllowedCommands: []string{"echo", "cat"}})
	got, err := bashCall(t, tl, bashInput("echo hi | cat", 0), nil)
	if err != nil || got != (Result{Content: "hi\n"}) {
		t.Errorf("allowed command: %+v, %v", got, err)
	}
	got, err = bashCall(t, tl, bashInput("ls", 0), nil)
	if err != nil || !got.IsError || !strings.Contains(got.Content, "Allowed commands: echo, cat") {
		t.Errorf("ls with allowlist [echo cat]: %+v, %v", got, err)
	}
}

// TestBashUnavailable: with no sandbox available, auto mode refuses
// commands with a result that says how to get one.
func TestBashUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := sandbox.New(ctx, sandbox.Config{BwrapPath: "/nonexistent/bwrap"})
	if err != nil {
		t.Fatal(err)
	}
	tl := NewBash(sb, t.TempDir(), BashOptions{})
	got, err := bashCall(t, tl, bashInput("echo hi", 0), nil)
	if err != nil || !got.IsError || !strings.Contains(got.Content, "Bash is unavailable") || !strings.Contains(got.Content, "--sandbox off") {
		t.Errorf("echo hi without a sandbox: %+v, %v; want a refusal", got, err)
	}
	if d := tl.Spec().Description; !strings.Contains(d, "Unavailable") {
		t.Errorf("description without a sandbox: %s", d)
	}
}

func TestBashInvalidInput(t *testing.T) {
	t.Parallel()
	tl := NewBash(sandboxtest.Off(t, sandbox.Config{}), t.TempDir(), BashOptions{})
	for input, want := range map[string]string{
		`{"command":""}`:                            "command is required",
		`{"command":"  "}`:                          "command is required",
		`{"command":"ls","timeout_seconds":601}`:    "timeout_seconds must be between 1 and 600",
		`{"command":"ls","timeout_seconds":-1}`:     "timeout_seconds must be between 1 and 600",
		`{"command":"ls","timeout":5}`:              "invalid input",
		`{"command":"ls","timeout_seconds":"five"}`: "invalid input",
	} {
		got, err := bashCall(t, tl, input, nil)
		if err != nil || !got.IsError || !strings.Contains(got.Content, want) {
			t.Errorf("%s: %+v, %v; want an error result containing %q", input, got, err, want)
		}
	}
}

// TestBashTimeout: a command that outlives its timeout is killed; the
// result keeps its output and says so. The call returns after at least
// the timeout and long before the command's sleep would end: the tool
// waits neither for the command nor for the sleep, which holds the output
// pipe. The bound is not the timeout plus a little: starting and tearing
// down the sandbox is CPU work that takes seconds on a loaded machine
// (5.5 s for a 1 s timeout at 5 % of a core). For the same reason the
// start-up can take the whole timeout before the command runs: when the
// command's output never streamed, the call is repeated with twice the
// timeout (up to 8 s).
func TestBashTimeout(t *testing.T) {
	t.Parallel()
	const sleep = 60 * time.Second
	for _, kind := range bashKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			tl := NewBash(kind.new(t), t.TempDir(), BashOptions{})
			for timeout := 1; ; timeout *= 2 {
				streamed := newChunkRecorder("begin")
				start := time.Now()
				got, err := bashCall(t, tl, bashInput(fmt.Sprintf("echo begin; sleep %d", int(sleep/time.Second)), timeout), streamed.emit)
				elapsed := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(streamed.String(), "begin") && timeout < 8 {
					t.Logf("the command had not run when its %d s timeout ended it (sandbox start-up; the call took %s): %+v", timeout, elapsed, got)
					continue
				}
				want := Result{Content: fmt.Sprintf("begin\ncommand timed out after %ds", timeout), IsError: true, Code: CodeTimeout}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("timeout result (-want +got):\n%s", diff)
				}
				if limit := time.Duration(timeout) * time.Second; elapsed < limit || elapsed > sleep/2 {
					t.Errorf("a %s timeout of a %s sleep took %s", limit, sleep, elapsed)
				}
				return
			}
		})
	}
}

// chunkRecorder collects partial output and signals when it contains a
// string.
type chunkRecorder struct {
	mu     sync.Mutex
	text   strings.Builder
	chunks int
	want   string
	seen   chan struct{}
	once   sync.Once
}

func newChunkRecorder(want string) *chunkRecorder {
	return &chunkRecorder{want: want, seen: make(chan struct{})}
}

func (r *chunkRecorder) emit(chunk string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks++
	r.text.WriteString(chunk)
	if strings.Contains(r.text.String(), r.want) {
		r.once.Do(func() { close(r.seen) })
	}
}

func (r *chunkRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.text.String()
}

func (r *chunkRecorder) await(t *testing.T) {
	t.Helper()
	select {
	case <-r.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("partial output never contained %q (got %q)", r.want, r.String())
	}
}

func TestBashStreamsPartialOutput(t *testing.T) {
	t.Parallel()
	for _, kind := range bashKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			fifo := filepath.Join(ws, "gate")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			tl := NewBash(kind.new(t), ws, BashOptions{})
			rec := newChunkRecorder("first\n")
			type outcome struct {
				res Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := bashCall(t, tl, bashInput("echo first; read line < gate; echo \"second $line\"", 0), rec.emit)
				done <- outcome{res, err}
			}()
			rec.await(t) // the command is now blocked on the fifo
			select {
			case o := <-done:
				t.Fatalf("the command ended before the test opened the gate: %+v", o)
			default:
			}
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("go\n"); err != nil {
				t.Fatal(err)
			}
			f.Close()
			var o outcome
			select {
			case o = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the command did not finish after the gate opened")
			}
			if o.err != nil || o.res != (Result{Content: "first\nsecond go\n"}) {
				t.Errorf("result %+v, %v", o.res, o.err)
			}
			if got := rec.String(); got != "first\nsecond go\n" {
				t.Errorf("streamed %q", got)
			}
		})
	}
}

// pidfd refers to a process; it becomes readable when the process exits.
type pidfd int

func openPidfd(t *testing.T, pid int) (pidfd, bool) {
	t.Helper()
	const sysPidfdOpen = 434 // same number on every Linux architecture
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return -1, false // already gone
	}
	if errno != 0 {
		t.Fatalf("pidfd_open(%d): %v", pid, errno)
	}
	t.Cleanup(func() { syscall.Close(int(fd)) })
	return pidfd(fd), true
}

// exited waits up to timeout for the process to exit.
func (p pidfd) exited(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		var set syscall.FdSet
		set.Bits[int(p)/64] |= 1 << (uint(p) % 64)
		tv := syscall.NsecToTimeval(time.Until(deadline).Nanoseconds())
		n, err := syscall.Select(int(p)+1, &set, nil, nil, &tv)
		if errors.Is(err, syscall.EINTR) && time.Now().Before(deadline) {
			continue
		}
		return err == nil && n > 0
	}
}

func TestBashCancellationKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	for i, kind := range bashKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			marker := fmt.Sprintf("30.%d%03d", os.Getpid(), i)
			command := fmt.Sprintf("sleep %s & while ! grep -q %s /proc/$!/cmdline 2>/dev/null; do :; done; echo started; wait", marker, marker)
			if kind.name == "landlock" {
				// /proc is closed under Landlock; give sleep time to start.
				command = fmt.Sprintf("sleep %s & sleep 0.3; echo started; wait", marker)
			}
			tl := NewBash(kind.new(t), t.TempDir(), BashOptions{})
			rec := newChunkRecorder("started")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type outcome struct {
				res Result
				err error
				at  time.Time
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := tl.Run(ctx, Call{Input: json.RawMessage(bashInput(command, 0)), Output: rec.emit})
				done <- outcome{res, err, time.Now()}
			}()
			rec.await(t)
			pids := proctest.Processes(t, func(p proctest.Process) bool {
				return p.PID != os.Getpid() && proctest.CommandLineHas(p.PID, marker)
			})
			var fds []pidfd
			for _, pid := range pids {
				if fd, ok := openPidfd(t, pid); ok {
					fds = append(fds, fd)
				}
			}
			if len(fds) == 0 {
				t.Fatalf("no running process has %s in its command line", marker)
			}
			cancelled := time.Now()
			cancel()
			var o outcome
			select {
			case o = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after cancellation")
			}
			if took := o.at.Sub(cancelled); took > time.Second {
				t.Errorf("Run returned %s after cancellation, want < 1s", took)
			}
			if !errors.Is(o.err, context.Canceled) {
				t.Errorf("Run error = %v (result %+v), want context.Canceled", o.err, o.res)
			}
			for i, fd := range fds {
				if !fd.exited(2 * time.Second) {
					t.Errorf("process %d (%s) is still running after cancellation", pids[i], marker)
				}
			}
		})
	}
}

func TestBashKillsLeftoverBackgroundProcesses(t *testing.T) {
	t.Parallel()
	tl := NewBash(sandboxtest.Off(t, sandbox.Config{}), t.TempDir(), BashOptions{})
	got, err := bashCall(t, tl, bashInput("sleep 30 > /dev/null 2>&1 & echo $!", 0), nil)
	if err != nil || got.IsError {
		t.Fatalf("%+v, %v", got, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(got.Content))
	if err != nil {
		t.Fatalf("output %q is not a pid", got.Content)
	}
	if fd, alive := openPidfd(t, pid); alive && !fd.exited(2*time.Second) {
		t.Errorf("background process %d outlived its Bash call", pid)
	}
}

func TestBashOutputCap(t *testing.T) {
	t.Parallel()
	var full strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	all := full.String()
	want := all[:BashMaxOutputBytes/2] +
		fmt.Sprintf("\n[output truncated: %d bytes omitted]\n", len(all)-BashMaxOutputBytes) +
		all[len(all)-BashMaxOutputBytes/2:]

	for _, kind := range bashKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			tl := NewBash(kind.new(t), t.TempDir(), BashOptions{})
			var streamed strings.Builder
			got, err := bashCall(t, tl, bashInput("seq 1 100000", 0), func(s string) { streamed.WriteString(s) })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(Result{Content: want}, got); diff != "" {
				t.Errorf("capped result (-want +got):\n%s", diff)
			}
			if streamed.String() != all {
				t.Errorf("streamed %d bytes, want the whole %d", streamed.Len(), len(all))
			}
		})
	}
}

func TestBashOutputUTF8AndStreamCap(t *testing.T) {
	t.Parallel()
	var chunks []string
	o := newBashOutput(func(s string) { chunks = append(chunks, s) })
	text := []byte("héllo wörld ✓ 𝄞 end")
	for _, b := range text {
		o.Write([]byte{b}) // one byte at a time splits every multi-byte rune
	}
	o.flush()
	for _, c := range chunks {
		if !utf8.ValidString(c) {
			t.Errorf("emitted chunk %q is not valid UTF-8", c)
		}
	}
	if got := strings.Join(chunks, ""); got != string(text) {
		t.Errorf("streamed %q, want %q", got, text)
	}
	if got := o.String(); got != string(text) {
		t.Errorf("String() = %q", got)
	}

	// Truncation on rune boundaries: 3-byte runes across the cut.
	o = newBashOutput(nil)
	o.Write([]byte(strings.Repeat("✓", BashMaxOutputBytes)))
	got := o.String()
	if !utf8.ValidString(got) || !strings.Contains(got, "bytes omitted]") {
		t.Errorf("truncated multi-byte output is invalid or lacks the notice: %q…", got[:40])
	}

	// The stream stops at its cap.
	var streamed int
	var notices int
	o = newBashOutput(func(s string) {
		if strings.Contains(s, "[partial output stopped") {
			notices++
			return
		}
		streamed += len(s)
	})
	block := bytes.Repeat([]byte("x"), 64<<10)
	for range 40 {
		o.Write(block)
	}
	o.flush()
	if streamed != BashMaxStreamBytes || notices != 1 {
		t.Errorf("streamed %d bytes with %d notices, want %d and 1", streamed, notices, BashMaxStreamBytes)
	}
}

func TestBashOutputHeadAndTail(t *testing.T) {
	t.Parallel()
	for _, total := range []int{0, 10, BashMaxOutputBytes - 1, BashMaxOutputBytes, BashMaxOutputBytes + 1, 100_003} {
		data := make([]byte, total)
		for i := range data {
			data[i] = 'a' + byte(i%26)
		}
		want := string(data)
		if total > BashMaxOutputBytes {
			half := BashMaxOutputBytes / 2
			want = string(data[:half]) + fmt.Sprintf("\n[output truncated: %d bytes omitted]\n", total-2*half) + string(data[total-half:])
		}
		for _, size := range []int{1, 7, 4096, BashMaxOutputBytes / 2, BashMaxOutputBytes/2 + 1, 40_000} {
			o := newBashOutput(nil)
			for rest := data; len(rest) > 0; {
				k := min(size, len(rest))
				o.Write(rest[:k])
				rest = rest[k:]
			}
			if got := o.String(); got != want {
				t.Errorf("total %d in writes of %d: String() differs (len %d, want %d)", total, size, len(got), len(want))
			}
		}
	}
}

func BenchmarkBashOutputWrite(b *testing.B) {
	block := bytes.Repeat([]byte("0123456789abcdef\n"), 2000)
	for b.Loop() {
		o := newBashOutput(func(string) {})
		for range 100 {
			o.Write(block)
		}
		_ = o.String()
	}
}

// BenchmarkBashRun measures one trivial call per sandbox kind; compare
// bwrap and landlock against off (the baseline: bash alone).
func BenchmarkBashRun(b *testing.B) {
	kinds := map[string]func(testing.TB, sandbox.Config) *sandbox.Sandbox{
		"off": sandboxtest.Off, "landlock": sandboxtest.Landlock, "bwrap": sandboxtest.Bwrap,
	}
	for _, name := range []string{"off", "landlock", "bwrap"} {
		b.Run(name, func(b *testing.B) {
			tl := NewBash(kinds[name](b, sandbox.Config{}), b.TempDir(), BashOptions{})
			input := json.RawMessage(bashInput("echo hi", 0))
			for b.Loop() {
				res, err := tl.Run(context.Background(), Call{Input: input})
				if err != nil || res.IsError {
					b.Fatal(res, err)
				}
			}
		})
	}
}
