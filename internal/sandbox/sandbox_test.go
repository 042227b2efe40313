package sandbox

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Mode
		wantErr string
	}{
		{"", ModeAuto, ""},
		{"auto", ModeAuto, ""},
		{"always", ModeBwrap, ""},
		{"bwrap", ModeBwrap, ""},
		{"Landlock", ModeLandlock, ""},
		{" OFF ", ModeOff, ""},
		{"on", "", `invalid sandbox mode "on": valid modes are auto, bwrap, landlock and off (always is accepted for bwrap)`},
		{"fallback", "", "valid modes are auto, bwrap, landlock and off"},
		{strings.Repeat("x", 10000), "", `invalid sandbox mode "` + strings.Repeat("x", 64) + `…"`},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseMode(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNewAlwaysFailsClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "failing-bwrap")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", "/nonexistent/bwrap",
			"bubblewrap is required by sandbox mode bwrap but bwrap was not found at /nonexistent/bwrap; install it (apt-get install bubblewrap), or use --sandbox landlock or auto"},
		{"not executable", notExec, "is not an executable file; install it (apt-get install bubblewrap)"},
		{"failing", failing, "No permissions to create new namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb, err := New(testContext(t), Config{Mode: ModeBwrap, BwrapPath: tt.path})
			if err == nil {
				t.Fatalf("New(bwrap, %s) = %s sandbox, want an error", tt.path, sb.Kind())
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New(bwrap, %s) error = %q, want it to contain %q", tt.path, err, tt.want)
			}
		})
	}
}

