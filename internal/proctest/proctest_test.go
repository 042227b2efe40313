package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkipOrFail runs the test binary again with a missing agent CLI:
// without CI the child test is skipped loudly, with CI=true it fails, and
// either way the output names what is missing and how to install it.
func TestSkipOrFail(t *testing.T) {
	if os.Getenv("PROCTEST_CHILD") == "1" {
		AgentCLI(t, "no-such-cli")
		t.Fatal("AgentCLI returned for a missing CLI")
		return
	}
	t.Parallel()
	CheckSkipOrFail(t, "TestSkipOrFail", "PROCTEST_CHILD", []string{AgentCLIEnv + "=" + t.TempDir()},
		`AGENT CLI "no-such-cli" NOT INSTALLED`, "install-agent-clis.sh")
}

// TestAgentCLIFound: an installed CLI is found in $MAESTRO_AGENT_CLIS/bin.
func TestAgentCLIFound(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/bin", 0o755); err != nil {
		t.Fatal(err)
	}
	want := dir + "/bin/fake"
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(AgentCLIEnv, dir)
	if got := AgentCLI(t, "fake"); got != want {
		t.Errorf("AgentCLI = %q, want %q", got, want)
	}
}

// TestModuleRoot: the root found from this package holds go.mod and
// this package below it.
func TestModuleRoot(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root + "/internal/proctest/prereq.go"); err != nil {
		t.Errorf("module root %s does not hold this package: %v", root, err)
	}
}

// TestNoModelEnv: model credentials, endpoints and choice are dropped,
// MAESTRO_HOME is replaced, and everything else is kept.
func TestNoModelEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "k")
	t.Setenv("OPENAI_BASE_URL", "http://x")
	t.Setenv("MAESTRO_MODEL", "openai/m")
	t.Setenv("MAESTRO_HOME", "/old")
	t.Setenv("PROCTEST_KEPT", "yes")
	env := NoModelEnv("/new")
	got := map[string]int{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k]++
		if k == "MAESTRO_HOME" && v != "/new" {
			t.Errorf("MAESTRO_HOME=%s, want /new", v)
		}
	}
	for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "MAESTRO_MODEL"} {
		if got[k] != 0 {
			t.Errorf("%s kept", k)
		}
	}
	if got["MAESTRO_HOME"] != 1 || got["PROCTEST_KEPT"] != 1 {
		t.Errorf("MAESTRO_HOME ×%d, PROCTEST_KEPT ×%d, want 1 each", got["MAESTRO_HOME"], got["PROCTEST_KEPT"])
	}
}

// TestGolden: equal content passes; a missing file says how to create it
// (checked on a recorder, so that this test does not fail).
func TestGolden(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/g.txt"
	if err := os.WriteFile(path, []byte("same\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Golden(t, path, []byte("same\n"))
	missing := &recorder{TB: t}
	func() {
		defer func() { recover() }()
		Golden(missing, path+".none", []byte("x"))
	}()
	if !strings.Contains(missing.msg, "run with -update to create it") {
		t.Errorf("missing golden file: %q", missing.msg)
	}
}

// recorder records a fatal message instead of failing the test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}

// TestBuildPrebuilt: with $MAESTRO_TEST_BINARY set, Build hands that
// binary out for cmd/maestro (absolute, without building) and refuses one
// that is missing or not executable; other commands are still built.
func TestBuildPrebuilt(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "maestro")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, c := range []struct {
		name, env, pkg string
		want           string // the path returned; "" for an error
		wantErr        string
	}{
		{"relative path made absolute", "maestro", "cmd/maestro", exe, ""},
		{"cleaned package path", exe, "./cmd/maestro/", exe, ""},
		{"missing", filepath.Join(dir, "nope"), "cmd/maestro", "", "no such file"},
		{"not executable", plain, "cmd/maestro", "", "not an executable file"},
		{"a directory", dir, "cmd/maestro", "", "not an executable file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(BinaryEnv, c.env)
			got, err := Build(t.Context(), c.pkg, t.TempDir())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), BinaryEnv) {
					t.Fatalf("Build = %q, %v; want an error naming %s and saying %q", got, err, BinaryEnv, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Build = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	// Another command is built even with the variable set: it names a
	// maestro binary only.
	t.Run("other command built", func(t *testing.T) {
		t.Setenv(BinaryEnv, exe)
		t.Chdir(root)
		out := t.TempDir()
		got, err := Build(t.Context(), "cmd/maestro-fakemodel", out)
		if err != nil {
			t.Fatal(err)
		}
		if got != filepath.Join(out, "maestro-fakemodel") {
			t.Errorf("Build = %q, want the binary in %s", got, out)
		}
		if fi, err := os.Stat(got); err != nil || fi.Size() < 1<<20 {
			t.Errorf("built binary %s: %v (size %v), want a Go program", got, err, fi)
		}
	})
}
