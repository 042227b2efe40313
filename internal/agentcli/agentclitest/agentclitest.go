// Package agentclitest points the five real agent CLIs of the integration
// tier (installed by scripts/install-agent-clis.sh) at a fake model server
// with an isolated HOME: how each is configured, which shell tool it has,
// and the fake server that answers them. No request leaves 127.0.0.1.
package agentclitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
)

// Setup is how one CLI is pointed at the fake server.
type Setup struct {
	// ID is the adapter id, Bin the executable's name.
	ID, Bin string
	// Model is passed with --model ("" keeps the CLI's configured one).
	Model string
	// Tool is the CLI's shell tool and ToolArgs the JSON arguments that
	// run cmd with it.
	Tool     string
	ToolArgs func(cmd string) string
	// Env writes the config files under home and returns the environment
	// entries that point the CLI at url.
	Env func(t testing.TB, home, url string) []string
}

// WriteFile writes content to path, creating its directory.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func jsonArgs(key string) func(string) string {
	return func(cmd string) string {
		b, _ := json.Marshal(map[string]string{key: cmd})
		return string(b)
	}
}

// NodeLiftoffOnly is a NODE_OPTIONS value that keeps V8 from optimising
// WebAssembly beyond its baseline compiler (--liftoff-only, set through
// v8.setFlagsFromString by a data: module, since NODE_OPTIONS refuses V8
// flags). Gemini CLI and Qwen Code parse each shell command with
// tree-sitter-bash (WebAssembly): V8 then optimises the whole grammar on a
// background thread, which Node waits for at exit, about 3.5 CPU-s and
// 10 s of wall time per run that uses the shell tool on a quiet machine
// (docs/agent-clis.md, "Start-up cost"). The baseline code parses a
// command as well.
const NodeLiftoffOnly = "--import=data:text/javascript,import{setFlagsFromString}from'node:v8';setFlagsFromString('--liftoff-only')"

// BunNoFTL is an environment entry that keeps JavaScriptCore, the engine
// of OpenCode (a single Bun executable), from compiling hot functions with
// its top tier (FTL): a test launch is one short turn, over before that
// code pays back, while its JIT worker thread took about a fifth of an
// OpenCode launch's CPU samples (perf). The lower tiers run the same
// JavaScript, so what the CLI does and prints is unchanged
// (docs/agent-clis.md, "Start-up cost"). Claude Code is a Bun executable
// too, but its launch (about 4 CPU-s) showed no difference.
const BunNoFTL = "BUN_JSC_useFTLJIT=0"

// Setups returns the setups of the five built-in CLIs.
func Setups() []Setup {
	return []Setup{
		{ID: "claude-code", Bin: "claude", Tool: "Bash", ToolArgs: jsonArgs("command"),
			Env: func(t testing.TB, home, url string) []string {
				return []string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=sk-fake"}
			}},
		{ID: "codex", Bin: "codex", Tool: "exec_command", ToolArgs: jsonArgs("cmd"),
			Env: func(t testing.TB, home, url string) []string {
				codexHome := filepath.Join(home, ".codex")
				WriteFile(t, filepath.Join(codexHome, "config.toml"), `model = "gpt-5.5"
model_provider = "fake"
check_for_update_on_startup = false
[model_providers.fake]
name = "fake"
base_url = "`+url+`/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
[analytics]
enabled = false
[features]
plugins = false
apps = false
remote_plugin = false
`)
				return []string{"CODEX_HOME=" + codexHome, "FAKE_API_KEY=sk-fake"}
			}},
		{ID: "gemini-cli", Bin: "gemini", Model: "gemini-2.5-flash", Tool: "run_shell_command", ToolArgs: jsonArgs("command"),
			Env: func(t testing.TB, home, url string) []string {
				// Session retention (on by default) deletes, at start-up, chat
				// files Gemini finds not resumable; a session one turn stored
				// could vanish before the next was listed (seen under load).
				WriteFile(t, filepath.Join(home, ".gemini", "settings.json"),
					`{"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false,"sessionRetention":{"enabled":false}},"security":{"auth":{"selectedType":"gemini-api-key"}}}`)
				return []string{"GOOGLE_GEMINI_BASE_URL=" + url, "GEMINI_API_KEY=fake-key", "NODE_OPTIONS=" + NodeLiftoffOnly}
			}},
		{ID: "opencode", Bin: "opencode", Tool: "bash",
			ToolArgs: func(cmd string) string {
				b, _ := json.Marshal(map[string]string{"command": cmd, "description": "Run a command"})
				return string(b)
			},
			Env: func(t testing.TB, home, url string) []string {
				cfg := `{"model":"fake/fake-model","small_model":"fake/fake-model","autoupdate":false,"share":"disabled",` +
					`"permission":{"*":"allow","external_directory":"allow","question":"deny"},"tools":{"question":false},` +
					`"provider":{"fake":{"npm":"@ai-sdk/openai-compatible","name":"Fake","options":{"baseURL":"` + url + `/v1","apiKey":"sk-fake"},` +
					`"models":{"fake-model":{"name":"Fake Model","tool_call":true,"cost":{"input":3,"output":15}}}}}}`
				return []string{"OPENCODE_CONFIG_CONTENT=" + cfg, "OPENCODE_DISABLE_DEFAULT_PLUGINS=true",
					"npm_config_registry=http://127.0.0.1:9/", "XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
					"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), BunNoFTL}
			}},
		{ID: "qwen-code", Bin: "qwen", Tool: "run_shell_command", ToolArgs: jsonArgs("command"),
			Env: func(t testing.TB, home, url string) []string {
				// Qwen's background memory extraction makes an extra model
				// call with tools that a short script would answer 500 and
				// Qwen retry for ~100 s: it is off.
				WriteFile(t, filepath.Join(home, ".qwen", "settings.json"),
					`{"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"enableAutoUpdate":false},"security":{"auth":{"selectedType":"openai"}},"memory":{"enableManagedAutoMemory":false}}`)
				return []string{"OPENAI_BASE_URL=" + url + "/v1", "OPENAI_API_KEY=sk-fake", "OPENAI_MODEL=fake-model", "NODE_OPTIONS=" + NodeLiftoffOnly}
			}},
	}
}

// FakeModel serves the scripted main turns; calls that offer no tools
// (titles, routers) are answered by a looping auxiliary script so the main
// script stays in step whatever extra calls a CLI makes. When Hang is set,
// main calls block until the client goes away, and Arrived is closed at
// the first.
type FakeModel struct {
	Main, Aux *llmtest.Server
	Hang      bool
	Arrived   chan struct{}
	// URL is the server's base URL.
	URL  string
	once sync.Once

	mu    sync.Mutex
	calls []string
	mains int
}

// NewFakeModel starts a fake model server for the test's lifetime.
func NewFakeModel(t testing.TB, turns ...llmtest.Turn) *FakeModel {
	f := &FakeModel{Main: llmtest.New(turns...), Aux: llmtest.New(llmtest.Turn{Text: []string{"Aux answer"}, InputTokens: 1, OutputTokens: 1}),
		Arrived: make(chan struct{})}
	f.Aux.Loop = true
	mainH, auxH := f.Main.Handler(), f.Aux.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req map[string]any
		_ = json.Unmarshal(body, &req)
		tools, _ := req["tools"].([]any)
		aux := r.Method == http.MethodPost && len(tools) == 0 && !strings.Contains(r.URL.Path, "countTokens")
		f.record(r, len(tools), aux)
		if aux {
			auxH.ServeHTTP(w, r)
			return
		}
		if f.Hang && r.Method == http.MethodPost {
			f.once.Do(func() { close(f.Arrived) })
			<-r.Context().Done()
			return
		}
		mainH.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// record logs a request: its method, path and number of tools, and for a
// main model call the script turn it takes (1-based, in arrival order).
func (f *FakeModel) record(r *http.Request, tools int, aux bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	served := "aux"
	switch {
	case r.Method != http.MethodPost:
		served = "no turn"
	case !aux:
		f.mains++
		served = "main turn " + strconv.Itoa(f.mains)
	}
	f.calls = append(f.calls, fmt.Sprintf("%s %s tools=%d: %s", r.Method, r.URL.Path, tools, served))
}

// Calls lists the requests the server received, in arrival order, one a
// line: what a test prints to show which turn each model call took.
func (f *FakeModel) Calls() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "\n")
}

