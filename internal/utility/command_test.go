package utility

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// run is what one command produced.
type run struct {
	started protocol.UtilityCommandStarted
	stdout  string
	stderr  string
	exited  protocol.UtilityCommandExited
}

// start starts a command and returns its started message.
func (f *fixture) start(t *testing.T, owner string, req protocol.UtilityCommandStart) protocol.UtilityCommandStarted {
	t.Helper()
	if err := f.m.CommandStart(t.Context(), owner, req); err != nil {
		t.Fatalf("CommandStart(%s): %v", req.CommandID, err)
	}
	started, _ := next(t, f.rec, func(m protocol.UtilityCommandStarted) bool { return m.CommandID == req.CommandID })
	return started
}

// ofCommand selects the output and exit messages of command id.
func ofCommand(id string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		switch m := m.(type) {
		case protocol.UtilityCommandOutput:
			return m.CommandID == id
		case protocol.UtilityCommandExited:
			return m.CommandID == id
		}
		return false
	}
}

// waitOutput consumes the command's output until the text so far
// contains want, and returns that text.
func (f *fixture) waitOutput(t *testing.T, id, want string) string {
	t.Helper()
	var text strings.Builder
	for !strings.Contains(text.String(), want) {
		msg, skipped := next(t, f.rec, ofCommand(id))
		if len(skipped) > 0 {
			t.Fatalf("unexpected messages while waiting for output of %s: %s", id, describe(skipped))
		}
		switch m := msg.(type) {
		case protocol.UtilityCommandOutput:
			text.WriteString(m.Content)
		case protocol.UtilityCommandExited:
			t.Fatalf("command %s exited (%+v) before printing %q; output: %q", id, m, want, text.String())
		}
	}
	return text.String()
}

// finish consumes the command's messages up to its exit.
func (f *fixture) finish(t *testing.T, id string) run {
	t.Helper()
	var r run
	for {
		msg, _ := next(t, f.rec, ofCommand(id))
		switch m := msg.(type) {
		case protocol.UtilityCommandOutput:
			if m.Stream == protocol.StreamStderr {
				r.stderr += m.Content
			} else {
				r.stdout += m.Content
			}
		case protocol.UtilityCommandExited:
			r.exited = m
			return r
		}
	}
}

func exitedWith(id string, code int) protocol.UtilityCommandExited {
	return protocol.UtilityCommandExited{CommandID: id, Success: code == 0, ExitCode: protocol.Some(code), Signal: protocol.Null[string]()}
}

func signalled(id, sig, reason string) protocol.UtilityCommandExited {
	return protocol.UtilityCommandExited{CommandID: id, ExitCode: protocol.Null[int](), Signal: protocol.Some(sig), Reason: reason}
}

func TestCommandPipe(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	started := f.start(t, "conn1", protocol.UtilityCommandStart{CommandID: "c1", Command: "echo out; echo err >&2; exit 3"})
	if started.PID == nil || *started.PID <= 0 {
		t.Errorf("started.pid = %v, want a pid", started.PID)
	}
	wantStarted := protocol.UtilityCommandStarted{CommandID: "c1", Command: "echo out; echo err >&2; exit 3", Cwd: f.dir,
		ShellMode: protocol.ShellModeShell, TerminalMode: protocol.TerminalPipe, PID: started.PID, OwnerConnectionID: "conn1"}
	if diff := cmp.Diff(wantStarted, started); diff != "" {
		t.Errorf("started mismatch (-want +got):\n%s", diff)
	}
	r := f.finish(t, "c1")
	if r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("stdout %q stderr %q, want %q %q", r.stdout, r.stderr, "out\n", "err\n")
	}
	if diff := cmp.Diff(exitedWith("c1", 3), r.exited); diff != "" {
		t.Errorf("exited mismatch (-want +got):\n%s", diff)
	}
	if cmds, _ := f.m.Snapshot(); len(cmds) != 0 {
		t.Errorf("Snapshot after exit = %+v, want none", cmds)
	}
	// Terminating a command that has exited is a no-op.
	if err := f.m.CommandTerminate("conn1", protocol.UtilityCommandTerminate{CommandID: "c1"}); err != nil {
		t.Errorf("CommandTerminate after exit: %v", err)
	}
}

