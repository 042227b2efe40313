package eventbus

import (
	"cmp"
	"maps"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
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

// extensionNames maps each correlation field to its CloudEvents
// extension attribute. CloudEvents 1.0 allows only letters and digits in
// attribute names, so the wire contract's snake_case keys lose their
// underscores here; data.correlation keeps them (docs/events.md).
func (c Correlation) fields() []struct{ ext, key, value string } {
	return []struct{ ext, key, value string }{
		{"organizationid", "organization_id", c.OrganizationID},
		{"userid", "user_id", c.UserID},
		{"workspaceid", "workspace_id", c.WorkspaceID},
		{"maestrosessionid", "session_id", c.SessionID},
		{"agentrunid", "agent_run_id", c.AgentRunID},
		{"agentrunstepid", "agent_run_step_id", c.AgentRunStepID},
		{"surface", "surface", c.Surface},
		{"taskid", "task_id", c.TaskID},
	}
}

// setExtensions sets the extension attribute of every field that is set.
func (c Correlation) setExtensions(e *cloudevents.Event) {
	for _, f := range c.fields() {
		if f.value != "" {
			e.SetExtension(f.ext, f.value)
		}
	}
}

// data is data.correlation: the fields that are set, snake_case, with
// session_id "unknown" when no session is known (wire contract §16).
func (c Correlation) data() map[string]any {
	out := map[string]any{}
	for _, f := range c.fields() {
		if f.value != "" {
			out[f.key] = f.value
		}
	}
	if _, ok := out["session_id"]; !ok {
		out["session_id"] = "unknown"
	}
	if len(c.Attributes) > 0 {
		out["attributes"] = maps.Clone(c.Attributes)
	}
	return out
}
