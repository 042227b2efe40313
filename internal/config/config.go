// Package config reads Maestro's user configuration file,
// ~/.maestro/config.yaml (or $MAESTRO_HOME/config.yaml). Every field is
// optional; the environment and command-line flags override it.
//
//	model: anthropic/claude-sonnet-4-5   # provider/model
//	sandbox: auto                        # auto | always | off
//	max_iterations: 50
//	max_file_bytes: 10485760             # Read/Edit/Write size limit
//	classifier_model: anthropic/claude-haiku-4-5  # picks the piece (default: model)
//	agent_permission: edit               # agent CLIs: read-only | edit | full
//	event_bus: {url: "nats://127.0.0.1:4222", create_stream: false, source: maestro}
//	providers:
//	  anthropic: {api_key: "...", base_url: "..."}
//	  openai:    {api_key: "...", base_url: "http://localhost:11434/v1", api: chat}
//	models:
//	  qwen3-coder: {context_window: 32768}  # tokens; wins over what the server says (also openai/qwen3-coder)
//	mcp_servers:                         # MCP servers (docs/mcp.md)
//	  everything: {command: npx, args: [-y, "@modelcontextprotocol/server-everything"]}
//	  tracker:    {url: "https://mcp.example.com/mcp", headers: {Authorization: "Bearer ${TRACKER_TOKEN}"}}
//	web:                                 # WebFetch, DownloadFile, WebSearch (docs/web-tools.md)
//	  allow_hosts: [wiki.internal, 10.20.0.0/16]  # exceptions to the network guard
//	  search: {backend: searxng, url: "http://localhost:8888"}  # or brave / tavily with api_key
//	ssh_connections:                     # SshExec, SshUpload, SshDownload
//	  6f9619ff-8b86-d011-b42d-00c04fc964ff: {host: h, user: ops, key_file: ~/.ssh/k, host_key: "ssh-ed25519 AAAA…"}
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/llm"
)

