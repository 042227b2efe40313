package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		yaml    string
		want    Config
		wantErr string
	}{
		{"empty", "", Config{}, ""},
		{"event bus", "event_bus:\n  url: nats://127.0.0.1:4222\n  create_stream: true\n  source: ci\n", Config{EventBus: EventBus{URL: "nats://127.0.0.1:4222", CreateStream: true, Source: "ci"}}, ""},
		{"artifacts", "artifacts: s3://team/maestro\nartifacts_s3:\n  endpoint: http://s3.internal:9000\n  region: eu-west-1\n", Config{Artifacts: "s3://team/maestro", ArtifactsS3: ArtifactsS3{Endpoint: "http://s3.internal:9000", Region: "eu-west-1"}}, ""},
		{"event bus unknown key", "event_bus: {urll: x}\n", Config{}, `line 1: event_bus.urll: unknown key; did you mean "url"?`},
		{"full", "model: openai/llama3.2\nsandbox: always\nmax_iterations: 7\nproviders:\n  openai:\n    base_url: http://localhost:11434/v1\n    api: chat\n",
			Config{Model: "openai/llama3.2", Sandbox: "always", MaxIterations: 7, Providers: Providers{OpenAI: Provider{BaseURL: "http://localhost:11434/v1", API: "chat"}}}, ""},
		// Issue 15 item 10: the key, its line, a close key and the known
		// keys, no Go type names (was "line 2: field modle not found in
		// type config.Config").
		{"unknown key", "model: x\nmodle: y\n", Config{}, `line 2: modle: unknown key; did you mean "model"? (known keys: agent_permission, artifacts, artifacts_s3, budget_usd_month, classifier_model, compact_at, event_bus, max_file_bytes, max_iterations, mcp_servers, model, models, providers, sandbox, ssh_connections, web)`},
		{"unknown key, no close one", "colour: blue\n", Config{}, "line 1: colour: unknown key (known keys: agent_permission, artifacts, artifacts_s3, budget_usd_month, classifier_model, compact_at, event_bus, max_file_bytes"},
		{"unknown nested key", "providers:\n  openai:\n    apikey: x\n", Config{}, `line 3: providers.openai.apikey: unknown key; did you mean "api_key"? (known keys of providers.openai: api, api_key, base_url, managed_gateway)`},
		{"unknown provider", "providers:\n  antropic: {}\n", Config{}, `line 2: providers.antropic: unknown key; did you mean "anthropic"?`},
		{"every unknown key", "a: 1\nmax_iteration: 2\n", Config{}, "line 1: a: unknown key (known keys: agent_permission, artifacts, artifacts_s3, budget_usd_month, classifier_model, compact_at, event_bus, max_file_bytes, max_iterations, mcp_servers, model, models, providers, sandbox, ssh_connections, web)\nline 2: max_iteration: unknown key; did you mean \"max_iterations\"?"},
		{"wrong type, in words", "max_iterations: many\n", Config{}, `line 1: max_iterations: expected an integer, found string "many"`},
		{"mapping expected", "providers: 3\n", Config{}, "line 1: providers: expected a mapping, found integer 3"},
		{"string expected", "model: [a]\n", Config{}, "line 1: model: expected a string, found a list"},
		{"not a mapping", "- model\n", Config{}, "line 1: the configuration: expected a mapping, found a list"},
		{"empty value", "sandbox:\nmodel: openai/x\n", Config{Model: "openai/x"}, ""},
		{"bare catalogue model", "model: claude-sonnet-4-5\n", Config{Model: "claude-sonnet-4-5"}, ""},
		{"trailing empty document", "max_iterations: 7\n---\n", Config{MaxIterations: 7}, ""},
		// Everything after --- was silently ignored.
		{"second document", "max_iterations: 7\n---\nmodel: openai/x\n", Config{}, "line 2: a second YAML document (after ---)"},
		{"bad sandbox", "sandbox: sometimes\n", Config{}, `sandbox: "sometimes" is not one of auto, always, off`},
		{"bad api", "providers:\n  openai:\n    api: graphql\n", Config{}, "providers.openai.api"},
		{"wrong type", "max_iterations: many\n", Config{}, "line 1"},
		{"negative", "max_iterations: -1\n", Config{}, "max_iterations: must be positive"},
		{"file limit", "max_file_bytes: 1048576\n", Config{MaxFileBytes: 1 << 20}, ""},
		{"classifier model", "model: anthropic/claude-sonnet-4-5\nclassifier_model: anthropic/claude-haiku-4-5\n",
			Config{Model: "anthropic/claude-sonnet-4-5", ClassifierModel: "anthropic/claude-haiku-4-5"}, ""},
		{"negative file limit", "max_file_bytes: -1\n", Config{}, "max_file_bytes: must be positive"},
		{"agent permission", "agent_permission: read-only\n", Config{AgentPermission: "read-only"}, ""},
		{"mcp servers", "mcp_servers:\n  everything: {command: npx, args: [-y, pkg], env: {A: b}}\n  tracker: {url: \"https://mcp.example.com/mcp\", headers: {Authorization: x}, timeout: 30}\n",
			Config{MCPServers: map[string]MCPServer{
				"everything": {Command: "npx", Args: []string{"-y", "pkg"}, Env: map[string]string{"A": "b"}},
				"tracker":    {URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "x"}, Timeout: 30},
			}}, ""},
		{"mcp server unknown key", "mcp_servers:\n  x: {comand: y}\n", Config{}, `line 2: mcp_servers.x.comand: unknown key; did you mean "command"?`},
		{"mcp server neither", "mcp_servers:\n  x: {args: [a]}\n", Config{}, "mcp_servers.x: expected either command (stdio) or url (streamable HTTP)"},
		{"mcp server both", "mcp_servers:\n  x: {command: a, url: \"http://h/\"}\n", Config{}, "mcp_servers.x: expected either command"},
		{"mcp server bad slug", "mcp_servers:\n  Big: {command: a}\n", Config{}, "mcp_servers.Big: the slug must be"},
		{"mcp server slug with __", "mcp_servers:\n  a__b: {command: a}\n", Config{}, "must not contain __"},
		{"mcp server slug ending in _", "mcp_servers:\n  gh_: {command: a}\n", Config{}, "must not end in _"},
		{"mcp server bad url", "mcp_servers:\n  x: {url: \"ftp://h/\"}\n", Config{}, `url "ftp://h/": expected an http or https URL`},
		{"mcp server headers on command", "mcp_servers:\n  x: {command: a, headers: {A: b}}\n", Config{}, "headers go with url"},
		{"bad agent permission", "agent_permission: yolo\n", Config{}, `agent_permission: "yolo" is not one of read-only, edit, full`},
		{"web", "web:\n  allow_hosts: [127.0.0.1, wiki.internal]\n  timeout_seconds: 5\n  search: {backend: searxng, url: http://localhost:8888}\n",
			Config{Web: Web{AllowHosts: []string{"127.0.0.1", "wiki.internal"}, TimeoutSeconds: 5, Search: WebSearch{Backend: "searxng", URL: "http://localhost:8888"}}}, ""},
		{"bad search backend", "web:\n  search: {backend: bing}\n", Config{}, `web.search.backend: "bing" is not one of searxng, brave, tavily`},
		{"negative web cap", "web:\n  max_bytes: -1\n", Config{}, "web: timeout_seconds, max_redirects, max_bytes and max_download_bytes must be positive"},
		{"ssh connection", "ssh_connections:\n  6f9619ff-8b86:\n    {host: h, port: 2222, user: ops, key_file: /k, host_key: ssh-ed25519 AAAA}\n",
			Config{SSHConnections: map[string]SSHConnection{"6f9619ff-8b86": {Host: "h", Port: 2222, User: "ops", KeyFile: "/k", HostKey: "ssh-ed25519 AAAA"}}}, ""},
		{"ssh connection without host key", "ssh_connections:\n  6f9619ff-8b86: {host: h, user: ops, password: p}\n", Config{}, "ssh_connections.6f9619ff-8b86: host, user, host_key and key_file or password are required; missing: host_key (host_key is the server's public key, pinned"},
		{"unknown web key", "web:\n  allow_host: [x]\n", Config{}, `web.allow_host: unknown key; did you mean "allow_hosts"?`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tc.yaml))
			if err != nil && strings.Contains(err.Error(), "config.") {
				t.Errorf("error names a Go type: %v", err)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadMissingAndPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := Load(filepath.Join(dir, "nope.yaml"))
	if err != nil || !cmp.Equal(cfg, Config{}) {
		t.Fatalf("missing file: %+v %v", cfg, err)
	}
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte("sandbox: bogus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("error should name the file: %v", err)
	}
}

