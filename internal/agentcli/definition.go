// Package agentcli drives third-party coding-agent CLIs (Claude Code,
// Codex, Gemini CLI, OpenCode, Qwen Code, and any CLI a user describes) as
// Maestro providers.
//
// An agent CLI is described by data, a [Definition] loaded from YAML: the
// built-in definitions are embedded (adapters/*.yaml) and users add their
// own in ~/.maestro/agents/*.yaml without recompiling. A definition says how
// to find the binary and its version, how to build its argument vector
// (streaming JSON mode, resume, read-only, model, working directory, extra
// directories, images, where the prompt goes), its environment, its
// capabilities, which stream parser reads its stdout, the error patterns of
// each failure category and where it stores its sessions.
//
// The parsers ([NewParser], [Parse]) turn a CLI's stdout, line by line and
// without buffering the stream, into headless-protocol events
// (internal/protocol) next to the raw line, plus the CLI's session id and
// final result. [Classify] maps structured error payloads, stderr and exit
// codes to a [Category]. [Executor] runs one prompt on a CLI in its own
// process group. The session readers list and read the sessions each CLI
// stores for a project directory.
package agentcli

// Definition describes one agent CLI. Field names are the YAML keys.
type Definition struct {
	// ID is the adapter's name (maestro run --agent ID), e.g. "claude-code".
	ID string `yaml:"id"`
	// Name is the display name.
	Name string `yaml:"name"`
	// Binary is the executable looked up on PATH (or an absolute path).
	Binary string `yaml:"binary"`
	// VersionArgs probe the version (default ["--version"]); VersionPattern
	// is a regexp whose first group (or whole match) is the version.
	VersionArgs    []string `yaml:"version_args"`
	VersionPattern string   `yaml:"version_pattern"`
	// Parser names the stdout parser: claude-stream-json, codex-json,
	// gemini-stream-json, opencode-json, qwen-stream-json, or one of the
	// generic parsers configured below: text (TextParser) and jsonl (JSONL).
	Parser string `yaml:"parser"`
	// TextParser configures the text parser (parser: text).
	TextParser TextParserConfig `yaml:"text_parser"`
	// JSONL configures the jsonl mapping parser (parser: jsonl).
	JSONL JSONLMapping `yaml:"jsonl"`
	// SessionStorage names the session reader: claude-projects,
	// codex-rollouts, gemini-chats, opencode-sqlite, qwen-projects or none.
	SessionStorage string `yaml:"session_storage"`
	// Args are the argument builders.
	Args Args `yaml:"args"`
	// Env is added to the CLI's environment on every run.
	Env map[string]string `yaml:"env"`

	// Permission modes (docs/agent-clis.md, "Permission modes"): with
	// args.read_only, args.edit and args.full_access, the environment of
	// each level, added on top of Env and the run's own environment.
	ReadOnlyEnv   map[string]string `yaml:"read_only_env"`
	EditEnv       map[string]string `yaml:"edit_env"`
	FullAccessEnv map[string]string `yaml:"full_access_env"`
	// JSONEnv names the variables that hold a JSON object (OpenCode's
	// OPENCODE_CONFIG_CONTENT): layers merge into them key by key.
	JSONEnv []string `yaml:"json_env"`
	// Denied are regexps (case-insensitive unless "(?-i)") matched against
	// the output of a failed tool call: a match means the CLI's permission
	// mode refused the call, which Maestro then reports loudly.
	Denied []string `yaml:"denied"`

	// Capabilities is the capability set.
	Capabilities Capabilities `yaml:"capabilities"`
	// SlashCommandsProbe, when set, asks the CLI for its slash commands
	// (slash.go); else they are read from its runs (Claude's init event).
	SlashCommandsProbe SlashCommandsProbe `yaml:"slash_commands_probe"`
	// ContextWindow is the default context window in tokens.
	ContextWindow int `yaml:"context_window"`
	// Errors are the error patterns (Go regexps, matched case-insensitively
	// unless they start with "(?-i)") per category.
	Errors ErrorPatterns `yaml:"errors"`
	// ExitCodes maps exit statuses to categories (e.g. Gemini's 41 → auth).
	ExitCodes map[string]Category `yaml:"exit_codes"`

	// Source is where the definition was loaded from ("builtin:claude-code.yaml"
	// or a file path); set by the loader.
	Source string `yaml:"-"`
	// Overrides is set by the loader on a user file whose id is a built-in
	// one (it replaces that definition).
	Overrides bool `yaml:"-"`
	// idLine, idCol locate the id in Source (a duplicate id is reported
	// there).
	idLine, idCol int
}