func TestCommandDirectEnvCwd(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := os.Mkdir(filepath.Join(f.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		req        protocol.UtilityCommandStart
		wantStdout string
	}{
		{
			name:       "direct argv split",
			req:        protocol.UtilityCommandStart{Command: `printf '%s|' 'a b' "c d" e\ f "$HOME" ''`, ShellMode: protocol.ShellModeDirect},
			wantStdout: "a b|c d|e f|$HOME||",
		},
		{
			name:       "env overlay and cwd",
			req:        protocol.UtilityCommandStart{Command: `echo "$MAESTRO_UTILITY_TEST" && pwd`, Cwd: "sub", Env: map[string]string{"MAESTRO_UTILITY_TEST": "bar baz"}},
			wantStdout: "bar baz\n" + filepath.Join(f.dir, "sub") + "\n",
		},
		{
			name:       "absolute cwd inside",
			req:        protocol.UtilityCommandStart{Command: "pwd", Cwd: filepath.Join(f.dir, "sub")},
			wantStdout: filepath.Join(f.dir, "sub") + "\n",
		},
	}
	for i, tc := range tests {
		tc.req.CommandID = "c" + strconv.Itoa(i)
		f.start(t, "", tc.req)
		r := f.finish(t, tc.req.CommandID)
		if r.stdout != tc.wantStdout || r.stderr != "" {
			t.Errorf("%s: stdout %q stderr %q, want stdout %q", tc.name, r.stdout, r.stderr, tc.wantStdout)
		}
		if diff := cmp.Diff(exitedWith(tc.req.CommandID, 0), r.exited); diff != "" {
			t.Errorf("%s: exited mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestCommandMissingProgram(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	started := f.start(t, "", protocol.UtilityCommandStart{CommandID: "m", Command: "maestro-no-such-program-x --flag", ShellMode: protocol.ShellModeDirect})
	if started.PID != nil {
		t.Errorf("started.pid = %d for a program that never ran", *started.PID)
	}
	r := f.finish(t, "m")
	if r.exited.Success || !strings.Contains(r.exited.Reason, "executable file not found") {
		t.Errorf("exited = %+v, want a failure naming the missing executable", r.exited)
	}
}

func TestCommandStdin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Output streams before the command exits: it waits for input after
	// printing "ready".
	f.start(t, "A", protocol.UtilityCommandStart{CommandID: "s", Command: `echo ready; read line; echo "got $line"; cat`, AllowStdin: ptr(true)})
	f.waitOutput(t, "s", "ready\n")
	cmds, _ := f.m.Snapshot()
	if len(cmds) != 1 || cmds[0].Output != "ready\n" || cmds[0].CommandID != "s" || cmds[0].OwnerConnectionID != "A" {
		t.Errorf("Snapshot while running = %+v, want command s with output %q", cmds, "ready\n")
	}
	if err := f.m.CommandStdin("A", protocol.UtilityCommandStdin{CommandID: "s", Content: "hello\n"}); err != nil {
		t.Fatalf("CommandStdin: %v", err)
	}
	f.waitOutput(t, "s", "got hello\n")
	if err := f.m.CommandStdin("A", protocol.UtilityCommandStdin{CommandID: "s", Content: "tail", EOF: ptr(true)}); err != nil {
		t.Fatalf("CommandStdin eof: %v", err)
	}
	r := f.finish(t, "s")
	if r.stdout != "tail" {
		t.Errorf("stdout after eof = %q, want %q", r.stdout, "tail")
	}
	if diff := cmp.Diff(exitedWith("s", 0), r.exited); diff != "" {
		t.Errorf("exited mismatch (-want +got):\n%s", diff)
	}
}

func TestCommandStdinErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start(t, "A", protocol.UtilityCommandStart{CommandID: "closed", Command: "echo ready; sleep 60", AllowStdin: ptr(true)})
	f.start(t, "A", protocol.UtilityCommandStart{CommandID: "nostdin", Command: "sleep 60"})
	if err := f.m.CommandStdin("A", protocol.UtilityCommandStdin{CommandID: "closed", EOF: ptr(true)}); err != nil {
		t.Fatalf("CommandStdin eof: %v", err)
	}
	tests := []struct {
		owner string
		req   protocol.UtilityCommandStdin
		code  int
		text  string
	}{
		{"A", protocol.UtilityCommandStdin{CommandID: "nostdin", Content: "x"}, 400, "Utility command stdin is not enabled: nostdin"},
		{"A", protocol.UtilityCommandStdin{CommandID: "unknown", Content: "x"}, 404, "Utility command not found: unknown"},
		{"A", protocol.UtilityCommandStdin{CommandID: "closed", Content: "x"}, 400, "Utility command stdin is not writable: closed"},
		{"B", protocol.UtilityCommandStdin{CommandID: "closed", Content: "x"}, 403, "Headless command closed is owned by another connection"},
	}
	for _, tc := range tests {
		wantError(t, f.m.CommandStdin(tc.owner, tc.req), tc.code, tc.text)
	}
	// A second eof without content is a no-op.
	if err := f.m.CommandStdin("A", protocol.UtilityCommandStdin{CommandID: "closed", EOF: ptr(true)}); err != nil {
		t.Errorf("second eof: %v", err)
	}
}

// waitGone waits until process pid has ended.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if proctest.Alive(pid, waitTimeout) {
		t.Fatalf("process %d (in the command's group) still running", pid)
	}
}

