package protocol

import "encoding/json"

// Runtime state and snapshots (wire contract §7) and the SSE envelopes that carry
// them (§12).

// Snapshot is a runtime snapshot (HeadlessRuntimeSnapshot). Note the
// camelCase protocolVersion. LastInit is the last init message received,
// encoded with its "type", or null.
type Snapshot struct {
	ProtocolVersion string       `json:"protocolVersion"`
	SessionID       string       `json:"session_id"`
	Cursor          int64        `json:"cursor"`
	LastInit        *Init        `json:"last_init"`
	State           RuntimeState `json:"state"`
}

// RuntimeState is a runtime's state (HeadlessRuntimeState). The lists
// without omitempty are always present (nil encodes as []). PendingRequests
// is optional on input (older runtimes lack it) but always encoded, as the
// reference server does.
type RuntimeState struct {
	ProtocolVersion          string                 `json:"protocol_version,omitempty"`
	ClientProtocolVersion    string                 `json:"client_protocol_version,omitempty"`
	ClientInfo               *ClientInfo            `json:"client_info,omitempty"`
	Capabilities             *Capabilities          `json:"capabilities,omitempty"`
	OptOutNotifications      []Notification         `json:"opt_out_notifications,omitempty"`
	ConnectionRole           Role                   `json:"connection_role,omitempty"`
	ConnectionCount          int                    `json:"connection_count"`
	SubscriberCount          int                    `json:"subscriber_count"`
	ControllerSubscriptionID Nullable[string]       `json:"controller_subscription_id,omitzero"`
	ControllerConnectionID   Nullable[string]       `json:"controller_connection_id,omitzero"`
	Connections              []ConnectionState      `json:"connections"`
	Model                    string                 `json:"model,omitempty"`
	Provider                 string                 `json:"provider,omitempty"`
	SessionID                Nullable[string]       `json:"session_id,omitzero"`
	Cwd                      string                 `json:"cwd,omitempty"`
	GitBranch                Nullable[string]       `json:"git_branch,omitzero"`
	CurrentResponse          *CurrentResponse       `json:"current_response,omitempty"`
	PendingRequests          []PendingRequest       `json:"pending_requests,omitempty" proto:"always"`
	PendingApprovals         []PendingItem          `json:"pending_approvals"`
	PendingClientTools       []PendingItem          `json:"pending_client_tools"`
	PendingMCPElicitations   []PendingItem          `json:"pending_mcp_elicitations"`
	PendingUserInputs        []PendingItem          `json:"pending_user_inputs"`
	PendingToolRetries       []PendingItem          `json:"pending_tool_retries"`
	TrackedTools             []PendingItem          `json:"tracked_tools"`
	ActiveTools              []ActiveTool           `json:"active_tools"`
	ActiveUtilityCommands    []ActiveUtilityCommand `json:"active_utility_commands"`
	ActiveFileWatches        []ActiveFileWatch      `json:"active_file_watches"`
	IsReady                  bool                   `json:"is_ready"`
	IsResponding             bool                   `json:"is_responding"`
	LastError                string                 `json:"last_error,omitempty"`
	LastErrorType            ErrorType              `json:"last_error_type,omitempty"`
	LastStatus               string                 `json:"last_status,omitempty"`
	LastResponseDurationMS   *int64                 `json:"last_response_duration_ms,omitempty"`
	LastTTFTMS               *int64                 `json:"last_ttft_ms,omitempty"`
}

// CurrentResponse is the assistant message being streamed.
type CurrentResponse struct {
	ResponseID string `json:"response_id"`
	Text       string `json:"text"`
	Thinking   string `json:"thinking"`
	Usage      *Usage `json:"usage,omitempty"`
}

