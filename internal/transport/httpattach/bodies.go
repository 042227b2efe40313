package httpattach

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// Header aliases (wire contract §11.3): every name is accepted; the first one
// present wins.
var (
	roleHeaders         = []string{"x-maestro-headless-role", "x-composer-headless-role"}
	connectionHeaders   = []string{"x-maestro-headless-connection-id", "x-composer-headless-connection-id", "x-evalops-headless-connection-id"}
	subscriptionHeaders = []string{
		"x-maestro-headless-subscriber-id", "x-composer-headless-subscriber-id",
		"x-maestro-headless-subscription-id", "x-composer-headless-subscription-id",
		"x-evalops-headless-subscriber-id", "x-evalops-headless-subscription-id",
	}
	approvalHeaders = []string{"x-maestro-approval-mode", "x-composer-approval-mode"}
)

func header(r *http.Request, names []string) string {
	for _, n := range names {
		if v := strings.TrimSpace(r.Header.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// headerRole is the role header: viewer, else controller.
func headerRole(r *http.Request) protocol.Role {
	if strings.EqualFold(header(r, roleHeaders), string(protocol.RoleViewer)) {
		return protocol.RoleViewer
	}
	return protocol.RoleController
}

// capabilitiesBody is capabilities in camelCase.
type capabilitiesBody struct {
	ServerRequests    []protocol.RequestType      `json:"serverRequests,omitempty"`
	UtilityOperations []protocol.UtilityOperation `json:"utilityOperations,omitempty"`
	RawAgentEvents    *bool                       `json:"rawAgentEvents,omitempty"`
}

// attachBody is the union of the connection-management bodies
// (wire contract §11.2); which fields a route accepts is checked by allowed.
type attachBody struct {
	SessionID           *string                 `json:"sessionId"`
	ConnectionID        *string                 `json:"connectionId"`
	SubscriptionID      *string                 `json:"subscriptionId"`
	ProtocolVersion     *string                 `json:"protocolVersion"`
	ClientInfo          *protocol.ClientInfo    `json:"clientInfo"`
	WorkspaceRoot       *string                 `json:"workspaceRoot"`
	Model               *string                 `json:"model"`
	EnableClientTools   *bool                   `json:"enableClientTools"`
	Capabilities        *capabilitiesBody       `json:"capabilities"`
	OptOutNotifications []protocol.Notification `json:"optOutNotifications"`
	Role                *protocol.Role          `json:"role"`
	Client              *string                 `json:"client"`
	ThinkingLevel       *string                 `json:"thinkingLevel"`
	ApprovalMode        *string                 `json:"approvalMode"`
	TakeControl         *bool                   `json:"takeControl"`
	// Agent and AgentSession (Maestro additions, create only) run the
	// new session on an agent CLI, optionally resuming the CLI's own
	// session.
	Agent        *string `json:"agent"`
	AgentSession *string `json:"agentSession"`
}

// Fields each route accepts.
var (
	createFields      = []string{"sessionId", "protocolVersion", "clientInfo", "workspaceRoot", "model", "enableClientTools", "capabilities", "optOutNotifications", "role", "client", "thinkingLevel", "approvalMode", "agent", "agentSession"}
	connectionFields  = append(slices.Clone(createFields), "connectionId", "takeControl")
	subscribeFields   = []string{"connectionId", "protocolVersion", "clientInfo", "capabilities", "optOutNotifications", "role", "takeControl"}
	unsubscribeFields = []string{"subscriptionId"}
	targetFields      = []string{"connectionId", "subscriptionId"}
)

// readBody decodes a camelCase body strictly: unknown fields (and fields
// the route does not take) are refused with the field's name. An empty
// body is an empty object unless required.
func readBody(w http.ResponseWriter, r *http.Request, allowed []string, required bool) (attachBody, *Error) {
	var b attachBody
	if e := httpedge.RequireJSON(r); e != nil {
		return b, e
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMessageBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return b, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeBadRequest, Message: "Request body exceeds 1 MB"}
		}
		return b, badRequest("Failed to read request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if required {
			return b, badRequest(msgBodyRequired)
		}
		return b, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		if _, msg, ok := httpedge.JSONTypeError(err); ok {
			return b, badRequest("Invalid JSON payload: %s", msg) // an array, a string… where the route takes an object
		}
		return b, badRequest("Invalid JSON payload: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	for k := range keys {
		if !slices.Contains(allowed, k) {
			return b, badRequest("body/%s Unexpected property", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		if field, msg, ok := httpedge.JSONTypeError(err); ok && field != "" {
			return b, badRequest("body/%s %s", field, msg)
		}
		return b, badRequest("Invalid request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := b.validate(); err != nil {
		return b, err
	}
	return b, nil
}

func oneOf[T ~string](field string, v T, allowed ...T) *Error {
	if !slices.Contains(allowed, v) {
		return badRequest("body/%s must be one of %v, got %q", field, allowed, v)
	}
	return nil
}

// setOf checks that list holds only allowed values, none twice.
func setOf[T ~string](field string, list []T, allowed ...T) *Error {
	for _, v := range list {
		if err := oneOf(field, v, allowed...); err != nil {
			return err
		}
	}
	for i, v := range list {
		if slices.Contains(list[:i], v) {
			return badRequest("body/%s must not repeat %v", field, v)
		}
	}
	return nil
}

func (b *attachBody) validate() *Error {
	if b.ClientInfo != nil && b.ClientInfo.Name == "" {
		return badRequest("body/clientInfo/name is required")
	}
	if b.Role != nil {
		if err := oneOf("role", *b.Role, protocol.RoleController, protocol.RoleViewer); err != nil {
			return err
		}
	}
	if b.Client != nil {
		if err := oneOf("client", *b.Client, "generic", "vscode", "jetbrains", "conductor"); err != nil {
			return err
		}
	}
	if b.ThinkingLevel != nil {
		if err := oneOf("thinkingLevel", *b.ThinkingLevel, "off", "minimal", "low", "medium", "high", "ultra"); err != nil {
			return err
		}
	}
	if b.ApprovalMode != nil {
		if err := oneOf("approvalMode", *b.ApprovalMode, "auto", "prompt", "fail"); err != nil {
			return err
		}
	}
	if err := setOf("optOutNotifications", b.OptOutNotifications, protocol.NotifyStatus, protocol.NotifyHeartbeat, protocol.NotifyConnectionInfo, protocol.NotifyCompaction); err != nil {
		return err
	}
	if c := b.Capabilities; c != nil {
		if err := setOf("capabilities/serverRequests", c.ServerRequests, protocol.RequestApproval, protocol.RequestClientTool, protocol.RequestMCPElicitation, protocol.RequestUserInput, protocol.RequestToolRetry); err != nil {
			return err
		}
		if err := setOf("capabilities/utilityOperations", c.UtilityOperations, protocol.OpCommandExec, protocol.OpFileSearch, protocol.OpFileWatch, protocol.OpFileRead); err != nil {
			return err
		}
	}
	return nil
}

// capabilities converts the camelCase capabilities.
func (b *attachBody) capabilities() *protocol.Capabilities {
	if b.Capabilities == nil {
		return nil
	}
	return &protocol.Capabilities{
		ServerRequests:    b.Capabilities.ServerRequests,
		UtilityOperations: b.Capabilities.UtilityOperations,
		RawAgentEvents:    b.Capabilities.RawAgentEvents,
	}
}

// role is the body's role, else the role header, else controller.
func (b *attachBody) role(r *http.Request) protocol.Role {
	if b.Role != nil {
		return *b.Role
	}
	return headerRole(r)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

// checkCapabilities applies the create/subscribe rules of wire contract
// §8.5 and §9: a viewer negotiates no mcp_elicitation or user_input
// (tool_retry is refused on stdio only) and no client tools;
// enableClientTools needs client_tool.
func checkCapabilities(role protocol.Role, caps *protocol.Capabilities, enableClientTools bool) *Error {
	if enableClientTools && (caps == nil || !slices.Contains(caps.ServerRequests, protocol.RequestClientTool)) {
		return badRequest(msgClientToolsCapability)
	}
	if role != protocol.RoleViewer {
		return nil
	}
	if enableClientTools {
		return badRequest(msgViewerClientTools)
	}
	if t := runtime.ViewerDisallowed(caps, false); t != "" {
		return badRequest("viewer headless connections cannot negotiate %s requests", t)
	}
	return nil
}

// createRequest builds what Sessions.Create sees.
func (h *Handler) createRequest(r *http.Request, b *attachBody) CreateRequest {
	mode := str(b.ApprovalMode)
	if mode == "" {
		if v := strings.ToLower(header(r, approvalHeaders)); slices.Contains([]string{"auto", "prompt", "fail"}, v) {
			mode = v
		}
	}
	return CreateRequest{
		SessionID:         str(b.SessionID),
		ProtocolVersion:   str(b.ProtocolVersion),
		ClientInfo:        b.ClientInfo,
		WorkspaceRoot:     str(b.WorkspaceRoot),
		Model:             str(b.Model),
		EnableClientTools: b.EnableClientTools != nil && *b.EnableClientTools,
		Capabilities:      b.capabilities(),
		Role:              b.role(r),
		Client:            str(b.Client),
		ThinkingLevel:     protocol.ThinkingLevel(str(b.ThinkingLevel)),
		ApprovalMode:      protocol.ApprovalMode(mode),
		ReplayRing:        h.cfg.ReplayRing,
		Agent:             str(b.Agent),
		AgentSession:      str(b.AgentSession),
	}
}

// parseOptOut reads ?optOutNotifications=status,heartbeat.
func parseOptOut(raw string) ([]protocol.Notification, *Error) {
	var out []protocol.Notification
	for _, p := range strings.Split(raw, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n := protocol.Notification(p)
		if err := oneOf("query.optOutNotifications", n, protocol.NotifyStatus, protocol.NotifyHeartbeat, protocol.NotifyConnectionInfo, protocol.NotifyCompaction); err != nil {
			err.Message = strings.Replace(err.Message, "body/", "", 1)
			return nil, err
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
