package protocol

// MarshalJSON methods: encoding/json encodes every wire type of this package
// exactly as Marshal does (messages with their "type" first, nil required
// lists as [], absent Nullable fields left out), also when the type is
// nested in a foreign struct such as an HTTP response body.

// MarshalJSON encodes the Hello as on the wire.
func (v Hello) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Init as on the wire.
func (v Init) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Prompt as on the wire.
func (v Prompt) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Interrupt as on the wire.
func (v Interrupt) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Cancel as on the wire.
func (v Cancel) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Shutdown as on the wire.
func (v Shutdown) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ToolResponse as on the wire.
func (v ToolResponse) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ClientToolResult as on the wire.
func (v ClientToolResult) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ServerRequestResponse as on the wire.
func (v ServerRequestResponse) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityCommandStart as on the wire.
func (v UtilityCommandStart) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityCommandTerminate as on the wire.
func (v UtilityCommandTerminate) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityCommandStdin as on the wire.
func (v UtilityCommandStdin) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityCommandResize as on the wire.
func (v UtilityCommandResize) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileSearch as on the wire.
func (v UtilityFileSearch) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileRead as on the wire.
func (v UtilityFileRead) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileWatchStart as on the wire.
func (v UtilityFileWatchStart) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileWatchStop as on the wire.
func (v UtilityFileWatchStop) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the HelloOK as on the wire.
func (v HelloOK) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Ready as on the wire.
func (v Ready) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ResponseStart as on the wire.
func (v ResponseStart) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ResponseChunk as on the wire.
func (v ResponseChunk) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ResponseEnd as on the wire.
func (v ResponseEnd) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ToolCall as on the wire.
func (v ToolCall) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ToolStart as on the wire.
func (v ToolStart) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ToolOutput as on the wire.
func (v ToolOutput) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ToolEnd as on the wire.
func (v ToolEnd) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ClientToolRequest as on the wire.
func (v ClientToolRequest) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ServerRequest as on the wire.
func (v ServerRequest) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ServerRequestResolved as on the wire.
func (v ServerRequestResolved) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the RawAgentEvent as on the wire.
func (v RawAgentEvent) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityCommandStarted as on the wire.
func (v UtilityCommandStarted) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityCommandResized as on the wire.
func (v UtilityCommandResized) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityCommandOutput as on the wire.
func (v UtilityCommandOutput) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityCommandExited as on the wire.
func (v UtilityCommandExited) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileSearchResults as on the wire.
func (v UtilityFileSearchResults) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileReadResult as on the wire.
func (v UtilityFileReadResult) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileWatchStarted as on the wire.
func (v UtilityFileWatchStarted) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileWatchEvent as on the wire.
func (v UtilityFileWatchEvent) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the UtilityFileWatchStopped as on the wire.
func (v UtilityFileWatchStopped) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Error as on the wire.
func (v Error) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Status as on the wire.
func (v Status) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Compaction as on the wire.
func (v Compaction) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the SessionInfo as on the wire.
func (v SessionInfo) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ConnectionInfo as on the wire.
func (v ConnectionInfo) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the SnapshotEnvelope as on the wire.
func (v SnapshotEnvelope) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the MessageEnvelope as on the wire.
func (v MessageEnvelope) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the HeartbeatEnvelope as on the wire.
func (v HeartbeatEnvelope) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ResetEnvelope as on the wire.
func (v ResetEnvelope) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ClientInfo as on the wire.
func (v ClientInfo) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Capabilities as on the wire.
func (v Capabilities) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ServerCapabilities as on the wire.
func (v ServerCapabilities) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ToolResult as on the wire.
func (v ToolResult) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ContentBlock as on the wire.
func (v ContentBlock) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ConnectionState as on the wire.
func (v ConnectionState) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Usage as on the wire.
func (v Usage) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ToolsSummary as on the wire.
func (v ToolsSummary) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the FileSearchResult as on the wire.
func (v FileSearchResult) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the Snapshot as on the wire.
func (v Snapshot) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the RuntimeState as on the wire.
func (v RuntimeState) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the CurrentResponse as on the wire.
func (v CurrentResponse) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the PendingItem as on the wire.
func (v PendingItem) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the PendingRequest as on the wire.
func (v PendingRequest) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ActiveTool as on the wire.
func (v ActiveTool) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ActiveUtilityCommand as on the wire.
func (v ActiveUtilityCommand) MarshalJSON() ([]byte, error) { return marshalJSON(v) }

// MarshalJSON encodes the ActiveFileWatch as on the wire.
func (v ActiveFileWatch) MarshalJSON() ([]byte, error) { return marshalJSON(v) }