// TestNewAutoWithoutSandboxRefusesBash: with neither bubblewrap nor a
// helper for Landlock, auto does not run commands unconfined: it refuses
// them with a message saying how to get a sandbox.
func TestNewAutoWithoutSandboxRefusesBash(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	sb, err := New(testContext(t), Config{
		Mode: ModeAuto, BwrapPath: "/nonexistent/bwrap",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Kind() != KindUnavailable {
		t.Fatalf("Kind() = %q, want unavailable", sb.Kind())
	}
	_, err = sb.Command(testContext(t), t.TempDir(), "echo hi", CommandOptions{})
	ue, ok := errors.AsType[*UnavailableError](err)
	if !ok {
		t.Fatalf("Command error = %v, want an *UnavailableError", err)
	}
	for _, want := range []string{"not found at /nonexistent/bwrap", "apt-get install bubblewrap", "Landlock", "--sandbox off"} {
		if !strings.Contains(ue.Error(), want) {
			t.Errorf("refusal %q lacks %q", ue.Error(), want)
		}
	}
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "unavailable") {
		t.Errorf("log = %q, want an error that Bash is unavailable", got)
	}
	if n := sb.Notice(); !strings.HasPrefix(n, "Bash is unavailable, every command will be refused: ") || !strings.Contains(n, "not found at /nonexistent/bwrap") {
		t.Errorf("Notice() = %q, want the refusal and its reason for the terminal", n)
	}
}

// TestBwrapNotFoundThroughPath: bubblewrap is looked for at its system
// paths, not in PATH, so a PATH without it does not downgrade the sandbox
// and a bwrap planted first in PATH is not run.
func TestBwrapNotFoundThroughPath(t *testing.T) {
	dir := t.TempDir()
	planted := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(planted, []byte("#!/bin/sh\ntouch "+filepath.Join(dir, "ran")+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	_, _, err := probeBwrap(testContext(t), "", "/bin/sh")
	if _, statErr := os.Stat(filepath.Join(dir, "ran")); statErr == nil {
		t.Fatalf("probeBwrap ran the bwrap planted in PATH")
	}
	var system string
	for _, p := range bwrapSystemPaths() {
		if _, err := os.Stat(p); err == nil {
			system = p
			break
		}
	}
	if system == "" {
		if err == nil || !strings.Contains(err.Error(), "PATH is not searched") {
			t.Fatalf("probeBwrap without a system bwrap: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("probeBwrap with PATH=%s and bubblewrap at %s: %v; want it found at its system path", dir, system, err)
	}
}

func TestNewOffLogsDecision(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	sb, err := New(testContext(t), Config{Mode: ModeOff, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Kind() != KindOff {
		t.Fatalf("Kind() = %q, want off", sb.Kind())
	}
	if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "mode off") {
		t.Errorf("log = %q, want a warning that isolation is off", got)
	}
}

func TestNewRejectsBadMode(t *testing.T) {
	t.Parallel()
	if _, err := New(testContext(t), Config{Mode: "sometimes"}); err == nil || !strings.Contains(err.Error(), "valid modes are auto, bwrap, landlock and off") {
		t.Fatalf("New(sometimes) error = %v", err)
	}
}

// TestBwrapArgv pins the exact argument list documented in docs/sandbox.md.
func TestBwrapArgv(t *testing.T) {
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "Europe/Paris")
	t.Setenv("MAESTRO_ALLOWED_VAR", "passed")
	t.Setenv("MAESTRO_SECRET_VAR", "hidden")
	ws := workspace{path: "/work/ws", real: "/data/ws"}
	sb := &Sandbox{
		kind: KindBwrap, bwrap: "/usr/bin/bwrap", shell: "/usr/bin/bash",
		systemArgs: []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin"},
		envAllow:   []string{"MAESTRO_ALLOWED_*"},
	}
	base := []string{
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
	}
	tail := []string{
		"--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
		"--bind", "/data/ws", "/work/ws", "--chdir", "/work/ws",
		"--remount-ro", "/", "--clearenv",
		"--setenv", "EXTRA", "1",
		"--setenv", "HOME", "/work/ws",
		"--setenv", "LANG", "C.UTF-8",
		"--setenv", "MAESTRO_ALLOWED_VAR", "passed",
		"--setenv", "PATH", sandboxPath,
		"--setenv", "PYTHONUNBUFFERED", "1",
		"--setenv", "TMPDIR", "/tmp",
		"--setenv", "TZ", "Europe/Paris",
		"--", "/usr/bin/bash", "-c", "echo hi",
	}
	want := append([]string{"--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"}, base...)
	want = append(want, tail...)
	if diff := cmp.Diff(want, sb.bwrapArgs(ws, "echo hi", map[string]string{"EXTRA": "1"})); diff != "" {
		t.Errorf("bwrapArgs without network (-want +got):\n%s", diff)
	}

	sb.network = true
	want = append([]string{"--die-with-parent", "--new-session", "--unshare-all", "--share-net", "--cap-drop", "ALL"}, base...)
	for _, e := range networkEtcEntries {
		want = append(want, "--ro-bind-try", e, e)
	}
	want = append(want, tail...)
	if diff := cmp.Diff(want, sb.bwrapArgs(ws, "echo hi", map[string]string{"EXTRA": "1"})); diff != "" {
		t.Errorf("bwrapArgs with network (-want +got):\n%s", diff)
	}
}

func TestSystemBindsFollowHostLayout(t *testing.T) {
	t.Parallel()
	args := systemBinds()
	if diff := cmp.Diff([]string{"--ro-bind", "/usr", "/usr"}, args[:3]); diff != "" {
		t.Errorf("systemBinds must start by binding /usr (-want +got):\n%s", diff)
	}
	for _, d := range systemLinkDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		joined := " " + strings.Join(args, " ") + " "
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(d)
			if !strings.Contains(joined, " --symlink "+target+" "+d+" ") {
				t.Errorf("%s is a symlink to %s on the host but systemBinds has %v", d, target, args)
			}
		} else if !strings.Contains(joined, " --ro-bind "+d+" "+d+" ") {
			t.Errorf("%s is a directory on the host but systemBinds has %v", d, args)
		}
	}
}

func TestResolveWorkdir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "relative/dir", "/", file, filepath.Join(dir, "missing")} {
		if _, err := resolveWorkdir(bad); err == nil {
			t.Errorf("resolveWorkdir(%q) succeeded, want an error", bad)
		}
	}
	ws, err := resolveWorkdir(link + "/")
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if diff := cmp.Diff(workspace{path: link, real: real}, ws, cmp.AllowUnexported(workspace{})); diff != "" {
		t.Errorf("resolveWorkdir(link) (-want +got):\n%s", diff)
	}
}

func TestCommandPolicyErrorIsTyped(t *testing.T) {
	t.Parallel()
	sb, err := New(testContext(t), Config{Mode: ModeOff})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Command(testContext(t), t.TempDir(), "sudo id", CommandOptions{})
	var pe *PolicyError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "privilege escalation") {
		t.Fatalf("Command(sudo id) error = %v, want a *PolicyError about privilege escalation", err)
	}
	_, err = sb.Command(testContext(t), "relative", "ls", CommandOptions{})
	if err == nil || errors.As(err, &pe) {
		t.Fatalf("Command with a relative workdir error = %v, want a non-policy error", err)
	}
}

func TestAllowedCommandsPrecedence(t *testing.T) {
	t.Parallel()
	landlock := &Sandbox{kind: KindLandlock}
	bwrap := &Sandbox{kind: KindBwrap}
	configured := &Sandbox{kind: KindBwrap, allowed: []string{"ls"}}
	tests := []struct {
		name string
		sb   *Sandbox
		opts CommandOptions
		want []string
	}{
		{"landlock has none", landlock, CommandOptions{}, nil},
		{"bwrap has none", bwrap, CommandOptions{}, nil},
		{"configured list everywhere", configured, CommandOptions{}, []string{"ls"}},
		{"per-call override", configured, CommandOptions{AllowedCommands: []string{"cat"}}, []string{"cat"}},
		{"per-call empty list", bwrap, CommandOptions{AllowedCommands: []string{}}, []string{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.sb.AllowedCommands(tt.opts)); diff != "" {
			t.Errorf("%s: AllowedCommands (-want +got):\n%s", tt.name, diff)
		}
	}
}
