package agentcli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuiltinDefinitions(t *testing.T) {
	t.Parallel()
	defs, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range defs {
		ids = append(ids, d.ID)
		// Completeness: a JSON-output agent has a parser and error
		// patterns; a storage-capable agent names its storage.
		if d.Capabilities.JSONOutput && (d.Parser == "" || len(d.Errors.AuthExpired) == 0 || len(d.Errors.SessionNotFound) == 0) {
			t.Errorf("%s: JSON output without parser or error patterns", d.ID)
		}
		if d.Capabilities.SessionStorage && (d.SessionStorage == "" || d.SessionStorage == "none") {
			t.Errorf("%s: session_storage capability without a storage", d.ID)
		}
	}
	if diff := cmp.Diff([]string{"claude-code", "codex", "gemini-cli", "opencode", "qwen-code"}, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

func TestParseDefinitionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "id: x\nbinary: x\nparser: codex-json\nbinnary: y\n", []string{"f.yaml:4:1: binnary: unknown key"}},
		{"wrong type", "id: x\nbinary: x\nparser: codex-json\nargs:\n  resume: --resume\n", []string{"f.yaml:5:11: args.resume: expected a list"}},
		{"bad bool", "id: x\nbinary: x\nparser: codex-json\ncapabilities:\n  resume: yes please\n", []string{"f.yaml:5:11: capabilities.resume: expected true or false"}},
		{"unknown parser", "id: x\nbinary: x\nparser: xml\n", []string{`f.yaml:3:9: parser: "xml" is not a parser`}},
		{"bad regexp", "id: x\nbinary: x\nparser: codex-json\nerrors:\n  rate_limited: ['ok', '(unclosed']\n", []string{"f.yaml:5:24: errors.rate_limited[1]: invalid regexp"}},
		{"bad placeholder", "id: x\nbinary: x\nparser: codex-json\nargs:\n  model: ['-m', '{session}']\n", []string{"f.yaml:5:17: args.model[1]: placeholder {session} is not available here"}},
		{"missing fields", "name: X\n", []string{"f.yaml:1:1: id: required", "f.yaml:1:1: binary: required", `f.yaml:1:1: parser: "" is not a parser`}},
		{"syntax", "id: [x\n", []string{"f.yaml:"}},
		{"prompt without its placeholder", "id: x\nbinary: x\nparser: text\nargs:\n  prompt: ['--message']\n", []string{"f.yaml:5:11: args.prompt: no token holds {prompt}, so the value is never passed"}},
		{"resume without its placeholder", "id: x\nbinary: x\nparser: text\nargs:\n  resume: ['--resume']\n", []string{"f.yaml:5:11: args.resume: no token holds {session}"}},
		{"empty", "", []string{"f.yaml:1:1: the file is empty: a definition needs at least id, binary and parser"}},
		{"comments only", "# id: x\n", []string{"f.yaml:1:1: the file is empty"}},
		{"resume without args", "id: x\nbinary: x\nparser: codex-json\ncapabilities:\n  resume: true\n", []string{"f.yaml:5:11: capabilities.resume: true but args.resume is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDefinition("f.yaml", []byte(tt.yaml))
			var le LoadErrors
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want LoadErrors", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("errors:\n%s\nwant %d", err, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestLoadUserDirOverridesAndReportsErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("codex.yaml", "id: codex\nname: My Codex\nbinary: /opt/codex\nparser: codex-json\n")
	write("broken.yaml", "id: broken\nbinary: b\nparser: codex-json\nextra: 1\n")
	write("short.yml", "id: short\nbinary: s\nparser: text\n") // was ignored
	write("notes.txt", "id: notes\nbinary: n\nparser: text\n")
	reg, err := Load(dir)
	if d, _ := reg.Get("short"); d == nil || !slices.Contains(reg.IDs(), "short") || slices.Contains(reg.IDs(), "notes") {
		t.Errorf("a .yml definition is taken, a .txt is not: %v", reg.IDs())
	}
	if err == nil || !strings.Contains(err.Error(), "broken.yaml:4:1: extra: unknown key") {
		t.Errorf("err = %v", err)
	}
	if d, _ := reg.Get("codex"); d == nil || d.Name != "My Codex" {
		t.Errorf("user codex did not replace the built-in: %+v", d)
	}
	if slices.Contains(reg.IDs(), "broken") {
		t.Error("an invalid definition was registered")
	}

	// Two files with one id: neither is taken (the later one silently
	// replaced the other), each is reported at its id, and a built-in of
	// that id does not stand in for them.
	for _, name := range []string{"a.yaml", "b.yaml"} {
		write(name, "name: Mine\nid: gemini-cli\nbinary: /opt/"+name+"\nparser: text\n")
	}
	reg, err = Load(dir)
	for _, want := range []string{
		dir + "/a.yaml:2:5: id: \"gemini-cli\" is defined by " + dir + "/b.yaml too",
		dir + "/b.yaml:2:5: id: \"gemini-cli\" is defined by " + dir + "/a.yaml too",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to hold %q", err, want)
		}
	}
	if d, ok := reg.Get("gemini-cli"); ok {
		t.Errorf("a duplicated id was registered from %s", d.Source)
	}
	if d, _ := reg.Get("codex"); d == nil || d.Name != "My Codex" {
		t.Errorf("the other user files are still taken: codex = %+v", d)
	}
}

func TestArgv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		inv  Invocation
		want string
	}{
		// The default level is edit (issue 16 item 2).
		{"claude-code", Invocation{Prompt: "--- hi", Model: "opus", ExtraDirs: []string{"/a", "/b"}, SystemPrompt: "be brief"},
			"--print --verbose --output-format stream-json --permission-mode acceptEdits --allowedTools Bash --model opus --add-dir /a --add-dir /b --append-system-prompt be brief -- --- hi"},
		{"claude-code", Invocation{Prompt: "p", Permission: PermissionFull},
			"--print --verbose --output-format stream-json --dangerously-skip-permissions -- p"},
		{"claude-code", Invocation{Prompt: "p", SessionID: "S", Permission: PermissionReadOnly},
			"--print --verbose --output-format stream-json --permission-mode plan --resume S -- p"},
		{"codex", Invocation{Prompt: "p", Dir: "/w", SessionID: "T", Model: "gpt-5.5", Images: []string{"i.png"}},
			"-C /w exec --skip-git-repo-check --json --sandbox workspace-write -m gpt-5.5 resume T -i i.png -- p"},
		{"codex", Invocation{Prompt: "p", Permission: PermissionReadOnly},
			"exec --json --sandbox read-only --skip-git-repo-check -- p"},
		{"codex", Invocation{Prompt: "p", Permission: PermissionFull},
			"exec --skip-git-repo-check --json --dangerously-bypass-approvals-and-sandbox -- p"},
		// Gemini and Qwen take the prompt attached (issue 16 item 3).
		{"gemini-cli", Invocation{Prompt: "p", Model: "gemini-2.5-flash", SystemPrompt: "sys"},
			"--output-format stream-json --approval-mode auto_edit --allowed-tools run_shell_command -m gemini-2.5-flash --prompt=sys\n\n---\n\n# User Request\n\np"},
		{"gemini-cli", Invocation{Prompt: "-x", Permission: PermissionFull}, "--output-format stream-json --approval-mode yolo --prompt=-x"},
		// The prompt goes on stdin (TestPromptOnStdin).
		{"opencode", Invocation{Prompt: "---\nfront: matter", SessionID: "ses_1", Images: []string{"x.png"}},
			"run --format json --thinking --session ses_1 -f x.png"},
		{"qwen-code", Invocation{Prompt: "p", Permission: PermissionReadOnly},
			"--output-format stream-json --approval-mode plan --prompt=p"},
		{"qwen-code", Invocation{Prompt: "---\nfront: matter"},
			"--output-format stream-json --approval-mode auto-edit --allowed-tools run_shell_command --prompt=---\nfront: matter"},
	}
	for _, tt := range tests {
		args, _ := mustDef(t, tt.id).Argv(tt.inv)
		if got := strings.Join(args, " "); got != tt.want {
			t.Errorf("%s %+v:\n got %q\nwant %q", tt.id, tt.inv, got, tt.want)
		}
	}
	// OpenCode's read-only is enforced by deny rules now (issue 16 item
	// 2); a definition that only requests it still warns.
	if _, warn := mustDef(t, "opencode").Argv(Invocation{Prompt: "p", Permission: PermissionReadOnly}); warn != "" {
		t.Errorf("opencode read-only: warning %q", warn)
	}
	requested := *mustDef(t, "opencode")
	requested.Args.ReadOnlyEnforce = false
	if _, warn := requested.Argv(Invocation{Prompt: "p", Permission: PermissionReadOnly}); warn == "" {
		t.Error("read-only only requested: no warning that it is not enforced")
	}
}