// ProcessEnv is base plus what a process that runs s's CLI needs: s's
// settings pointing it at url, its own HOME and TMPDIR (a fresh temporary
// directory), plain output, and the installed CLI's directory first on
// PATH (proctest.AgentCLI: a missing CLI skips, or fails under CI=true).
func ProcessEnv(t testing.TB, s Setup, base []string, url string) []string {
	t.Helper()
	bin := proctest.AgentCLI(t, s.Bin)
	cliHome := t.TempDir()
	tmp := filepath.Join(cliHome, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(slices.Clip(base), "HOME="+cliHome, "TMPDIR="+tmp, "NO_COLOR=1", "LANG=C.UTF-8",
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	return append(env, s.Env(t, cliHome, url)...)
}

// WritePiece writes, under home's pieces/, the piece agent-hello: one
// movement that runs the CLI of adapter id with edit and Bash allowed.
func WritePiece(t testing.TB, home, id string) {
	t.Helper()
	WriteFile(t, filepath.Join(home, "pieces", "agent-hello.yaml"),
		"name: agent-hello\ndescription: One agent movement.\nmax_movements: 2\ninitial_movement: hello\nmovements:\n"+
			"  - name: hello\n    agent: "+id+"\n    edit: true\n    persona: You greet.\n    instruction: Say hello.\n    allowed_tools: [Bash]\n    rules: []\n")
}

// NewHangingModel starts a fake model server whose main calls hang until
// the client goes away (an interrupt's target; see AwaitCall).
func NewHangingModel(t testing.TB) *FakeModel {
	f := NewFakeModel(t)
	f.Hang = true
	return f
}

// AwaitCall waits up to within for the first main model call of a
// hanging FakeModel; it fails the test with output() (the process's
// stderr) when none arrives.
func (f *FakeModel) AwaitCall(t testing.TB, within time.Duration, output func() string) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-f.Arrived:
	case <-timer.C:
		t.Fatalf("the model call never arrived within %v\noutput: %s", within, output())
	}
}

// InstallUserAdapter installs the user-defined adapter of
// internal/agentcli/testdata/user-adapter (fake-agent.yaml, a CLI
// definition a user would write) into home/agents and returns the
// adapter's directory, which holds the fake-agent program to put on PATH.
func InstallUserAdapter(t testing.TB, home string) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("agentclitest: cannot locate its own source file")
	}
	dir := filepath.Join(filepath.Dir(self), "..", "testdata", "user-adapter")
	def, err := os.ReadFile(filepath.Join(dir, "fake-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, filepath.Join(home, "agents", "fake-agent.yaml"), string(def))
	return dir
}
