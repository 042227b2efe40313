package eventbus

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// Correlation is what joins an event to the platform's organisation,
// user, workspace, session and run (wire contract §16, "correlation").
// For a session it comes from the launcher's environment
// (CorrelationFromEnv); for a queued job from its task's submitter and
// the payload's "metadata" object.
type Correlation struct {
	OrganizationID string
	UserID         string
	WorkspaceID    string
	SessionID      string
	AgentRunID     string
	AgentRunStepID string
	Surface        string
	TaskID         string
	// Attributes come from MAESTRO_EVENT_BUS_ATTR_<KEY> (key lower-cased).
	Attributes map[string]string
}

// CorrelationFromEnv reads the launcher's correlation variables
// (docs/events.md, "Correlation").
func CorrelationFromEnv(getenv func(string) string, environ []string) Correlation {
	c := Correlation{
		OrganizationID: cmp.Or(getenv("MAESTRO_EVALOPS_ORG_ID"), getenv("EVALOPS_ORGANIZATION_ID")),
		UserID:         cmp.Or(getenv("MAESTRO_EVALOPS_USER_ID"), getenv("EVALOPS_USER_ID"), getenv("MAESTRO_USER_ID")),
		WorkspaceID:    cmp.Or(getenv("MAESTRO_EVALOPS_WORKSPACE_ID"), getenv("EVALOPS_WORKSPACE_ID")),
		SessionID:      getenv("MAESTRO_SESSION_ID"),
		AgentRunID:     getenv("MAESTRO_AGENT_RUN_ID"),
		AgentRunStepID: getenv("MAESTRO_AGENT_RUN_STEP_ID"),
		Surface:        getenv("MAESTRO_SURFACE"),
	}
	const prefix = "MAESTRO_EVENT_BUS_ATTR_"
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, prefix) && len(k) > len(prefix) {
			if c.Attributes == nil {
				c.Attributes = map[string]string{}
			}
			c.Attributes[strings.ToLower(k[len(prefix):])] = v
		}
	}
	return c
}

// fields maps each correlation field to its CloudEvents extension
// attribute, its data.correlation key and its span attribute.
// CloudEvents 1.0 allows only letters and digits in attribute names, so
// the wire contract's snake_case keys lose their underscores in the
// extensions; data.correlation keeps them (docs/events.md). The span
// attributes are the seed's (docs/events.md, "Traces").
func (c Correlation) fields() [8]corrField {
	return [8]corrField{
		{"organizationid", "organization_id", "evalops.organization_id", c.OrganizationID},
		{"userid", "user_id", "enduser.id", c.UserID},
		{"workspaceid", "workspace_id", "evalops.workspace_id", c.WorkspaceID},
		{"maestrosessionid", "session_id", "maestro.session_id", c.SessionID},
		{"agentrunid", "agent_run_id", "maestro.agent_run_id", c.AgentRunID},
		{"agentrunstepid", "agent_run_step_id", "maestro.agent_run_step_id", c.AgentRunStepID},
		{"surface", "surface", "maestro.surface", c.Surface},
		{"taskid", "task_id", "maestro.task_id", c.TaskID},
	}
}

// corrField is one correlation field: its extension attribute, its
// data.correlation key, its span attribute and its value.
type corrField struct{ ext, key, span, value string }

// SpanAttributes are the fields that are set as span attributes.
func (c Correlation) SpanAttributes() []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, f := range c.fields() {
		if f.value != "" {
			out = append(out, attribute.String(f.span, f.value))
		}
	}
	return out
}

// JobCorrelation is a queued job's correlation: the payload's "metadata"
// object (organization_id, workspace_id, session_id, agent_run_id,
// agent_run_step_id, surface, user_id), the task and, when the metadata
// names no user, the task's submitter (owner); never this process's
// environment.
func JobCorrelation(payload json.RawMessage, taskID int64, owner string) Correlation {
	var p struct {
		Metadata struct {
			OrganizationID string `json:"organization_id"`
			UserID         string `json:"user_id"`
			WorkspaceID    string `json:"workspace_id"`
			SessionID      string `json:"session_id"`
			AgentRunID     string `json:"agent_run_id"`
			AgentRunStepID string `json:"agent_run_step_id"`
			Surface        string `json:"surface"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(payload, &p)
	m := p.Metadata
	c := Correlation{OrganizationID: m.OrganizationID, UserID: cmp.Or(m.UserID, owner), WorkspaceID: m.WorkspaceID,
		SessionID: m.SessionID, AgentRunID: m.AgentRunID, AgentRunStepID: m.AgentRunStepID, Surface: m.Surface}
	if taskID != 0 {
		c.TaskID = strconv.FormatInt(taskID, 10)
	}
	return c
}

// appendData appends data.correlation, a JSON object: the fields that
// are set (c.fields()), snake_case, with session_id "unknown" when no
// session is known (wire contract §16), and the attributes.
func (c Correlation) appendData(b []byte) []byte {
	first := true
	b = append(b, '{')
	for _, f := range c.fields() {
		if f.value != "" {
			b, _ = appendMember(b, &first, f.key, f.value)
		}
	}
	if c.SessionID == "" {
		b, _ = appendMember(b, &first, "session_id", "unknown")
	}
	if len(c.Attributes) > 0 {
		b, _ = appendMember(b, &first, "attributes", nil)
		b = append(b, '{')
		inner := true
		for _, k := range slices.Sorted(maps.Keys(c.Attributes)) {
			b, _ = appendMember(b, &inner, k, c.Attributes[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}
