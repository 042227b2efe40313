package protocol

import "encoding/json"

// Server → client messages (wire contract §6) other than the per-turn ones in
// turn.go.

// HelloOK acknowledges hello. Over stdio ConnectionID is "local" and
// LeaseExpiresAt is null.
type HelloOK struct {
	ProtocolVersion        string           `json:"protocol_version"`
	ConnectionID           string           `json:"connection_id,omitempty"`
	ClientProtocolVersion  string           `json:"client_protocol_version,omitempty"`
	ClientInfo             *ClientInfo      `json:"client_info,omitempty"`
	Capabilities           *Capabilities    `json:"capabilities,omitempty"`
	OptOutNotifications    []Notification   `json:"opt_out_notifications,omitempty"`
	Role                   Role             `json:"role,omitempty"`
	ControllerConnectionID Nullable[string] `json:"controller_connection_id,omitzero"`
	LeaseExpiresAt         Nullable[string] `json:"lease_expires_at,omitzero"`
	// ServerCapabilities is a later-version field.
	ServerCapabilities *ServerCapabilities `json:"server_capabilities,omitempty"`
}

// ConnectionInfo describes the connection graph; every field is optional.
type ConnectionInfo struct {
	ConnectionID           string            `json:"connection_id,omitempty"`
	ClientProtocolVersion  string            `json:"client_protocol_version,omitempty"`
	ClientInfo             *ClientInfo       `json:"client_info,omitempty"`
	Capabilities           *Capabilities     `json:"capabilities,omitempty"`
	OptOutNotifications    []Notification    `json:"opt_out_notifications,omitempty"`
	Role                   Role              `json:"role,omitempty"`
	ConnectionCount        *int              `json:"connection_count,omitempty"`
	ControllerConnectionID Nullable[string]  `json:"controller_connection_id,omitzero"`
	LeaseExpiresAt         Nullable[string]  `json:"lease_expires_at,omitzero"`
	Connections            []ConnectionState `json:"connections,omitempty"`
}

// Compaction reports a session compaction. Timestamp is an ISO 8601 string.
type Compaction struct {
	Summary             string `json:"summary"`
	FirstKeptEntryIndex int    `json:"first_kept_entry_index"`
	TokensBefore        int64  `json:"tokens_before"`
	Auto                bool   `json:"auto"`
	CustomInstructions  string `json:"custom_instructions,omitempty"`
	Timestamp           string `json:"timestamp"`
}

// ClientToolRequest is the legacy request to run a client-executed tool;
// it is paired with a server_request.
type ClientToolRequest struct {
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
}

// ServerRequest asks the client to decide or do something (wire contract §9).
type ServerRequest struct {
	RequestID         string          `json:"request_id"`
	RequestType       RequestType     `json:"request_type"`
	CallID            string          `json:"call_id"`
	Tool              string          `json:"tool"`
	DisplayName       string          `json:"display_name,omitempty"`
	SummaryLabel      string          `json:"summary_label,omitempty"`
	ActionDescription string          `json:"action_description,omitempty"`
	Args              json.RawMessage `json:"args"`
	Reason            string          `json:"reason"`
	// StartedAtMS is a later-version field (epoch milliseconds).
	StartedAtMS *int64 `json:"started_at_ms,omitempty"`
}

// ServerRequestResolved reports how a server request ended.
type ServerRequestResolved struct {
	RequestID   string      `json:"request_id"`
	RequestType RequestType `json:"request_type"`
	CallID      string      `json:"call_id"`
	Resolution  Resolution  `json:"resolution"`
	Reason      string      `json:"reason,omitempty"`
	ResolvedBy  ResolvedBy  `json:"resolved_by"`
	// StartedAtMS and ResolvedAtMS are later-version fields (epoch ms).
	StartedAtMS  *int64 `json:"started_at_ms,omitempty"`
	ResolvedAtMS *int64 `json:"resolved_at_ms,omitempty"`
}

// RawAgentEvent carries an internal agent event to connections that
// negotiated raw_agent_events.
type RawAgentEvent struct {
	EventType string          `json:"event_type"`
	Event     json.RawMessage `json:"event"`
}

// UtilityCommandStarted reports a started utility command.
type UtilityCommandStarted struct {
	CommandID         string       `json:"command_id"`
	Command           string       `json:"command"`
	Cwd               string       `json:"cwd,omitempty"`
	ShellMode         ShellMode    `json:"shell_mode"`
	TerminalMode      TerminalMode `json:"terminal_mode"`
	PID               *int         `json:"pid,omitempty"`
	Columns           *int         `json:"columns,omitempty"`
	Rows              *int         `json:"rows,omitempty"`
	OwnerConnectionID string       `json:"owner_connection_id,omitempty"`
}

