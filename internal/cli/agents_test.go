package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAgentsCommands(t *testing.T) {
	t.Parallel()
	adapterDir, err := filepath.Abs("../agentcli/testdata/user-adapter")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	def, err := os.ReadFile(filepath.Join(adapterDir, "fake-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "agents", "fake-agent.yaml"), def, 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MAESTRO_HOME": home, "PATH": adapterDir + string(os.PathListSeparator) + "/usr/bin:/bin"}

	t.Run("run --agent with a user adapter", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, env, "run", "--agent", "fake-agent", "-o", "jsonl", "hello")
		if r.code != 0 || !strings.Contains(r.stdout, `"content":"fake says: hello"`) {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("run --agent failure is classified", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, env, "run", "--agent", "fake-agent", "fail-auth")
		if r.code != ExitError || !strings.Contains(r.stderr, "auth_expired") {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("unknown agent", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, env, "run", "--agent", "nope", "hi")
		if r.code != ExitUsage || !strings.Contains(r.stderr, "fake-agent") {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("agents list", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, env, "agents", "list")
		if r.code != 0 || !strings.Contains(r.stdout, "fake-agent") || !strings.Contains(r.stdout, "1.2.3") ||
			!strings.Contains(r.stdout, "not found (claude)") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

func TestAgentsParse(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../agentcli/testdata/codex-0.169.0/tool-turn.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := runCLIStdin(t, string(data), "agents", "parse", "--agent", "codex")
	for _, want := range []string{`"type":"tool_call"`, `"tool":"command_execution"`, `"type":"parse_summary"`,
		`"session_id":"01a2024d-43c3-7622-81a2-bced68681d82"`, `"text":"Tool said: maestro-tool-ok"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %s:\n%s", want, r.stdout)
		}
	}
	if r.code != 0 {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
}

// runCLIStdin runs maestro in-process with stdin.
func runCLIStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runCLIStreams(t, strings.NewReader(stdin), new(bytes.Buffer), args...)
}

// runCLIStreams runs maestro in-process with an isolated MAESTRO_HOME,
// an empty environment, and the given stdin and stdout.
func runCLIStreams(t *testing.T, stdin io.Reader, stdout interface {
	io.Writer
	String() string
}, args ...string) result {
	t.Helper()
	home := t.TempDir()
	getenv := func(k string) string {
		if k == "MAESTRO_HOME" {
			return home
		}
		return ""
	}
	var stderr bytes.Buffer
	ios := &IOStreams{In: stdin, Out: stdout, ErrOut: &stderr, Getenv: getenv}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	code := Run(ctx, ios, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String(), home: home}
}