func TestEnviron(t *testing.T) {
	t.Parallel()
	env := mustDef(t, "claude-code").Environ([]string{"HOME=/h", "DISABLE_TELEMETRY=0"},
		Invocation{Permission: PermissionFull, Env: []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:1"}})
	for _, want := range []string{"HOME=/h", "DISABLE_TELEMETRY=1", "IS_SANDBOX=1", "ANTHROPIC_BASE_URL=http://127.0.0.1:1"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s: %v", want, env)
		}
	}
	// Gemini CLI and Qwen Code run in the Node process Maestro starts, not
	// in a relaunched child (one Node start per run).
	for id, want := range map[string]string{"gemini-cli": "GEMINI_CLI_NO_RELAUNCH=true", "qwen-code": "QWEN_CODE_NO_RELAUNCH=true"} {
		if env := mustDef(t, id).Environ([]string{"HOME=/h"}, Invocation{}); !slices.Contains(env, want) {
			t.Errorf("%s env lacks %s: %v", id, want, env)
		}
	}
}

// OpenCode's configuration content is merged layer by layer: the run's
// own provider settings stay, the read-only deny rules follow "*".
func TestEnvironMergesJSON(t *testing.T) {
	t.Parallel()
	def := mustDef(t, "opencode")
	own := `OPENCODE_CONFIG_CONTENT={"model":"fake/m","permission":{"*":"allow","question":"deny"}}`
	get := func(p Permission) string {
		for _, kv := range def.Environ([]string{"HOME=/h"}, Invocation{Permission: p, Env: []string{own}}) {
			if v, ok := strings.CutPrefix(kv, "OPENCODE_CONFIG_CONTENT="); ok {
				return v
			}
		}
		return ""
	}
	ro := get(PermissionReadOnly)
	if !strings.Contains(ro, `"model":"fake/m"`) || !strings.Contains(ro, `"autoupdate":false`) ||
		!strings.Contains(ro, `"permission":{"*":"allow","external_directory":"deny","question":"deny","edit":"deny","bash":"deny"`) {
		t.Errorf("read-only config = %s", ro)
	}
	if ed := get(PermissionEdit); strings.Contains(ed, `"deny","edit"`) || !strings.Contains(ed, `"model":"fake/m"`) {
		t.Errorf("edit config = %s", ed)
	}
	if got := mergeJSON(`{"a":1}`, `not json`); got != "not json" {
		t.Errorf("mergeJSON with a non-object = %q", got)
	}
}

func TestParsePermission(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "read-only", "edit", "full"} {
		if p, err := ParsePermission(s); err != nil || string(p) != s {
			t.Errorf("ParsePermission(%q) = %q, %v", s, p, err)
		}
	}
	if _, err := ParsePermission("full-access"); err == nil || !strings.Contains(err.Error(), "read-only, edit or full") {
		t.Errorf("ParsePermission(full-access) = %v", err)
	}
	if PermissionDefault.Level() != PermissionEdit {
		t.Error("the default level is not edit")
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	c := NewClassifier(mustDef(t, "codex"))
	tests := []struct {
		msg    string
		status int
		want   Category
	}{
		{"anything", 401, AuthExpired},
		{"anything at all", 429, RateLimited},
		{"prompt is too long: 206491 tokens > 200000 maximum", 400, TokenExhaustion},
		{"Bad Request", 400, InvalidRequest},
		{"Error: thread/resume: no rollout found for thread id x", 0, SessionNotFound},
		{"stream disconnected: ECONNRESET", 0, NetworkError},
		{"You've hit your usage limit · resets in 2 hours", 0, RateLimited},
		{"short", 0, Unknown},
	}
	for _, tt := range tests {
		if got := c.Classify(tt.msg, tt.status).Category; got != tt.want {
			t.Errorf("Classify(%q, %d) = %s, want %s", tt.msg, tt.status, got, tt.want)
		}
	}
	if e := c.Classify("You've hit your usage limit · resets in 2 hours", 0); e.RetryAt.IsZero() || !IsPlanQuota(e.Message) {
		t.Errorf("plan quota reset not parsed: %+v", e)
	}
	exit := c.ClassifyExit(1, "\x1b[91mError:\x1b[0m something odd happened\n", "")
	if exit.Category != AgentCrashed || !strings.Contains(exit.Message, "Agent exited with code 1: Error: something odd happened") {
		t.Errorf("ClassifyExit = %+v", exit)
	}
	if got := NewClassifier(mustDef(t, "gemini-cli")).ClassifyExit(41, "", "").Category; got != AuthExpired {
		t.Errorf("gemini exit 41 = %s, want auth_expired", got)
	}
}

// TestClassifyNoKey: what each CLI says when it has no key or login (the
// day-one failure) is auth_expired, which a piece's [ERROR:auth_expired]
// rule routes; Codex's and Qwen Code's were unknown.
func TestClassifyNoKey(t *testing.T) {
	t.Parallel()
	for id, msg := range map[string]string{
		"claude-code": "Not logged in · Please run /login",
		"codex":       "Missing environment variable: `FAKE_API_KEY`.",
		"gemini-cli":  "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.",
		"qwen-code":   "Missing API key for OpenAI-compatible auth. Set settings.security.auth.apiKey, or set the 'OPENAI_API_KEY' environment variable.",
	} {
		if got := NewClassifier(mustDef(t, id)).Classify(msg, 0).Category; got != AuthExpired {
			t.Errorf("%s: Classify(%q) = %s, want auth_expired", id, msg, got)
		}
	}
}

// TestResolveAbsolute: a definition's absolute binary that is missing, a
// directory or not executable is named as such ("not an executable file"
// was said of all three).
func TestResolveAbsolute(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for bin, want := range map[string]string{
		filepath.Join(dir, "missing"): "look for " + dir + "/missing: no such file",
		dir:                           "look for " + dir + ": a directory, not an executable file",
		plain:                         "look for " + plain + ": not executable (chmod +x " + plain + ")",
	} {
		if _, err := (&Definition{Binary: bin}).Resolve(""); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", bin, err, want)
		}
	}
}
