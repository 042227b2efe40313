package eventbus

import (
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

// The event types of the catalogue (docs/events.md, "Platform events").
// The JetStream subject of an event is its type (wire contract §16).
const (
	TypeSessionStarted     = "maestro.sessions.session.started"
	TypeSessionSuspended   = "maestro.sessions.session.suspended"
	TypeSessionResumed     = "maestro.sessions.session.resumed"
	TypeSessionClosed      = "maestro.sessions.session.closed"
	TypeApprovalHit        = "maestro.events.approval_hit"
	TypeSandboxViolation   = "maestro.events.sandbox_violation"
	TypeFirewallBlock      = "maestro.events.firewall_block"
	TypeToolCallAttempted  = "maestro.events.tool_call.attempted"
	TypeToolCallCompleted  = "maestro.events.tool_call.completed"
	TypeJobQueued          = "maestro.jobs.job.queued"
	TypeJobStarted         = "maestro.jobs.job.started"
	TypeJobWaiting         = "maestro.jobs.job.waiting"
	TypeJobSucceeded       = "maestro.jobs.job.succeeded"
	TypeJobFailed          = "maestro.jobs.job.failed"
	TypeJobCancelled       = "maestro.jobs.job.cancelled"
	ContentTypeCloudEvents = "application/cloudevents+json"
)

// schemaMessage names the platform message (maestro.v1.<Msg>) of an
// event type of the wire contract's table; "" for the job types.
func schemaMessage(typ string) string {
	switch typ {
	case TypeSessionStarted, TypeSessionSuspended, TypeSessionResumed, TypeSessionClosed:
		return "MaestroSession"
	case TypeApprovalHit:
		return "ApprovalHit"
	case TypeSandboxViolation:
		return "SandboxViolation"
	case TypeFirewallBlock:
		return "FirewallBlock"
	case TypeToolCallAttempted:
		return "ToolCallAttempt"
	case TypeToolCallCompleted:
		return "ToolCallResult"
	}
	return ""
}

// Event is one platform event before it is encoded: Data is its body
// without the correlation block, which Encode adds.
type Event struct {
	// ID is stable: the same log record always yields the same id, so a
	// re-sent event is a JetStream duplicate.
	ID   string
	Type string
	Time time.Time
	Data map[string]any
}

// Encode returns the event as a CloudEvents 1.0 structured-mode JSON
// document: source, subject = type, time, datacontenttype
// application/json, dataschema and data["@type"] for the types of the
// platform's catalogue, data.correlation, and the correlation as
// extension attributes. It fails when the result is not a valid
// CloudEvent.
func Encode(ev Event, source string, corr Correlation) ([]byte, error) {
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetID(ev.ID)
	e.SetType(ev.Type)
	e.SetSource(source)
	e.SetSubject(ev.Type)
	e.SetTime(ev.Time.UTC())
	data := make(map[string]any, len(ev.Data)+2)
	for k, v := range ev.Data {
		data[k] = v
	}
	if msg := schemaMessage(ev.Type); msg != "" {
		e.SetDataSchema("https://buf.build/evalops/proto/maestro.v1." + msg)
		data["@type"] = "type.googleapis.com/maestro.v1." + msg
	}
	data["correlation"] = corr.data()
	corr.setExtensions(&e)
	if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return nil, fmt.Errorf("encode event %s data: %w", ev.ID, err)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	out, err := e.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	return out, nil
}