func TestCommandTerminate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		force   bool
		want    func(id string) protocol.UtilityCommandExited
	}{
		{
			name:    "graceful",
			command: `sleep 60 & echo $! > child.pid; echo ready; wait`,
			want:    func(id string) protocol.UtilityCommandExited { return signalled(id, "SIGTERM", ReasonTerminated) },
		},
		{
			name:    "SIGTERM ignored, SIGKILL after the grace period",
			command: `trap '' TERM; sleep 60 & echo $! > child.pid; echo ready; wait; wait`,
			want:    func(id string) protocol.UtilityCommandExited { return signalled(id, "SIGKILL", ReasonTerminated) },
		},
		{
			name:    "force",
			command: `sleep 60 & echo $! > child.pid; echo ready; wait`,
			force:   true,
			want:    func(id string) protocol.UtilityCommandExited { return signalled(id, "SIGKILL", ReasonForceTerminated) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			started := f.start(t, "A", protocol.UtilityCommandStart{CommandID: "t", Command: tc.command})
			f.waitOutput(t, "t", "ready\n")
			if err := f.m.CommandTerminate("B", protocol.UtilityCommandTerminate{CommandID: "t"}); err != nil {
				wantError(t, err, 403, "Headless command t is owned by another connection")
			} else {
				t.Error("terminate by another connection succeeded")
			}
			if err := f.m.CommandTerminate("A", protocol.UtilityCommandTerminate{CommandID: "t", Force: ptr(tc.force)}); err != nil {
				t.Fatalf("CommandTerminate: %v", err)
			}
			r := f.finish(t, "t")
			if diff := cmp.Diff(tc.want("t"), r.exited); diff != "" {
				t.Errorf("exited mismatch (-want +got):\n%s", diff)
			}
			// The whole process group is gone: the background child too.
			data, err := os.ReadFile(filepath.Join(f.dir, "child.pid"))
			if err != nil {
				t.Fatal(err)
			}
			child, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			waitGone(t, child)
			waitGone(t, *started.PID)
			if live := proctest.Processes(t, func(p proctest.Process) bool { return p.Pgrp == *started.PID }); len(live) > 0 {
				t.Errorf("processes %v of the command's group are still alive", live)
			}
		})
	}
}