// UtilityCommandResized reports a pty resize.
type UtilityCommandResized struct {
	CommandID string `json:"command_id"`
	Columns   int    `json:"columns"`
	Rows      int    `json:"rows"`
}

// UtilityCommandOutput carries UTF-8 output text (not base64).
type UtilityCommandOutput struct {
	CommandID string `json:"command_id"`
	Stream    Stream `json:"stream"`
	Content   string `json:"content"`
}

// UtilityCommandExited reports the end of a utility command. ExitCode is
// null when the command was killed by a signal, Signal then names it.
type UtilityCommandExited struct {
	CommandID string           `json:"command_id"`
	Success   bool             `json:"success"`
	ExitCode  Nullable[int]    `json:"exit_code,omitzero"`
	Signal    Nullable[string] `json:"signal,omitzero"`
	Reason    string           `json:"reason,omitempty"`
}

// FileSearchResult is one match of a file search.
type FileSearchResult struct {
	Path  string  `json:"path"`
	Score float64 `json:"score"`
}

// UtilityFileSearchResults answers utility_file_search.
type UtilityFileSearchResults struct {
	SearchID  string             `json:"search_id"`
	Query     string             `json:"query"`
	Cwd       string             `json:"cwd"`
	Results   []FileSearchResult `json:"results"`
	Truncated bool               `json:"truncated"`
}

// UtilityFileReadResult answers utility_file_read. Path is absolute,
// RelativePath relative to Cwd; StartLine is 0 for an empty file.
type UtilityFileReadResult struct {
	ReadID       string `json:"read_id"`
	Path         string `json:"path"`
	RelativePath string `json:"relative_path"`
	Cwd          string `json:"cwd"`
	Content      string `json:"content"`
	StartLine    int    `json:"start_line"`
	EndLine      int    `json:"end_line"`
	TotalLines   int    `json:"total_lines"`
	Truncated    bool   `json:"truncated"`
}

// UtilityFileWatchStarted reports a started file watch.
type UtilityFileWatchStarted struct {
	WatchID           string   `json:"watch_id"`
	RootDir           string   `json:"root_dir"`
	IncludePatterns   []string `json:"include_patterns,omitempty"`
	ExcludePatterns   []string `json:"exclude_patterns,omitempty"`
	DebounceMS        int      `json:"debounce_ms"`
	OwnerConnectionID string   `json:"owner_connection_id,omitempty"`
}

// UtilityFileWatchEvent reports one change under a watch. Path is absolute;
// Timestamp is in epoch milliseconds.
type UtilityFileWatchEvent struct {
	WatchID      string     `json:"watch_id"`
	ChangeType   ChangeType `json:"change_type"`
	Path         string     `json:"path"`
	RelativePath string     `json:"relative_path"`
	Timestamp    int64      `json:"timestamp"`
	IsDirectory  bool       `json:"is_directory"`
}

// UtilityFileWatchStopped reports a stopped file watch.
type UtilityFileWatchStopped struct {
	WatchID string `json:"watch_id"`
	Reason  string `json:"reason,omitempty"`
}

func (HelloOK) MessageType() string                  { return TypeHelloOK }
func (ConnectionInfo) MessageType() string           { return TypeConnectionInfo }
func (Compaction) MessageType() string               { return TypeCompaction }
func (ClientToolRequest) MessageType() string        { return TypeClientToolRequest }
func (ServerRequest) MessageType() string            { return TypeServerRequest }
func (ServerRequestResolved) MessageType() string    { return TypeServerRequestResolved }
func (RawAgentEvent) MessageType() string            { return TypeRawAgentEvent }
func (UtilityCommandStarted) MessageType() string    { return TypeUtilityCommandStarted }
func (UtilityCommandResized) MessageType() string    { return TypeUtilityCommandResized }
func (UtilityCommandOutput) MessageType() string     { return TypeUtilityCommandOutput }
func (UtilityCommandExited) MessageType() string     { return TypeUtilityCommandExited }
func (UtilityFileSearchResults) MessageType() string { return TypeUtilityFileSearchResults }
func (UtilityFileReadResult) MessageType() string    { return TypeUtilityFileReadResult }
func (UtilityFileWatchStarted) MessageType() string  { return TypeUtilityFileWatchStarted }
func (UtilityFileWatchEvent) MessageType() string    { return TypeUtilityFileWatchEvent }
func (UtilityFileWatchStopped) MessageType() string  { return TypeUtilityFileWatchStopped }