// Config is the parsed configuration file.
type Config struct {
	// Model is "provider/model".
	Model string `yaml:"model"`
	// Sandbox is the Bash sandbox mode: auto, bwrap, landlock or off
	// ("always" is accepted for bwrap).
	Sandbox       string    `yaml:"sandbox"`
	MaxIterations int       `yaml:"max_iterations"`
	Providers     Providers `yaml:"providers"`
	// Path is where the configuration was read from ("" when none).
	Path string `yaml:"-"`

	// MaxFileBytes bounds the files the Read, Edit and Write tools take
	// whole, in bytes (0: the default, 10 MiB).
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// Models holds per-model settings, keyed by the model id, with or
	// without its provider/ prefix (ContextWindows).
	Models map[string]Model `yaml:"models"`
	// CompactAt is the share of the model's context window (0 < x ≤ 1)
	// the next request of a session may reach before its older turns are
	// compacted (docs/compaction.md); 0: 0.85. Piece movements keep their
	// own 70/85/95 % pressure.
	CompactAt float64 `yaml:"compact_at"`
	// ClassifierModel is the model ("provider/model") that picks the
	// piece of a task: a cheap, fast one; empty means the run's model.
	ClassifierModel string `yaml:"classifier_model"`
	// AgentPermission is the default permission level of agent CLIs
	// (--permission): read-only, edit or full ("": edit).
	AgentPermission string `yaml:"agent_permission"`
	// MCPServers are the MCP servers whose tools agents may use, keyed by
	// their slug (the <server> of mcp__<server>__<tool>); see docs/mcp.md.
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`
	// EventBus publishes the platform events (CloudEvents) to NATS
	// JetStream (docs/events.md, "Platform events"); the environment
	// (MAESTRO_EVENT_BUS_URL, EVALOPS_NATS_URL, MAESTRO_EVENT_BUS)
	// overrides it.
	EventBus EventBus `yaml:"event_bus"`
	// Web configures the web tools and their network guard.
	Web Web `yaml:"web"`
	// SSHConnections registers the connections the SSH tools may use, by
	// id (a movement names them in allowed_ssh_connections).
	SSHConnections map[string]SSHConnection `yaml:"ssh_connections"`
	// Artifacts is where serve and workers keep the files of queued
	// jobs (uploads, output/, subtasks/, logs): s3://bucket/prefix for an
	// S3-compatible store; empty: the data directory (docs/scale-out.md,
	// "Artifacts"). The --artifacts flag overrides it.
	Artifacts string `yaml:"artifacts"`
	// ArtifactsS3 reaches the S3 store where the AWS variables do not.
	ArtifactsS3 ArtifactsS3 `yaml:"artifacts_s3"`
	// BudgetUSDMonth is what the operator means to spend on models in a
	// calendar month, in USD; the web UI's usage page draws it against
	// the month's cost (GET /api/v1/usage). 0: no budget.
	BudgetUSDMonth float64 `yaml:"budget_usd_month"`
}

// ArtifactsS3 configures the S3-compatible artifact store; the AWS
// variables (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS_REGION,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) fill what it leaves empty.
type ArtifactsS3 struct {
	Endpoint  string `yaml:"endpoint"`
	Region    string `yaml:"region"`
	AccessKey string `yaml:"access_key"`
	SecretKey string `yaml:"secret_key"`
}

// MCPServer is one MCP server: a command speaking MCP over stdio, or the
// URL of a streamable HTTP endpoint. Values of Env and Headers may name
// Maestro's environment variables as ${VAR}.
type MCPServer struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds each tool call, in seconds (0: the default, 120).
	Timeout int `yaml:"timeout"`
	// AllowSampling lets the server ask the session's model for
	// completions (sampling/createMessage); otherwise it is refused.
	AllowSampling bool `yaml:"allow_sampling"`
}

// EventBus configures the platform event publisher.
type EventBus struct {
	// URL is the NATS server ("nats://host:4222"); empty: no bus unless
	// the environment names one.
	URL string `yaml:"url"`
	// CreateStream creates the stream MAESTRO on subjects maestro.>
	// (else the stream is expected to exist).
	CreateStream bool `yaml:"create_stream"`
	// Source is the CloudEvents source (default "maestro").
	Source string `yaml:"source"`
}

// SSHConnection is one SSH connection of the SSH tools (docs/web-tools.md,
// "SSH tools").
type SSHConnection struct {
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
	User string `yaml:"user"`
	// KeyFile is a private key file (OpenSSH or PEM, unencrypted);
	// Password is used without one.
	KeyFile  string `yaml:"key_file"`
	Password string `yaml:"password"`
	// HostKey is the server's public key in authorized_keys form
	// ("ssh-ed25519 AAAA…"); required: no trust on first use.
	HostKey string `yaml:"host_key"`
}

// Web configures WebFetch, DownloadFile and WebSearch (docs/web-tools.md).
type Web struct {
	// AllowHosts lists the exceptions to the network guard: host names,
	// IP addresses and CIDR prefixes the web tools may reach although
	// they are loopback, private, link-local or otherwise refused.
	AllowHosts []string `yaml:"allow_hosts"`
	// TimeoutSeconds bounds one request, redirects included (0: 30).
	TimeoutSeconds int `yaml:"timeout_seconds"`
	// MaxRedirects caps the redirects followed (0: 5).
	MaxRedirects int `yaml:"max_redirects"`
	// MaxBytes caps the body WebFetch reads (0: 5 MiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxDownloadBytes caps a DownloadFile (0: 25 MiB).
	MaxDownloadBytes int64 `yaml:"max_download_bytes"`
	// Search chooses the WebSearch backend; without one WebSearch is not
	// offered.
	Search WebSearch `yaml:"search"`
	// Sessions offers WebFetch, DownloadFile (and WebSearch with a
	// backend) to sessions without a piece too: maestro run --no-piece,
	// headless, serve's sessions and no_piece jobs (pieces choose with
	// allowed_tools).
	Sessions bool `yaml:"sessions"`
}

// WebSearch configures the WebSearch backend.
type WebSearch struct {
	// Backend is searxng, brave or tavily.
	Backend string `yaml:"backend"`
	// URL is the SearXNG instance; for brave and tavily it replaces the
	// public API's address.
	URL string `yaml:"url"`
	// APIKey authenticates to brave and tavily (else BRAVE_API_KEY or
	// TAVILY_API_KEY from the environment).
	APIKey string `yaml:"api_key"`
}

// Model holds one model's settings.
type Model struct {
	// ContextWindow is the model's context window in tokens; it wins over
	// what the provider or the catalogue says (context pressure and
	// compaction are measured against it).
	ContextWindow int64 `yaml:"context_window"`
}

// ContextWindows maps the model ids of provider ("anthropic", "openai")
// to their configured context windows. A key is the id the provider is
// sent ("qwen3", or "meta-llama/llama-3.3-70b" for an OpenRouter id) or
// the id as --model writes it, with its provider/ prefix
// ("anthropic/claude-sonnet-4-5"), which wins over the bare id.
func (c Config) ContextWindows(provider string) map[string]int64 {
	out := map[string]int64{}
	for id, m := range c.Models {
		if m.ContextWindow > 0 {
			out[id] = m.ContextWindow
		}
	}
	for id, m := range c.Models {
		if bare, ok := strings.CutPrefix(id, provider+"/"); ok && m.ContextWindow > 0 && bare != "" {
			out[bare] = m.ContextWindow
		}
	}
	return out
}

// Providers holds per-provider settings.
type Providers struct {
	Anthropic Provider `yaml:"anthropic"`
	OpenAI    Provider `yaml:"openai"`
}

// Provider holds one provider's connection settings.
type Provider struct {
	APIKey  string `yaml:"api_key"`
	BaseURL string `yaml:"base_url"`
	// API selects the OpenAI API: chat or responses (default: automatic).
	API string `yaml:"api"`
	// ManagedGateway marks the provider's endpoint as a managed model
	// gateway: model requests then carry the content-free join keys and
	// the trace context as headers (docs/events.md, "Model requests to a
	// managed gateway").
	ManagedGateway bool `yaml:"managed_gateway"`
}

// Home is Maestro's state directory: $MAESTRO_HOME, else ~/.maestro,
// as an absolute path (a relative MAESTRO_HOME is taken from the current
// directory: the check that a workspace does not hold the home compares
// absolute paths, and a relative one slipped past it).
// getenv reads the environment (nil = os.Getenv).
func Home(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if h := getenv("MAESTRO_HOME"); h != "" {
		abs, err := filepath.Abs(h)
		if err != nil {
			return "", fmt.Errorf("MAESTRO_HOME %q: %w", h, err)
		}
		return abs, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find home directory: %w", err)
	}
	return filepath.Join(home, ".maestro"), nil
}

// Load reads the configuration file at path; a missing file is an empty
// configuration. Unknown keys and wrong types are errors naming the line.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	cfg.Path = path
	return cfg, nil
}

// Parse decodes configuration YAML strictly: an unknown key or a value of
// the wrong shape is an error naming its line and key (and, for a key,
// the known keys and a close one).
func Parse(data []byte) (Config, error) {
	if err := checkDocument(data); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	// A second document (after ---) would be ignored whole: refused.
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		if len(next.Content) > 0 && next.Content[0].ShortTag() != "!!null" {
			return Config{}, fmt.Errorf("invalid configuration: line %d: a second YAML document (after ---); the file holds one mapping, and the settings after it would be ignored", max(next.Line, 1))
		}
	} else if !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	switch cfg.Sandbox {
	case "", "auto", "always", "off", "bwrap", "landlock": // docs/sandbox.md, "Modes"
	default:
		return Config{}, invalidValue(data, []string{"sandbox"}, "%q is not one of auto, always, off, bwrap or landlock (always is bwrap's former name)", cfg.Sandbox)
	}
	switch cfg.AgentPermission {
	case "", "read-only", "edit", "full":
	default:
		return Config{}, invalidValue(data, []string{"agent_permission"}, "%q is not one of read-only, edit, full", cfg.AgentPermission)
	}
	switch cfg.Providers.OpenAI.API {
	case "", "chat", "responses":
	default:
		return Config{}, invalidValue(data, []string{"providers", "openai", "api"}, "%q is not one of chat, responses", cfg.Providers.OpenAI.API)
	}
	if cfg.MaxIterations < 0 {
		return Config{}, invalidValue(data, []string{"max_iterations"}, "must be positive, got %d", cfg.MaxIterations)
	}
	if cfg.CompactAt < 0 || cfg.CompactAt > 1 || (cfg.CompactAt == 0 && compactAtGiven(data)) {
		return Config{}, invalidValue(data, []string{"compact_at"}, "a share of the context window, 0 < compact_at ≤ 1 (e.g. 0.85), got %g", cfg.CompactAt)
	}
	if cfg.BudgetUSDMonth < 0 {
		return Config{}, invalidValue(data, []string{"budget_usd_month"}, "a monthly budget in USD must not be negative, got %g", cfg.BudgetUSDMonth)
	}
	for id, m := range cfg.Models {
		if m.ContextWindow < 0 {
			return Config{}, invalidValue(data, []string{"models", id, "context_window"}, "must be positive, got %d", m.ContextWindow)
		}
	}
	for slug, srv := range cfg.MCPServers {
		if err := srv.check(slug); err != nil {
			return Config{}, invalidValue(data, []string{"mcp_servers", slug}, "%w", err)
		}
	}
	switch cfg.Web.Search.Backend {
	case "", "searxng", "brave", "tavily":
	default:
		return Config{}, invalidValue(data, []string{"web", "search", "backend"}, "%q is not one of searxng, brave, tavily", cfg.Web.Search.Backend)
	}
	if cfg.Web.TimeoutSeconds < 0 || cfg.Web.MaxRedirects < 0 || cfg.Web.MaxBytes < 0 || cfg.Web.MaxDownloadBytes < 0 {
		return Config{}, invalidValue(data, []string{"web"}, "timeout_seconds, max_redirects, max_bytes and max_download_bytes must be positive")
	}
	for id, c := range cfg.SSHConnections {
		var missing []string
		for _, f := range [][2]string{{"host", c.Host}, {"user", c.User}, {"host_key", c.HostKey}} {
			if f[1] == "" {
				missing = append(missing, f[0])
			}
		}
		if c.KeyFile == "" && c.Password == "" {
			missing = append(missing, "key_file or password")
		}
		if len(missing) > 0 {
			msg := "host, user, host_key and key_file or password are required; missing: " + strings.Join(missing, ", ")
			if c.HostKey == "" {
				msg += ` (host_key is the server's public key, pinned: "ssh-ed25519 AAAA…", as ssh-keyscan -t ed25519 HOST prints it after the host name)`
			}
			return Config{}, invalidValue(data, []string{"ssh_connections", id}, "%s", msg)
		}
		// An out-of-range port was only refused by the dial, as "invalid
		// port" in a tool result; a relative key file was read from the
		// directory the process happened to start in.
		if c.Port < 0 || c.Port > 65535 {
			return Config{}, invalidValue(data, []string{"ssh_connections", id, "port"}, "must be 1-65535 (default 22), got %d", c.Port)
		}
		if c.KeyFile != "" && !filepath.IsAbs(c.KeyFile) && !strings.HasPrefix(c.KeyFile, "~/") {
			return Config{}, invalidValue(data, []string{"ssh_connections", id, "key_file"}, "%q: expected an absolute path or one starting with ~/", c.KeyFile)
		}
	}
	if cfg.MaxFileBytes < 0 {
		return Config{}, invalidValue(data, []string{"max_file_bytes"}, "must be positive, got %d", cfg.MaxFileBytes)
	}
	for _, m := range [][2]string{{"model", cfg.Model}, {"classifier_model", cfg.ClassifierModel}} {
		if msg := CheckModel(m[1]); msg != "" {
			return Config{}, invalidValue(data, []string{m[0]}, "%s", msg)
		}
	}
	for _, p := range [][2]string{{"anthropic", cfg.Providers.Anthropic.BaseURL}, {"openai", cfg.Providers.OpenAI.BaseURL}} {
		if u, err := url.Parse(p[1]); p[1] != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			return Config{}, invalidValue(data, []string{"providers", p[0], "base_url"}, "%q is not an absolute http or https URL (e.g. http://localhost:11434/v1)", p[1])
		}
	}
	return cfg, nil
}