func TestCommandPTY(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	started := f.start(t, "A", protocol.UtilityCommandStart{
		CommandID: "p", Command: "stty size; read x; stty size", TerminalMode: protocol.TerminalPTY,
		Columns: ptr(100), Rows: ptr(40), AllowStdin: ptr(true),
	})
	if *started.Columns != 100 || *started.Rows != 40 || started.TerminalMode != protocol.TerminalPTY {
		t.Errorf("started = %+v, want a 100x40 pty", started)
	}
	f.waitOutput(t, "p", "40 100")
	if err := f.m.CommandResize("B", protocol.UtilityCommandResize{CommandID: "p", Columns: 1, Rows: 1}); err != nil {
		wantError(t, err, 403, "Headless command p is owned by another connection")
	} else {
		t.Error("resize by another connection succeeded")
	}
	if err := f.m.CommandResize("A", protocol.UtilityCommandResize{CommandID: "p", Columns: 120, Rows: 50}); err != nil {
		t.Fatalf("CommandResize: %v", err)
	}
	resized, _ := next(t, f.rec, func(m protocol.UtilityCommandResized) bool { return m.CommandID == "p" })
	if diff := cmp.Diff(protocol.UtilityCommandResized{CommandID: "p", Columns: 120, Rows: 50}, resized); diff != "" {
		t.Errorf("resized mismatch (-want +got):\n%s", diff)
	}
	cmds, _ := f.m.Snapshot()
	if len(cmds) != 1 || *cmds[0].Columns != 120 || *cmds[0].Rows != 50 {
		t.Errorf("Snapshot after resize = %+v, want 120x50", cmds)
	}
	if err := f.m.CommandStdin("A", protocol.UtilityCommandStdin{CommandID: "p", Content: "\n"}); err != nil {
		t.Fatalf("CommandStdin: %v", err)
	}
	r := f.finish(t, "p")
	if !strings.Contains(r.stdout, "50 120") || r.stderr != "" {
		t.Errorf("output after resize = %q (stderr %q), want the new size 50 120 on stdout", r.stdout, r.stderr)
	}
	if diff := cmp.Diff(exitedWith("p", 0), r.exited); diff != "" {
		t.Errorf("exited mismatch (-want +got):\n%s", diff)
	}
}

func TestCommandPTYDefaultsAndEOF(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	started := f.start(t, "", protocol.UtilityCommandStart{CommandID: "d", Command: "stty size; cat", TerminalMode: protocol.TerminalPTY, AllowStdin: ptr(true)})
	if *started.Columns != 80 || *started.Rows != 24 {
		t.Errorf("default size = %dx%d, want 80x24", *started.Columns, *started.Rows)
	}
	f.waitOutput(t, "d", "24 80")
	// A partial line then end of file: cat prints it and ends.
	if err := f.m.CommandStdin("", protocol.UtilityCommandStdin{CommandID: "d", Content: "abc", EOF: ptr(true)}); err != nil {
		t.Fatalf("CommandStdin: %v", err)
	}
	r := f.finish(t, "d")
	if !strings.Contains(r.stdout, "abc") {
		t.Errorf("output = %q, want the echoed input", r.stdout)
	}
	if diff := cmp.Diff(exitedWith("d", 0), r.exited); diff != "" {
		t.Errorf("exited mismatch (-want +got):\n%s", diff)
	}
}

func TestCommandStartErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	write(t, f.dir, "file.txt", "")
	f.start(t, "A", protocol.UtilityCommandStart{CommandID: "dup", Command: "sleep 60"})
	tests := []struct {
		name string
		req  protocol.UtilityCommandStart
		code int
		text string
	}{
		{"duplicate id", protocol.UtilityCommandStart{CommandID: "dup", Command: "true"}, 400, "Utility command already exists: dup"},
		{"empty command", protocol.UtilityCommandStart{Command: "  "}, 400, "command is required and cannot be empty"},
		{"control character", protocol.UtilityCommandStart{Command: "echo \x01"}, 400, "Command contains invalid control characters"},
		{"too long", protocol.UtilityCommandStart{Command: strings.Repeat("x", maxCommandLen+1)}, 400, "Command is longer than 100000 characters"},
		{"cwd outside", protocol.UtilityCommandStart{Command: "true", Cwd: "../outside"}, 403, "Path is outside workspace root: " + f.out},
		{"cwd absolute outside", protocol.UtilityCommandStart{Command: "true", Cwd: "/"}, 403, "Path is outside workspace root: /"},
		{"cwd missing", protocol.UtilityCommandStart{Command: "true", Cwd: "nodir"}, 404, "Working directory not found: nodir"},
		{"cwd is a file", protocol.UtilityCommandStart{Command: "true", Cwd: "file.txt"}, 400, "Working directory is not a directory: file.txt"},
		{"cwd control character", protocol.UtilityCommandStart{Command: "true", Cwd: "a\x02"}, 400, "Working directory contains invalid characters"},
		{"env key with =", protocol.UtilityCommandStart{Command: "true", Env: map[string]string{"A=B": "x"}}, 400, "Environment variable A=B contains invalid characters"},
		{"env value control", protocol.UtilityCommandStart{Command: "true", Env: map[string]string{"A": "x\x1b"}}, 400, "Environment variable A contains invalid characters"},
		{"env empty key", protocol.UtilityCommandStart{Command: "true", Env: map[string]string{"": "x"}}, 400, "environment variable key is required and cannot be empty"},
		{"env value too long", protocol.UtilityCommandStart{Command: "true", Env: map[string]string{"A": strings.Repeat("x", maxEnvValueLen+1)}}, 400,
			"Environment variable A is too long (key at most 256, value at most 32768 characters)"},
		{"size with pipe", protocol.UtilityCommandStart{Command: "true", Columns: ptr(80)}, 400, "Utility command columns and rows require terminal_mode=pty"},
		{"pty columns", protocol.UtilityCommandStart{Command: "true", TerminalMode: protocol.TerminalPTY, Columns: ptr(0)}, 400, "Utility command columns must be a positive integer"},
		{"pty rows", protocol.UtilityCommandStart{Command: "true", TerminalMode: protocol.TerminalPTY, Rows: ptr(-1)}, 400, "Utility command rows must be a positive integer"},
		{"unterminated quote", protocol.UtilityCommandStart{Command: `echo "a`, ShellMode: protocol.ShellModeDirect}, 400, "Command contains unterminated quotes"},
		{"unfinished escape", protocol.UtilityCommandStart{Command: `echo a\`, ShellMode: protocol.ShellModeDirect}, 400, "Command ends with unfinished escape sequence"},
	}
	for i, tc := range tests {
		if tc.req.CommandID == "" {
			tc.req.CommandID = "e" + strconv.Itoa(i)
		}
		err := f.m.CommandStart(t.Context(), "A", tc.req)
		t.Run(tc.name, func(t *testing.T) { wantError(t, err, tc.code, tc.text) })
	}
	cmds, _ := f.m.Snapshot()
	if len(cmds) != 1 || cmds[0].CommandID != "dup" {
		t.Errorf("Snapshot = %+v, want only the first command", cmds)
	}
	for _, msg := range f.rec.messages() {
		if s, ok := msg.(protocol.UtilityCommandStarted); ok && s.CommandID != "dup" {
			t.Errorf("a refused command was announced: %+v", s)
		}
	}
	// Resize and terminate errors.
	wantError(t, f.m.CommandResize("A", protocol.UtilityCommandResize{CommandID: "dup", Columns: 10, Rows: 10}), 400,
		"Utility command resize is only supported for PTY commands: dup")
	wantError(t, f.m.CommandResize("A", protocol.UtilityCommandResize{CommandID: "nope", Columns: 10, Rows: 10}), 404,
		"Utility command not found: nope")
	if err := f.m.CommandTerminate("A", protocol.UtilityCommandTerminate{CommandID: "nope"}); err != nil {
		t.Errorf("terminating an unknown command: %v, want a no-op", err)
	}
}

func TestSplitArgv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want []string
		err  string
	}{
		{"ls -la", []string{"ls", "-la"}, ""},
		{"  a\t b\n c  ", []string{"a", "b", "c"}, ""},
		{`echo 'a b' "c d"`, []string{"echo", "a b", "c d"}, ""},
		{`a'b'"c"d`, []string{"abcd"}, ""},
		{`'it''s'`, []string{"its"}, ""},
		{`"a\"b" 'c\d'`, []string{`a"b`, `c\d`}, ""},
		{`a\ b \$x`, []string{"a b", "$x"}, ""},
		{`x | y; $HOME`, []string{"x", "|", "y;", "$HOME"}, ""},
		{`'' x`, []string{"", "x"}, ""},
		{`"é ü" ✓`, []string{"é ü", "✓"}, ""},
		{`'open`, nil, "Command contains unterminated quotes"},
		{`"open`, nil, "Command contains unterminated quotes"},
		{`end\`, nil, "Command ends with unfinished escape sequence"},
		{`   `, nil, "Command must contain an executable to run"},
	}
	for _, tc := range tests {
		got, e := splitArgv(tc.line)
		if tc.err != "" {
			if e == nil || e.Message != tc.err {
				t.Errorf("splitArgv(%q) error = %v, want %q", tc.line, e, tc.err)
			}
			continue
		}
		if e != nil {
			t.Errorf("splitArgv(%q): %v", tc.line, e)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("splitArgv(%q) mismatch (-want +got):\n%s", tc.line, diff)
		}
	}
}

func TestUTF8Chunker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"ascii", []string{"ab", "c"}, []string{"ab", "c"}},
		{"two-byte split", []string{"a\xc3", "\xa9b"}, []string{"a", "éb"}},
		{"four-byte split thrice", []string{"\xf0\x9f", "\x98", "\x80!"}, []string{"", "", "😀!"}},
		{"invalid byte", []string{"a\xffb"}, []string{"a\uFFFDb"}},
		{"truncated at end", []string{"x\xe2\x82"}, []string{"x", "\uFFFD\uFFFD"}},
	}
	for _, tc := range tests {
		var c utf8Chunker
		var got []string
		for _, ch := range tc.chunks {
			got = append(got, c.chunk([]byte(ch)))
		}
		if rest := c.flush(); rest != "" {
			got = append(got, rest)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: chunks mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	var b tailBuffer
	b.add(strings.Repeat("a", 20000))
	b.add(strings.Repeat("é", 20000))
	got := b.String()
	want := strings.Repeat("a", protocol.MaxActiveCommandOutput-20000) + strings.Repeat("é", 20000)
	if got != want {
		t.Errorf("tail has %d characters (%d bytes), want the last %d characters", len([]rune(got)), len(got), protocol.MaxActiveCommandOutput)
	}
	var small tailBuffer
	small.add("hello ")
	small.add("world")
	if small.String() != "hello world" {
		t.Errorf("small buffer = %q", small.String())
	}
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestSandboxDecisionLogged checks that running commands outside the
// sandbox is logged, once.
func TestSandboxDecisionLogged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := &countingHandler{}
	f.m.log = slog.New(h)
	for _, id := range []string{"a", "b"} {
		f.start(t, "", protocol.UtilityCommandStart{CommandID: id, Command: "true"})
		f.finish(t, id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, "without the sandbox") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("sandbox decision logged %d times, want once; log: %q", n, h.msgs)
	}
}
