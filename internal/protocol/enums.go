package protocol

// Enumerations of protocol 2026-04-02 (wire contract §3). Each is a string type
// whose constants are the only values the strict decoder and the JSON
// Schemas accept.

// RequestType is the kind of a server request (server_request.request_type,
// capabilities.server_requests).
type RequestType string

// Server request types.
const (
	RequestApproval       RequestType = "approval"
	RequestClientTool     RequestType = "client_tool"
	RequestMCPElicitation RequestType = "mcp_elicitation"
	RequestUserInput      RequestType = "user_input"
	RequestToolRetry      RequestType = "tool_retry"
)

func (RequestType) enumValues() []string {
	return []string{"approval", "client_tool", "mcp_elicitation", "user_input", "tool_retry"}
}

// Resolution is how a server request ended (server_request_resolved.resolution).
type Resolution string

// Server request resolutions.
const (
	ResolutionApproved  Resolution = "approved"
	ResolutionDenied    Resolution = "denied"
	ResolutionCompleted Resolution = "completed"
	ResolutionFailed    Resolution = "failed"
	ResolutionAnswered  Resolution = "answered"
	ResolutionRetried   Resolution = "retried"
	ResolutionSkipped   Resolution = "skipped"
	ResolutionAborted   Resolution = "aborted"
	ResolutionCancelled Resolution = "cancelled"
)

func (Resolution) enumValues() []string {
	return []string{"approved", "denied", "completed", "failed", "answered", "retried", "skipped", "aborted", "cancelled"}
}

// ResolvedBy says who resolved a server request.
type ResolvedBy string

// Resolvers of server requests.
const (
	ResolvedByUser    ResolvedBy = "user"
	ResolvedByPolicy  ResolvedBy = "policy"
	ResolvedByClient  ResolvedBy = "client"
	ResolvedByRuntime ResolvedBy = "runtime"
)

func (ResolvedBy) enumValues() []string { return []string{"user", "policy", "client", "runtime"} }

// DecisionAction answers a tool_retry server request.
type DecisionAction string

// Tool retry decisions.
const (
	DecisionRetry DecisionAction = "retry"
	DecisionSkip  DecisionAction = "skip"
	DecisionAbort DecisionAction = "abort"
)

func (DecisionAction) enumValues() []string { return []string{"retry", "skip", "abort"} }

// Role is a connection's role.
type Role string

// Connection roles.
const (
	RoleViewer     Role = "viewer"
	RoleController Role = "controller"
)

func (Role) enumValues() []string { return []string{"viewer", "controller"} }

// Notification names a notification a connection may opt out of
// (hello.opt_out_notifications).
type Notification string

// Notifications that can be opted out of.
const (
	NotifyStatus         Notification = "status"
	NotifyHeartbeat      Notification = "heartbeat"
	NotifyConnectionInfo Notification = "connection_info"
	NotifyCompaction     Notification = "compaction"
)

func (Notification) enumValues() []string {
	return []string{"status", "heartbeat", "connection_info", "compaction"}
}

// ThinkingLevel is the reasoning effort requested by init.thinking_level.
type ThinkingLevel string

// Thinking levels.
const (
	ThinkingOff     ThinkingLevel = "off"
	ThinkingMinimal ThinkingLevel = "minimal"
	ThinkingLow     ThinkingLevel = "low"
	ThinkingMedium  ThinkingLevel = "medium"
	ThinkingHigh    ThinkingLevel = "high"
	ThinkingUltra   ThinkingLevel = "ultra"
)

func (ThinkingLevel) enumValues() []string {
	return []string{"off", "minimal", "low", "medium", "high", "ultra"}
}

// ApprovalMode is how the runtime treats tool calls that need approval.
type ApprovalMode string

// Approval modes.
const (
	ApprovalAuto   ApprovalMode = "auto"
	ApprovalPrompt ApprovalMode = "prompt"
	ApprovalFail   ApprovalMode = "fail"
)

func (ApprovalMode) enumValues() []string { return []string{"auto", "prompt", "fail"} }

// ErrorType classifies an error message (error.error_type).
type ErrorType string

// Error types.
const (
	ErrorTransient ErrorType = "transient"
	ErrorFatal     ErrorType = "fatal"
	ErrorTool      ErrorType = "tool"
	ErrorCancelled ErrorType = "cancelled"
	ErrorProtocol  ErrorType = "protocol"
)

func (ErrorType) enumValues() []string {
	return []string{"transient", "fatal", "tool", "cancelled", "protocol"}
}

// UtilityOperation names a utility operation a client may negotiate
// (capabilities.utility_operations).
type UtilityOperation string

// Utility operations.
const (
	OpCommandExec UtilityOperation = "command_exec"
	OpFileSearch  UtilityOperation = "file_search"
	OpFileWatch   UtilityOperation = "file_watch"
	OpFileRead    UtilityOperation = "file_read"
)

func (UtilityOperation) enumValues() []string {
	return []string{"command_exec", "file_search", "file_watch", "file_read"}
}

// Stream names the output stream of a utility command.
type Stream string

// Utility command output streams.
const (
	StreamStdout Stream = "stdout"
	StreamStderr Stream = "stderr"
)

func (Stream) enumValues() []string { return []string{"stdout", "stderr"} }

// ShellMode is how a utility command line is run.
type ShellMode string

// Shell modes.
const (
	ShellModeShell  ShellMode = "shell"
	ShellModeDirect ShellMode = "direct"
)

func (ShellMode) enumValues() []string { return []string{"shell", "direct"} }

// TerminalMode is whether a utility command runs on pipes or a pseudo-terminal.
type TerminalMode string

// Terminal modes.
const (
	TerminalPipe TerminalMode = "pipe"
	TerminalPTY  TerminalMode = "pty"
)

func (TerminalMode) enumValues() []string { return []string{"pipe", "pty"} }

// ChangeType is the kind of a file watch event.
type ChangeType string

// File watch change types.
const (
	ChangeCreate ChangeType = "create"
	ChangeModify ChangeType = "modify"
	ChangeDelete ChangeType = "delete"
	ChangeRename ChangeType = "rename"
)

func (ChangeType) enumValues() []string { return []string{"create", "modify", "delete", "rename"} }

// ResetReason says why an SSE reset envelope was sent.
type ResetReason string

// Reset reasons.
const (
	ResetLagged               ResetReason = "lagged"
	ResetReplayGap            ResetReason = "replay_gap"
	ResetRestoredFromSnapshot ResetReason = "restored_from_snapshot"
)

func (ResetReason) enumValues() []string {
	return []string{"lagged", "replay_gap", "restored_from_snapshot"}
}

// ExecutorType says what drives a session's model turns (ready.executor_type,
// a later-version field): a live model or a scripted replay.
type ExecutorType string

// Executor types.
const (
	ExecutorLive   ExecutorType = "live"
	ExecutorReplay ExecutorType = "replay"
)

func (ExecutorType) enumValues() []string { return []string{"live", "replay"} }

// ContentBlockType discriminates a ContentBlock.
type ContentBlockType string

// Content block types.
const (
	ContentText  ContentBlockType = "text"
	ContentImage ContentBlockType = "image"
)

func (ContentBlockType) enumValues() []string { return []string{"text", "image"} }

// PendingSource says where a unified pending request came from.
type PendingSource string

// Pending request sources.
const (
	SourceLocal    PendingSource = "local"
	SourcePlatform PendingSource = "platform"
)

func (PendingSource) enumValues() []string { return []string{"local", "platform"} }
