package protocol

import "encoding/json"

// Client → server messages (wire contract §5). Optional booleans and integers are
// pointers so that an explicit false or 0 survives a round trip.

// Hello is the handshake. Role defaults to controller.
type Hello struct {
	ProtocolVersion     string         `json:"protocol_version,omitempty"`
	ClientInfo          *ClientInfo    `json:"client_info,omitempty"`
	Capabilities        *Capabilities  `json:"capabilities,omitempty"`
	Role                Role           `json:"role,omitempty"`
	OptOutNotifications []Notification `json:"opt_out_notifications,omitempty"`
}

// Init configures the runtime. SystemPrompt replaces the system prompt;
// AppendSystemPrompt appends "\n\n"+text. They are pointers because an
// explicitly empty prompt is a change, unlike an absent one.
type Init struct {
	SystemPrompt       *string       `json:"system_prompt,omitempty"`
	AppendSystemPrompt *string       `json:"append_system_prompt,omitempty"`
	ThinkingLevel      ThinkingLevel `json:"thinking_level,omitempty"`
	ApprovalMode       ApprovalMode  `json:"approval_mode,omitempty"`
	// History is a later-version field, accepted as any JSON value.
	History json.RawMessage `json:"history,omitempty"`
}

// Prompt starts or continues a run. Attachments are file paths on the
// runtime host.
type Prompt struct {
	Content     string   `json:"content"`
	Attachments []string `json:"attachments,omitempty"`
}

// Interrupt aborts the current run.
type Interrupt struct{}

// Cancel is an alias of Interrupt; only reason strings differ.
type Cancel struct{}

// Shutdown terminates the runtime gracefully.
type Shutdown struct{}

// ToolResponse is the legacy answer to an approval.
type ToolResponse struct {
	CallID   string      `json:"call_id"`
	Approved bool        `json:"approved"`
	Result   *ToolResult `json:"result,omitempty"`
}

// ClientToolResult is the legacy answer to a client tool request.
type ClientToolResult struct {
	CallID  string         `json:"call_id"`
	Content []ContentBlock `json:"content"`
	IsError bool           `json:"is_error"`
}

// ServerRequestResponse is the generic answer to a server_request.
type ServerRequestResponse struct {
	RequestID      string         `json:"request_id"`
	RequestType    RequestType    `json:"request_type"`
	Approved       *bool          `json:"approved,omitempty"`
	Result         *ToolResult    `json:"result,omitempty"`
	DecisionAction DecisionAction `json:"decision_action,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	Content        []ContentBlock `json:"content,omitempty"`
	IsError        *bool          `json:"is_error,omitempty"`
}

// UtilityCommandStart starts a utility command. ShellMode defaults to shell,
// TerminalMode to pipe, AllowStdin to false; Columns and Rows (positive)
// apply only to pty.
type UtilityCommandStart struct {
	CommandID    string            `json:"command_id"`
	Command      string            `json:"command"`
	Cwd          string            `json:"cwd,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	ShellMode    ShellMode         `json:"shell_mode,omitempty"`
	TerminalMode TerminalMode      `json:"terminal_mode,omitempty"`
	AllowStdin   *bool             `json:"allow_stdin,omitempty"`
	Columns      *int              `json:"columns,omitempty" proto:"min=1"`
	Rows         *int              `json:"rows,omitempty" proto:"min=1"`
}

// UtilityCommandTerminate terminates a utility command (immediately when
// Force is true).
type UtilityCommandTerminate struct {
	CommandID string `json:"command_id"`
	Force     *bool  `json:"force,omitempty"`
}

// UtilityCommandStdin writes to a utility command's stdin, closing it when
// EOF is true.
type UtilityCommandStdin struct {
	CommandID string `json:"command_id"`
	Content   string `json:"content"`
	EOF       *bool  `json:"eof,omitempty"`
}

// UtilityCommandResize resizes a pty utility command.
type UtilityCommandResize struct {
	CommandID string `json:"command_id"`
	Columns   int    `json:"columns" proto:"min=1"`
	Rows      int    `json:"rows" proto:"min=1"`
}

// UtilityFileSearch searches file names.
type UtilityFileSearch struct {
	SearchID string `json:"search_id"`
	Query    string `json:"query"`
	Cwd      string `json:"cwd,omitempty"`
	Limit    *int   `json:"limit,omitempty"`
}

// UtilityFileRead reads lines of a text file. Offset is a 1-based line,
// Limit a number of lines.
type UtilityFileRead struct {
	ReadID string `json:"read_id"`
	Path   string `json:"path"`
	Cwd    string `json:"cwd,omitempty"`
	Offset *int   `json:"offset,omitempty"`
	Limit  *int   `json:"limit,omitempty"`
}

// UtilityFileWatchStart starts a recursive file watch.
type UtilityFileWatchStart struct {
	WatchID         string   `json:"watch_id"`
	RootDir         string   `json:"root_dir,omitempty"`
	IncludePatterns []string `json:"include_patterns,omitempty"`
	ExcludePatterns []string `json:"exclude_patterns,omitempty"`
	DebounceMS      *int     `json:"debounce_ms,omitempty" proto:"min=0"`
}

// UtilityFileWatchStop stops a file watch.
type UtilityFileWatchStop struct {
	WatchID string `json:"watch_id"`
}

func (Hello) MessageType() string                   { return TypeHello }
func (Init) MessageType() string                    { return TypeInit }
func (Prompt) MessageType() string                  { return TypePrompt }
func (Interrupt) MessageType() string               { return TypeInterrupt }
func (Cancel) MessageType() string                  { return TypeCancel }
func (Shutdown) MessageType() string                { return TypeShutdown }
func (ToolResponse) MessageType() string            { return TypeToolResponse }
func (ClientToolResult) MessageType() string        { return TypeClientToolResult }
func (ServerRequestResponse) MessageType() string   { return TypeServerRequestResponse }
func (UtilityCommandStart) MessageType() string     { return TypeUtilityCommandStart }
func (UtilityCommandTerminate) MessageType() string { return TypeUtilityCommandTerminate }
func (UtilityCommandStdin) MessageType() string     { return TypeUtilityCommandStdin }
func (UtilityCommandResize) MessageType() string    { return TypeUtilityCommandResize }
func (UtilityFileSearch) MessageType() string       { return TypeUtilityFileSearch }
func (UtilityFileRead) MessageType() string         { return TypeUtilityFileRead }
func (UtilityFileWatchStart) MessageType() string   { return TypeUtilityFileWatchStart }
func (UtilityFileWatchStop) MessageType() string    { return TypeUtilityFileWatchStop }