// ModelProviders are the providers a model may be given with; the one
// list internal/providers selects from too (it reads this file, so it
// cannot be imported here).
var ModelProviders = []string{"anthropic", "openai", "replay"}

// CheckModel says what is wrong with a model as model and
// classifier_model take it (as --model does): provider/model, or a model
// id of the built-in catalogue; "" when nothing is.
func CheckModel(spec string) string {
	if spec == "" {
		return ""
	}
	provider, model, ok := strings.Cut(spec, "/")
	switch {
	case !ok:
		if _, known := llm.LookupModel(spec); known {
			return ""
		}
		return fmt.Sprintf("expected provider/model with provider one of %s (e.g. anthropic/claude-sonnet-4-5, openai/llama3.2), found %q", strings.Join(ModelProviders, ", "), spec)
	case !slices.Contains(ModelProviders, provider):
		return fmt.Sprintf("unknown provider %q in %q; expected one of %s", provider, spec, strings.Join(ModelProviders, ", "))
	case model == "":
		return fmt.Sprintf("the model after %q is empty", provider+"/")
	}
	return ""
}

// mcpSlug is the shape of an MCP server's slug (required_mcp in
// docs/spec/seed-piece-schema.md).
var mcpSlug = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// check reports what is wrong with the server declared under slug.
func (s MCPServer) check(slug string) error {
	switch {
	case !mcpSlug.MatchString(slug):
		return fmt.Errorf("the slug must be 1-64 of a-z, 0-9, _ and -")
	case strings.Contains(slug, "__"):
		return fmt.Errorf("the slug must not contain __ (it separates server and tool in mcp__<server>__<tool>)")
	case strings.HasSuffix(slug, "_"):
		// gh_ and its tool x, gh and its tool _x: mcp__gh___x both, and
		// a piece's mcp__gh__* would take gh_'s tools too.
		return fmt.Errorf("the slug must not end in _ (mcp__%s__<tool> would read as server %s)", slug, strings.TrimRight(slug, "_"))
	case (s.Command == "") == (s.URL == ""):
		return fmt.Errorf("expected either command (stdio) or url (streamable HTTP)")
	case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0):
		return fmt.Errorf("args and env go with command, not url")
	case s.Command != "" && len(s.Headers) > 0:
		return fmt.Errorf("headers go with url, not command")
	case s.Timeout < 0:
		return fmt.Errorf("timeout: must be positive, got %d", s.Timeout)
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q: expected an http or https URL", s.URL)
		}
	}
	return nil
}

// compactAtGiven reports whether data sets compact_at to a value (not
// null): an explicit 0 is refused, not taken as unset (the default 0.85).
func compactAtGiven(data []byte) bool {
	var raw struct {
		CompactAt *float64 `yaml:"compact_at"`
	}
	return bytes.Contains(data, []byte("compact_at")) && yaml.Unmarshal(data, &raw) == nil && raw.CompactAt != nil
}
