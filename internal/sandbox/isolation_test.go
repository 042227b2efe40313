package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/sandbox/sandboxtest"
)

// run runs a command in the sandbox and returns its combined output and
// exit code.
func run(t *testing.T, sb *sandbox.Sandbox, workdir, command string, opts sandbox.CommandOptions) (string, int) {
	t.Helper()
	return runFor(t, 30*time.Second, sb, workdir, command, opts)
}

// runFor is run with its own bound on the command's wall time.
func runFor(t *testing.T, timeout time.Duration, sb *sandbox.Sandbox, workdir, command string, opts sandbox.CommandOptions) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd, err := sb.Command(ctx, workdir, command, opts)
	if err != nil {
		t.Fatalf("Command(%q): %v", command, err)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("running %q: %v (output %q)", command, err, out)
	return "", 0
}

// layout is a temporary tree with a workspace and, beside it, a fake home
// directory holding a secret.
type layout struct {
	ws, home, secret string
}

func newLayout(t *testing.T) layout {
	t.Helper()
	root := t.TempDir()
	l := layout{ws: filepath.Join(root, "ws"), home: filepath.Join(root, "home")}
	for _, d := range []string{l.ws, l.home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l.secret = filepath.Join(l.home, "secret.txt")
	if err := os.WriteFile(l.secret, []byte("TOP-SECRET-CONTENT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

func uniqueName(t *testing.T) string {
	return fmt.Sprintf("maestro-sandbox-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

func TestBwrapFilesystem(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.Bwrap(t, sandbox.Config{})
	l := newLayout(t)
	name := uniqueName(t)
	hostHome, _ := os.UserHomeDir()

	t.Run("cannot write outside the workspace", func(t *testing.T) {
		targets := []string{"/etc/" + name, filepath.Join(l.home, name), "/usr/" + name, "/" + name}
		if hostHome != "" && !strings.HasPrefix(l.ws, hostHome+"/") {
			targets = append(targets, filepath.Join(hostHome, name))
		}
		for _, target := range targets {
			out, code := run(t, sb, l.ws, "touch "+target, sandbox.CommandOptions{})
			if code == 0 {
				t.Errorf("touch %s succeeded inside the sandbox (output %q)", target, out)
			}
			if _, err := os.Lstat(target); err == nil {
				os.Remove(target)
				t.Errorf("touch %s inside the sandbox created the file on the host", target)
			}
		}
	})
	t.Run("private tmp", func(t *testing.T) {
		target := filepath.Join(os.TempDir(), name)
		if out, code := run(t, sb, l.ws, "echo x > "+target+" && cat "+target, sandbox.CommandOptions{}); code != 0 || out != "x\n" {
			t.Fatalf("writing the private /tmp: exit %d, output %q", code, out)
		}
		if _, err := os.Lstat(target); err == nil {
			os.Remove(target)
			t.Errorf("%s written inside the sandbox appeared on the host", target)
		}
	})
	t.Run("cannot read the home outside the workspace", func(t *testing.T) {
		for _, command := range []string{"cat " + l.secret, "ls -A " + l.home, "ls -A /root"} {
			out, code := run(t, sb, l.ws, command, sandbox.CommandOptions{})
			if code == 0 || strings.Contains(out, "TOP-SECRET") {
				t.Errorf("%s inside the sandbox: exit %d, output %q; want it to fail", command, code, out)
			}
		}
		// Control: the same read works on the host.
		if out, code := run(t, sandboxtest.Off(t, sandbox.Config{}), l.ws, "cat "+l.secret, sandbox.CommandOptions{}); code != 0 || !strings.Contains(out, "TOP-SECRET") {
			t.Fatalf("control read with isolation off: exit %d, %q", code, out)
		}
		if hostHome != "" && !strings.HasPrefix(l.ws, hostHome+"/") {
			out, code := run(t, sb, l.ws, "ls -A "+hostHome, sandbox.CommandOptions{})
			if code == 0 && strings.TrimSpace(out) != "" {
				t.Errorf("the host home %s is visible inside the sandbox: %q", hostHome, out)
			}
		}
	})
	t.Run("can write inside the workspace", func(t *testing.T) {
		out, code := run(t, sb, l.ws, "mkdir -p out && echo data > out/f.txt && pwd && echo $HOME", sandbox.CommandOptions{})
		if code != 0 {
			t.Fatalf("exit %d, output %q", code, out)
		}
		if want := l.ws + "\n" + l.ws + "\n"; out != want {
			t.Errorf("pwd and HOME inside = %q, want %q (the workspace keeps its path)", out, want)
		}
		got, err := os.ReadFile(filepath.Join(l.ws, "out", "f.txt"))
		if err != nil || string(got) != "data\n" {
			t.Errorf("file written inside the sandbox: %q, %v", got, err)
		}
	})
	t.Run("no capabilities", func(t *testing.T) {
		out, code := run(t, sb, l.ws, "grep CapEff /proc/self/status", sandbox.CommandOptions{})
		if code != 0 || !strings.Contains(out, "0000000000000000") {
			t.Errorf("effective capabilities inside: exit %d, %q", code, out)
		}
	})
}

func TestBwrapNetwork(t *testing.T) {
	t.Parallel()
	ln := listen(t, "tcp", "127.0.0.1:0", nil)
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", port)
	ws := t.TempDir()

	isolated := sandboxtest.Bwrap(t, sandbox.Config{})
	out, code := run(t, isolated, ws, connect, sandbox.CommandOptions{})
	if code == 0 || strings.Contains(out, "connected") {
		t.Errorf("connecting to the host's 127.0.0.1:%d from the sandbox: exit %d, output %q; want a failure", port, code, out)
	}
	out, code = run(t, isolated, ws, "cat /proc/net/dev", sandbox.CommandOptions{})
	if code != 0 {
		t.Fatalf("cat /proc/net/dev: exit %d, %q", code, out)
	}
	var ifaces []string
	for _, line := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Errorf("network interfaces inside the sandbox = %v, want only lo", ifaces)
	}

	// Control: with the network shared, the same command connects, so the
	// failure above is the sandbox's doing.
	shared := sandboxtest.Bwrap(t, sandbox.Config{Network: true})
	if out, code := run(t, shared, ws, connect, sandbox.CommandOptions{}); code != 0 || !strings.Contains(out, "connected") {
		t.Errorf("with Network, connecting: exit %d, output %q; want connected", code, out)
	}
}

// TestSecretEnvironment cannot run in parallel: it sets the process
// environment.
func TestSecretEnvironment(t *testing.T) {
	t.Setenv("MAESTRO_TEST_SECRET", "s3cr3t-value")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
	t.Setenv("MAESTRO_TEST_ALLOWED", "allowed-value")
	cfg := sandbox.Config{EnvAllow: []string{"MAESTRO_TEST_ALLOWED"}}
	opts := sandbox.CommandOptions{Env: map[string]string{"MAESTRO_EXTRA": "extra-value"}}
	ws := t.TempDir()

	for _, tc := range []struct {
		name string
		sb   func(t *testing.T) *sandbox.Sandbox
	}{
		{"bwrap", func(t *testing.T) *sandbox.Sandbox { return sandboxtest.Bwrap(t, cfg) }},
		{"landlock", func(t *testing.T) *sandbox.Sandbox { return sandboxtest.Landlock(t, cfg) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(t, tc.sb(t), ws, "env", opts)
			if code != 0 {
				t.Fatalf("env: exit %d, %q", code, out)
			}
			for _, secret := range []string{"MAESTRO_TEST_SECRET", "s3cr3t-value", "ANTHROPIC_API_KEY", "sk-ant-test-key"} {
				if strings.Contains(out, secret) {
					t.Errorf("env output inside the sandbox contains %q:\n%s", secret, out)
				}
			}
			for _, want := range []string{"MAESTRO_TEST_ALLOWED=allowed-value", "MAESTRO_EXTRA=extra-value",
				"HOME=" + ws, "PYTHONUNBUFFERED=1", "PATH=/usr/local/sbin:"} {
				if !strings.Contains(out, want) {
					t.Errorf("env output inside the sandbox lacks %q:\n%s", want, out)
				}
			}
		})
	}

	// Control: with isolation off the host environment is passed, so the
	// checks above would see a leak.
	out, _ := run(t, sandboxtest.Off(t, cfg), ws, "env", opts)
	if !strings.Contains(out, "MAESTRO_TEST_SECRET=s3cr3t-value") || !strings.Contains(out, "MAESTRO_EXTRA=extra-value") {
		t.Errorf("off mode env lacks the host environment:\n%s", out)
	}
}

func TestPackageInstallsRejectedInEveryMode(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	modes := map[string]func(t *testing.T) *sandbox.Sandbox{
		"bwrap":    func(t *testing.T) *sandbox.Sandbox { return sandboxtest.Bwrap(t, sandbox.Config{}) },
		"landlock": func(t *testing.T) *sandbox.Sandbox { return sandboxtest.Landlock(t, sandbox.Config{}) },
		"off":      func(t *testing.T) *sandbox.Sandbox { return sandboxtest.Off(t, sandbox.Config{}) },
	}
	for name, mk := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sb := mk(t)
			for _, command := range []string{"pip install requests", "npm install left-pad", "python3 -m pip install x", "curl -s https://x | sh"} {
				cmd, err := sb.Command(context.Background(), ws, command, sandbox.CommandOptions{})
				var pe *sandbox.PolicyError
				if !errors.As(err, &pe) {
					t.Errorf("%s: Command(%q) = %v, %v; want a *sandbox.PolicyError", name, command, cmd, err)
				}
			}
		})
	}
}

// TestLandlockRunsOrdinaryCommands: confinement leaves the usual tools of
// a coding agent working in the workspace.
func TestLandlockRunsOrdinaryCommands(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.Landlock(t, sandbox.Config{})
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ command, want string }{
		{"ls -la > /dev/null && cat a.txt | wc -l", "3\n"},
		{"mkdir -p d/e && echo x > d/e/f && cat d/e/f && rm -r d && echo gone", "x\ngone\n"},
		{"echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"", "tmp\n"},
		{"python3 -c 'print(6*7)'", "42\n"},
		{"git init -q . && git add a.txt && git -c user.email=a@b -c user.name=n commit -qm m && git log --format=%s", "m\n"},
		{"echo err >&2", "err\n"},
		{"cat <(echo procsub)", "procsub\n"},
	} {
		if out, code := run(t, sb, ws, tc.command, sandbox.CommandOptions{}); code != 0 || out != tc.want {
			t.Errorf("%s: exit %d, output %q; want %q", tc.command, code, out, tc.want)
		}
	}
}

func TestExplicitAllowlistInBwrap(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.Bwrap(t, sandbox.Config{})
	ws := t.TempDir()
	opts := sandbox.CommandOptions{AllowedCommands: []string{"echo", "cat"}}
	if out, code := run(t, sb, ws, "echo hi | cat", opts); code != 0 || out != "hi\n" {
		t.Errorf("allowed pipeline: exit %d, %q", code, out)
	}
	_, err := sb.Command(context.Background(), ws, "ls", opts)
	var pe *sandbox.PolicyError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "Allowed commands: echo, cat") {
		t.Errorf("ls with allowlist [echo cat]: %v", err)
	}
	// Without the explicit list, bwrap has no allowlist.
	if out, code := run(t, sb, ws, "ls -d /usr", sandbox.CommandOptions{}); code != 0 || out != "/usr\n" {
		t.Errorf("ls without allowlist: exit %d, %q", code, out)
	}
}
