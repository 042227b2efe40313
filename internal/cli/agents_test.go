package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/agentcli/agentclitest"
)

func TestAgentsCommands(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	adapterDir := agentclitest.InstallUserAdapter(t, home)
	env := map[string]string{"MAESTRO_HOME": home, "PATH": adapterDir + string(os.PathListSeparator) + "/usr/bin:/bin"}

	t.Run("run --agent with a user adapter", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, env, "run", "--agent", "fake-agent", "-o", "jsonl", "hello")
		if r.code != 0 || !strings.Contains(r.stdout, `"content":"fake says: hello"`) ||
			!strings.Contains(r.stdout, `"agent_session_id":"11111111-2222-4333-8444-555555555555"`) {
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

// TestAgentsListUnusableBinary: a CLI's binary that is on PATH but not
// executable (a copy that lost its mode, a download not yet chmod'ed) is
// named with the fix, where "not found (claude)" sent the user looking
// for a missing install; a binary not there at all is still "not found".
func TestAgentsListUnusableBinary(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\necho 1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MAESTRO_HOME": t.TempDir(), "PATH": bin + string(os.PathListSeparator) + "/usr/bin:/bin"}
	r := runCLI(t, env, "agents", "list")
	want := "unusable (" + filepath.Join(bin, "claude") + ": not executable (chmod +x " + filepath.Join(bin, "claude") + "))"
	if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "not found (codex)") {
		t.Fatalf("exit %d; want %q and codex not found\nstdout:\n%s\nstderr:\n%s", r.code, want, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "agents", "list", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"unusable": "`+filepath.Join(bin, "claude")+`: not executable`) {
		t.Fatalf("--json: exit %d\nstdout:\n%s", r.code, r.stdout)
	}
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

// TestAgentsListAndShow: agents list --json names each definition's source
// (a user file replacing a built-in is an override) and every capability;
// agents show lists the slash commands the CLI publishes (OpenCode's
// resolved configuration, from a fake opencode on PATH).
func TestAgentsListAndShow(t *testing.T) {
	t.Parallel()
	home, bin := t.TempDir(), t.TempDir()
	write := func(path, content string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, "agents", "codex.yaml"), "id: codex\nname: My Codex\nbinary: /opt/codex\nparser: codex-json\ncapabilities:\n  usage_stats: true\n", 0o644)
	write(filepath.Join(bin, "opencode"), "#!/bin/sh\ncase \"$1 $2\" in\n  \"debug config\") echo '{\"command\":{\"ship\":{\"template\":\"x\"}}}';;\n  *) echo 1.18.33;;\nesac\n", 0o755)
	env := map[string]string{"MAESTRO_HOME": home, "PATH": bin + string(os.PathListSeparator) + "/usr/bin:/bin"}

	r := runCLI(t, env, "agents", "list", "--json")
	var listed struct {
		Agents []struct {
			ID, Name, Source, File string
			Capabilities           map[string]bool
		}
		Invalid []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); r.code != 0 || err != nil {
		t.Fatalf("exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	sources := map[string]string{}
	for _, a := range listed.Agents {
		sources[a.ID] = a.Name + "/" + a.Source
		if a.ID == "codex" && (a.Capabilities["usage_stats"] != true || a.Capabilities["resume"] != false || !strings.HasSuffix(a.File, "codex.yaml")) {
			t.Errorf("codex: %+v", a)
		}
	}
	want := map[string]string{"codex": "My Codex/override", "claude-code": "Claude Code/built-in", "opencode": "OpenCode/built-in"}
	for id, w := range want {
		if sources[id] != w {
			t.Errorf("%s: %q, want %q", id, sources[id], w)
		}
	}
	if len(listed.Invalid) != 0 {
		t.Errorf("invalid: %v", listed.Invalid)
	}

	r = runCLI(t, env, "agents", "show", "opencode")
	if r.code != 0 || !strings.Contains(r.stdout, "/ship") || !strings.Contains(r.stdout, "opencode debug config") || !strings.Contains(r.stdout, "built-in") {
		t.Errorf("show opencode: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "agents", "show", "claude-code")
	if r.code != 0 || !strings.Contains(r.stdout, "none seen yet") {
		t.Errorf("show claude-code: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r = runCLI(t, env, "agents", "show", "nope"); r.code != ExitUsage {
		t.Errorf("show nope: exit %d", r.code)
	}
	// No command configured: "none", not a blank.
	write(filepath.Join(bin, "opencode"), "#!/bin/sh\ncase \"$1 $2\" in\n  \"debug config\") echo '{}';;\n  *) echo 1.18.33;;\nesac\n", 0o755)
	r = runCLI(t, env, "agents", "show", "opencode")
	if r.code != 0 || !regexp.MustCompile(`slash commands +none\n +\(from opencode debug config\)`).MatchString(r.stdout) {
		t.Errorf("show opencode, no commands: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestAgentsListHangingCLI: agents list asks every binary at once, within
// agentcli.ProbeTimeout, and names each that did not answer. Three CLIs
// that hang on --version took 17 s each, one after the other, and showed
// only "?". Not parallel: it shortens the package's probe timeout.
func TestAgentsListHangingCLI(t *testing.T) {
	defer func(d time.Duration) { agentcli.ProbeTimeout = d }(agentcli.ProbeTimeout)
	agentcli.ProbeTimeout = time.Second
	home, bin := t.TempDir(), t.TempDir()
	hanging := []string{"hang-a", "hang-b", "hang-c", "hang-d", "hang-e"}
	for _, id := range hanging {
		agentclitest.WriteFile(t, filepath.Join(home, "agents", id+".yaml"), "id: "+id+"\nname: Hang\nbinary: "+id+"\nparser: claude-stream-json\n")
		// exec: the shell is the process killed on the timeout.
		if err := os.WriteFile(filepath.Join(bin, id), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"MAESTRO_HOME": home, "PATH": bin + string(os.PathListSeparator) + "/usr/bin:/bin"}
	start := time.Now()
	r := runCLI(t, env, "agents", "list")
	elapsed := time.Since(start)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, id := range hanging {
		if !strings.Contains(r.stderr, "warning: "+id+": version unknown: "+filepath.Join(bin, id)+" --version did not answer within 1s") {
			t.Errorf("stderr does not name %s:\n%s", id, r.stderr)
		}
	}
	if !regexp.MustCompile(`(?m)^hang-a +\? +/`).MatchString(r.stdout) {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	// One after the other they take at least 5 s; together about 1 s.
	if elapsed >= 4*time.Second {
		t.Errorf("agents list took %s: the probes ran one after the other", elapsed)
	}
	// agents show says it too.
	r = runCLI(t, env, "agents", "show", "hang-a")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: hang-a: version unknown: "+filepath.Join(bin, "hang-a")+" --version did not answer within 1s") {
		t.Errorf("agents show: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestAgentsShowHangingSlashProbe: agents show opencode with an opencode
// that hangs bounds its slash-command probe (opencode debug config) by
// agentcli.ProbeTimeout, as the version probe, and says so. It waited
// 30 s for the slash commands after the version probe's 5 s. Not
// parallel: it shortens the package's probe timeout.
func TestAgentsShowHangingSlashProbe(t *testing.T) {
	defer func(d time.Duration) { agentcli.ProbeTimeout = d }(agentcli.ProbeTimeout)
	agentcli.ProbeTimeout = time.Second
	home, bin := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "opencode"), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MAESTRO_HOME": home, "HOME": home, "PATH": bin + string(os.PathListSeparator) + "/usr/bin:/bin"}
	start := time.Now()
	r := runCLI(t, env, "agents", "show", "opencode", "--json")
	elapsed := time.Since(start)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var info struct {
		SlashProblem string `json:"slash_commands_problem"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if want := "probe opencode slash commands: opencode debug config did not answer within 1s"; info.SlashProblem != want {
		t.Errorf("slash_commands_problem = %q, want %q", info.SlashProblem, want)
	}
	if !strings.Contains(r.stderr, "warning: opencode: version unknown: "+filepath.Join(bin, "opencode")+" --version did not answer within 1s") {
		t.Errorf("stderr does not say the version probe did not answer:\n%s", r.stderr)
	}
	// Bounded: 30 s before; the two probes run at once now (about 1 s).
	if elapsed >= 8*time.Second {
		t.Errorf("agents show took %s", elapsed)
	}
}