// PendingItem is one entry of the pending_* lists and tracked_tools.
// RequestID is left empty when it equals CallID.
type PendingItem struct {
	CallID            string          `json:"call_id"`
	RequestID         string          `json:"request_id,omitempty"`
	Tool              string          `json:"tool"`
	DisplayName       string          `json:"display_name,omitempty"`
	SummaryLabel      string          `json:"summary_label,omitempty"`
	ActionDescription string          `json:"action_description,omitempty"`
	Args              json.RawMessage `json:"args"`
}

// PendingRequest is one entry of the unified pending_requests list. ID is
// request_id, else call_id; Kind is the request type. Status is always
// "pending" and Visibility always "user": the encoder fills them in when
// left empty and the decoder accepts no other value.
type PendingRequest struct {
	ID                string          `json:"id"`
	Kind              RequestType     `json:"kind"`
	Status            string          `json:"status" proto:"const=pending"`
	Visibility        string          `json:"visibility" proto:"const=user"`
	SessionID         string          `json:"session_id,omitempty"`
	ToolCallID        string          `json:"tool_call_id"`
	CallID            string          `json:"call_id"`
	RequestID         string          `json:"request_id,omitempty"`
	ToolName          string          `json:"tool_name"`
	Tool              string          `json:"tool"`
	DisplayName       string          `json:"display_name,omitempty"`
	SummaryLabel      string          `json:"summary_label,omitempty"`
	ActionDescription string          `json:"action_description,omitempty"`
	Args              json.RawMessage `json:"args"`
	Source            PendingSource   `json:"source"`
	// Platform is any JSON value describing a platform-sourced request.
	Platform json.RawMessage `json:"platform,omitempty"`
}

// ActiveTool is a tool call that is executing, with its output so far.
type ActiveTool struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Output string `json:"output"`
}

// ActiveUtilityCommand is a running utility command: the
// utility_command_started fields plus Output, a tail-truncated buffer of at
// most MaxActiveCommandOutput characters.
type ActiveUtilityCommand struct {
	CommandID         string       `json:"command_id"`
	Command           string       `json:"command"`
	Cwd               string       `json:"cwd,omitempty"`
	ShellMode         ShellMode    `json:"shell_mode"`
	TerminalMode      TerminalMode `json:"terminal_mode"`
	PID               *int         `json:"pid,omitempty"`
	Columns           *int         `json:"columns,omitempty"`
	Rows              *int         `json:"rows,omitempty"`
	OwnerConnectionID string       `json:"owner_connection_id,omitempty"`
	Output            string       `json:"output"`
}

// MaxActiveCommandOutput is the most characters of output an
// ActiveUtilityCommand keeps (the tail).
const MaxActiveCommandOutput = 32768

// ActiveFileWatch is a running file watch: the utility_file_watch_started
// fields.
type ActiveFileWatch UtilityFileWatchStarted

// SSE envelopes (wire contract §12). They are Messages of their own family: each
// is the JSON of one "data:" line of the events stream.

// SnapshotEnvelope carries a full snapshot.
type SnapshotEnvelope struct {
	Snapshot Snapshot `json:"snapshot"`
}

// MessageEnvelope carries one server → client message and its cursor.
type MessageEnvelope struct {
	Cursor  int64   `json:"cursor"`
	Message Message `json:"message"`
}

// HeartbeatEnvelope is sent every 15 s; Cursor is the current cursor.
type HeartbeatEnvelope struct {
	Cursor int64 `json:"cursor"`
}

// ResetEnvelope replaces the client's state with a fresh snapshot.
type ResetEnvelope struct {
	Reason   ResetReason `json:"reason"`
	Snapshot Snapshot    `json:"snapshot"`
}

func (SnapshotEnvelope) MessageType() string  { return TypeSnapshotEnvelope }
func (MessageEnvelope) MessageType() string   { return TypeMessageEnvelope }
func (HeartbeatEnvelope) MessageType() string { return TypeHeartbeatEnvelope }
func (ResetEnvelope) MessageType() string     { return TypeResetEnvelope }