// Args are the argument builders of a Definition. Token lists may hold the
// placeholders {prompt}, {session}, {model}, {dir}, {path} and {text}.
// Assembly order (see [Definition.Argv]): working_dir (when
// working_dir_first) or nothing, batch_prefix, base, batch (dropped in
// read-only mode), json_output, then read_only, edit or full_access, model,
// resume, de-duplication of repeated flags, working_dir (when not first),
// additional_dir per directory, system_prompt, image per image, extra, and
// the prompt last.
type Args struct {
	Base        []string `yaml:"base"`
	BatchPrefix []string `yaml:"batch_prefix"`
	Batch       []string `yaml:"batch"`
	JSONOutput  []string `yaml:"json_output"`
	Resume      []string `yaml:"resume"`
	// The permission levels' arguments (see Permission): ReadOnly replaces
	// Batch; Edit and FullAccess follow it. ReadOnlyEnforce says the CLI
	// itself enforces read-only (else Maestro warns it is only requested).
	ReadOnly        []string `yaml:"read_only"`
	ReadOnlyEnforce bool     `yaml:"read_only_enforced"`
	Edit            []string `yaml:"edit"`
	FullAccess      []string `yaml:"full_access"`
	NoTools         []string `yaml:"no_tools"`
	Model           []string `yaml:"model"`
	WorkingDir      []string `yaml:"working_dir"`
	WorkingDirFirst bool     `yaml:"working_dir_first"`
	AdditionalDir   []string `yaml:"additional_dir"`
	Image           []string `yaml:"image"`
	// ImagePrompt, when set, is prepended to the prompt once per image
	// instead of Image flags (e.g. "@{path} ").
	ImagePrompt  string   `yaml:"image_prompt"`
	SystemPrompt []string `yaml:"system_prompt"`
	// Prompt delivers the prompt as flags (e.g. ["-p", "{prompt}"]). When
	// empty the prompt is a positional argument, after "--" unless
	// NoPromptSeparator.
	Prompt            []string `yaml:"prompt"`
	NoPromptSeparator bool     `yaml:"no_prompt_separator"`
	// PromptStdin writes the prompt to stdin (closed after it) instead of
	// the command line: OpenCode's run wraps every argument holding a
	// space in double quotes (escaping those inside) before the model
	// sees it, and reads stdin as it is.
	PromptStdin bool `yaml:"prompt_stdin"`
	// Streaming is added after json_output when the streaming capability
	// is on (Claude's --include-partial-messages: token-level deltas).
	Streaming []string `yaml:"streaming"`
}

// Capabilities is the capability set of an agent CLI (founding document
// §2.7). False hides or disables the matching feature.
type Capabilities struct {
	Resume                   bool `yaml:"resume"`
	ReadOnlyMode             bool `yaml:"read_only_mode"`
	JSONOutput               bool `yaml:"json_output"`
	SessionID                bool `yaml:"session_id"`
	ImageInput               bool `yaml:"image_input"`
	ImageInputOnResume       bool `yaml:"image_input_on_resume"`
	SlashCommands            bool `yaml:"slash_commands"`
	StreamJSONInput          bool `yaml:"stream_json_input"`
	PromptViaStdin           bool `yaml:"prompt_via_stdin"`
	SessionStorage           bool `yaml:"session_storage"`
	CostTracking             bool `yaml:"cost_tracking"`
	UsageStats               bool `yaml:"usage_stats"`
	BatchMode                bool `yaml:"batch_mode"`
	RequiresPromptToStart    bool `yaml:"requires_prompt_to_start"`
	Streaming                bool `yaml:"streaming"`
	ModelSelection           bool `yaml:"model_selection"`
	ResultMessages           bool `yaml:"result_messages"`
	ThinkingDisplay          bool `yaml:"thinking_display"`
	ContextMerge             bool `yaml:"context_merge"`
	ContextExport            bool `yaml:"context_export"`
	Wizard                   bool `yaml:"wizard"`
	GroupChatModeration      bool `yaml:"group_chat_moderation"`
	JSONLineOutput           bool `yaml:"json_line_output"`
	CombinedContextWindow    bool `yaml:"combined_context_window"`
	AppendSystemPrompt       bool `yaml:"append_system_prompt"`
	ProjectMemory            bool `yaml:"project_memory"`
	AdditionalDirectories    bool `yaml:"additional_directories"`
	StandardPermissionMode   bool `yaml:"standard_permission_mode"`
	PermissionRelayOverStdio bool `yaml:"permission_relay_over_stdio"`
}

// ErrorPatterns are regexps per category, tried in [CategoryOrder].
type ErrorPatterns struct {
	RateLimited      []string `yaml:"rate_limited"`
	NetworkError     []string `yaml:"network_error"`
	TokenExhaustion  []string `yaml:"token_exhaustion"`
	AuthExpired      []string `yaml:"auth_expired"`
	AgentCrashed     []string `yaml:"agent_crashed"`
	SessionNotFound  []string `yaml:"session_not_found"`
	PermissionDenied []string `yaml:"permission_denied"`
}

// byCategory returns the pattern list of c.
func (p *ErrorPatterns) byCategory(c Category) []string {
	switch c {
	case RateLimited:
		return p.RateLimited
	case NetworkError:
		return p.NetworkError
	case TokenExhaustion:
		return p.TokenExhaustion
	case AuthExpired:
		return p.AuthExpired
	case AgentCrashed:
		return p.AgentCrashed
	case SessionNotFound:
		return p.SessionNotFound
	case PermissionDenied:
		return p.PermissionDenied
	}
	return nil
}
