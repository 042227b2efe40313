package protocol

import "encoding/json"

// The messages one prompt turn produces (wire contract §6, §8.8).

// ResponseStart opens one assistant message.
type ResponseStart struct {
	ResponseID string `json:"response_id"`
}

// ResponseChunk is an append-only piece of assistant text or thinking.
type ResponseChunk struct {
	ResponseID string `json:"response_id"`
	Content    string `json:"content"`
	IsThinking bool   `json:"is_thinking"`
}

// Usage is the authoritative token and cost accounting of one response.
// TotalTokens = InputTokens + OutputTokens + CacheReadTokens + CacheWriteTokens.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	TotalTokens      int64   `json:"total_tokens"`
	TotalCostUSD     float64 `json:"total_cost_usd"`
	ModelID          string  `json:"model_id"`
	Provider         string  `json:"provider"`
}

// ToolsSummary summarises the tool calls made since the previous response_end.
type ToolsSummary struct {
	ToolsUsed      []string `json:"tools_used"`
	CallsSucceeded int      `json:"calls_succeeded"`
	CallsFailed    int      `json:"calls_failed"`
	SummaryLabels  []string `json:"summary_labels,omitempty"`
}

// ResponseEnd closes an assistant message. Clients persist Usage and
// ToolsSummary from here rather than summing chunks.
type ResponseEnd struct {
	ResponseID   string       `json:"response_id"`
	Usage        Usage        `json:"usage"`
	ToolsSummary ToolsSummary `json:"tools_summary"`
	DurationMS   int64        `json:"duration_ms"`
	TTFTMS       *int64       `json:"ttft_ms,omitempty"`
}

// ToolCall announces a tool call requested by the model. Args is any JSON
// value.
type ToolCall struct {
	CallID           string          `json:"call_id"`
	Tool             string          `json:"tool"`
	Args             json.RawMessage `json:"args"`
	RequiresApproval bool            `json:"requires_approval"`
}

// ToolStart says a tool call began executing.
type ToolStart struct {
	CallID string `json:"call_id"`
}

// ToolOutput carries partial tool output text.
type ToolOutput struct {
	CallID  string `json:"call_id"`
	Content string `json:"content"`
}

// ToolEnd closes a tool call.
type ToolEnd struct {
	CallID            string `json:"call_id"`
	Success           bool   `json:"success"`
	ErrorCode         string `json:"error_code,omitempty"`
	ApprovalRequestID string `json:"approval_request_id,omitempty"`
	GovernedOutcome   string `json:"governed_outcome,omitempty"`
}

// Status is a human-readable notification.
type Status struct {
	Message string `json:"message"`
}

// Error reports a failure. RequestID is the read_id for file-read failures.
type Error struct {
	RequestID string    `json:"request_id,omitempty"`
	Message   string    `json:"message"`
	Fatal     bool      `json:"fatal"`
	ErrorType ErrorType `json:"error_type"`
}

// Ready is emitted at startup. SessionID is required but nullable.
type Ready struct {
	ProtocolVersion string  `json:"protocol_version"`
	Model           string  `json:"model"`
	Provider        string  `json:"provider"`
	SessionID       *string `json:"session_id"`
	// ExecutorType is "live" or "replay" (a later-version field clients
	// use to badge replay sessions).
	ExecutorType ExecutorType `json:"executor_type,omitempty"`
}

// SessionInfo describes the session's workspace. AgentSessionID is a
// Maestro extension: in a session run on an agent CLI (headless --agent,
// run --agent) session_info is sent again when the CLI reports its own
// session id, which `--resume` of the CLI takes (docs/protocol.md).
type SessionInfo struct {
	SessionID      *string `json:"session_id"`
	Cwd            string  `json:"cwd"`
	GitBranch      *string `json:"git_branch"`
	AgentSessionID string  `json:"agent_session_id,omitempty"`
}

func (ResponseStart) MessageType() string { return TypeResponseStart }
func (ResponseChunk) MessageType() string { return TypeResponseChunk }
func (ResponseEnd) MessageType() string   { return TypeResponseEnd }
func (ToolCall) MessageType() string      { return TypeToolCall }
func (ToolStart) MessageType() string     { return TypeToolStart }
func (ToolOutput) MessageType() string    { return TypeToolOutput }
func (ToolEnd) MessageType() string       { return TypeToolEnd }
func (Status) MessageType() string        { return TypeStatus }
func (Error) MessageType() string         { return TypeError }
func (Ready) MessageType() string         { return TypeReady }
func (SessionInfo) MessageType() string   { return TypeSessionInfo }