// A value that decodes but fails a check is named with its key's line,
// as unknown keys and wrong types are (issue 15 item 10).
func TestValueErrorsNameTheLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{"model: x\nsandbox: sometimes\n", `line 2: sandbox: "sometimes" is not one of auto, always, off`},
		{"agent_permission: yolo\n", `line 1: agent_permission: "yolo" is not one of read-only, edit, full`},
		{"providers:\n  anthropic: {}\n  openai:\n    api: graphql\n", `line 4: providers.openai.api: "graphql" is not one of chat, responses`},
		{"max_iterations: -1\n", "line 1: max_iterations: must be positive, got -1"},
		{"max_file_bytes: -1\n", "line 1: max_file_bytes: must be positive, got -1"},
		{"models:\n  openai/gpt-4.1:\n    context_window: -5\n", "line 3: models.openai/gpt-4.1.context_window: must be positive, got -5"},
		{"mcp_servers:\n  ok: {command: a}\n  x:\n    args: [a]\n", "line 3: mcp_servers.x: expected either command (stdio) or url (streamable HTTP)"},
		// gh_'s tool x and gh's tool _x were both mcp__gh___x.
		{"mcp_servers:\n  gh: {command: a}\n  gh_: {command: b}\n", "line 3: mcp_servers.gh_: the slug must not end in _ (mcp__gh___<tool> would read as server gh)"},
		{"web:\n  search:\n    backend: bing\n", `line 3: web.search.backend: "bing" is not one of searxng, brave, tavily`},
		{"web:\n  max_bytes: -1\n", "line 1: web: timeout_seconds, max_redirects"},
		{"ssh_connections:\n  box: {host: h}\n", "line 2: ssh_connections.box: host, user, host_key and key_file or password are required; missing: user, host_key, key_file or password"},
		{"ssh_connections:\n  box: {host: h, user: u, host_key: ssh-ed25519 AAAA}\n", "missing: key_file or password"},
		{"ssh_connections:\n  box:\n    {host: h, user: u, password: p, host_key: ssh-ed25519 AAAA, port: 99999}\n", "line 3: ssh_connections.box.port: must be 1-65535 (default 22), got 99999"},
		{"ssh_connections:\n  box:\n    {host: h, user: u, key_file: keys/id, host_key: ssh-ed25519 AAAA}\n", `line 3: ssh_connections.box.key_file: "keys/id": expected an absolute path or one starting with ~/`},
		{"sandbox: auto\ncompact_at: 2\n", "line 2: compact_at: a share of the context window"},
		// A model the run would refuse is named as a config.yaml error,
		// with its line, not as if --model had been given wrong.
		{"sandbox: auto\nmodel: qwen3\n", `line 2: model: expected provider/model with provider one of anthropic, openai, replay (e.g. anthropic/claude-sonnet-4-5, openai/llama3.2), found "qwen3"`},
		{"model: ollama/qwen3\n", `line 1: model: unknown provider "ollama" in "ollama/qwen3"; expected one of anthropic, openai, replay`},
		{"model: openai/\n", `line 1: model: the model after "openai/" is empty`},
		{"model: openai/qwen3\nclassifier_model: tiny\n", `line 2: classifier_model: expected provider/model`},
		{"providers:\n  openai:\n    base_url: localhost:11434/v1\n", `line 3: providers.openai.base_url: "localhost:11434/v1" is not an absolute http or https URL`},
		{"providers:\n  anthropic: {base_url: \"ftp://h\"}\n", `line 2: providers.anthropic.base_url: "ftp://h" is not an absolute http or https URL`},
		// The line of the key, through an alias.
		{"providers:\n  anthropic: &b {api: graphql}\n  openai: *b\n", `line 2: providers.openai.api: "graphql"`},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}

// Every sandbox mode docs/sandbox.md names is accepted in config.yaml
// (bwrap and landlock were refused, though --sandbox took them).
func TestSandboxModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"auto", "bwrap", "landlock", "off", "always"} {
		cfg, err := Parse([]byte("sandbox: " + mode + "\n"))
		if err != nil || cfg.Sandbox != mode {
			t.Errorf("sandbox: %s: got %q, %v", mode, cfg.Sandbox, err)
		}
	}
}

// A relative MAESTRO_HOME is made absolute from the current directory:
// left relative, it slipped past the check that a workspace does not
// hold the home (MAESTRO_HOME=.mh maestro run wrote its session logs
// into the workspace).
func TestHomeIsAbsolute(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]string{".mh": filepath.Join(wd, ".mh"), "/srv/maestro/": "/srv/maestro"} {
		got, err := Home(func(k string) string {
			if k == "MAESTRO_HOME" {
				return env
			}
			return ""
		})
		if err != nil || got != want {
			t.Errorf("MAESTRO_HOME=%s: Home = %q, %v; want %q", env, got, err, want)
		}
	}
}
