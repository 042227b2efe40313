package protocol

import "encoding/json"

// Shared sub-objects (wire contract §4).

// ClientInfo identifies a client.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Capabilities are what a client negotiates in hello (and what the server
// echoes back). Both lists must hold unique values.
type Capabilities struct {
	ServerRequests    []RequestType      `json:"server_requests,omitempty" proto:"unique"`
	UtilityOperations []UtilityOperation `json:"utility_operations,omitempty" proto:"unique"`
	RawAgentEvents    *bool              `json:"raw_agent_events,omitempty"`
}

// ServerCapabilities are what the server can do (hello_ok.server_capabilities,
// a later-version field).
type ServerCapabilities struct {
	ServerRequests    []RequestType      `json:"server_requests"`
	UtilityOperations []UtilityOperation `json:"utility_operations"`
	RawAgentEvents    bool               `json:"raw_agent_events"`
	ConnectionRoles   []Role             `json:"connection_roles"`
}

// ToolResult is the result a client reports for an approved tool call
// (tool_response.result, server_request_response.result).
type ToolResult struct {
	Success bool   `json:"success"`
	Output  string `json:"output"`
	Error   string `json:"error,omitempty"`
	// Details is accepted because the Rust implementation allows it; the
	// TS schema does not list it.
	Details json.RawMessage `json:"details,omitempty"`
}

// ContentBlock is one block of client tool output: text (Type ContentText,
// Text set) or an image (Type ContentImage, base64 Data and MIMEType set).
// Only the fields of its variant are encoded, and always encoded.
type ContentBlock struct {
	Type     ContentBlockType `json:"type"`
	Text     string           `json:"text,omitempty"`
	Data     string           `json:"data,omitempty"`
	MIMEType string           `json:"mimeType,omitempty"`
}

// TextBlock returns a text content block.
func TextBlock(text string) ContentBlock { return ContentBlock{Type: ContentText, Text: text} }

// ImageBlock returns an image content block holding base64 data.
func ImageBlock(data, mimeType string) ContentBlock {
	return ContentBlock{Type: ContentImage, Data: data, MIMEType: mimeType}
}

// variants declares ContentBlock as a union discriminated by "type": each
// variant lists the JSON fields (besides the discriminator) it requires and
// allows.
func (ContentBlock) variants() []variant {
	return []variant{
		{tag: "text", fields: []string{"text"}},
		{tag: "image", fields: []string{"data", "mimeType"}},
	}
}

// ConnectionState describes one connection to a runtime.
type ConnectionState struct {
	ConnectionID              string           `json:"connection_id"`
	Role                      Role             `json:"role"`
	ClientProtocolVersion     string           `json:"client_protocol_version,omitempty"`
	ClientInfo                *ClientInfo      `json:"client_info,omitempty"`
	Capabilities              *Capabilities    `json:"capabilities,omitempty"`
	OptOutNotifications       []Notification   `json:"opt_out_notifications,omitempty"`
	SubscriptionCount         int              `json:"subscription_count"`
	AttachedSubscriptionCount int              `json:"attached_subscription_count"`
	ControllerLeaseGranted    bool             `json:"controller_lease_granted"`
	LeaseExpiresAt            Nullable[string] `json:"lease_expires_at,omitzero"`
}
