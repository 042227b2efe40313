package eventbus

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
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
// extension attributes. It fails when the result would not be a valid
// CloudEvent (no id, type or source, a source that is no URI reference).
//
// The document is written directly, once per event, rather than built
// as an event of the CloudEvents SDK and marshalled (which encodes the
// data twice through maps): the follower's cost per event on the agent
// loop's machine (docs/events.md, "Figures"). TestEncodeMatchesSDK checks it
// against the SDK's encoding.
func Encode(ev Event, source string, corr Correlation) ([]byte, error) {
	return appendEvent(make([]byte, 0, 768), ev, source, corr)
}

// appendEvent appends Encode's document to b.
func appendEvent(b []byte, ev Event, source string, corr Correlation) ([]byte, error) {
	switch {
	case ev.ID == "":
		return nil, fmt.Errorf("encode event of type %s: no id", ev.Type)
	case ev.Type == "":
		return nil, fmt.Errorf("encode event %s: no type", ev.ID)
	case source == "":
		return nil, fmt.Errorf("encode event %s: no source", ev.ID)
	}
	if err := checkSource(source); err != nil {
		return nil, fmt.Errorf("encode event %s: source: %w", ev.ID, err)
	}
	b = append(b, `{"specversion":"1.0","id":`...)
	b = appendString(b, ev.ID)
	b = append(b, `,"source":`...)
	b = appendString(b, source)
	b = append(b, `,"type":`...)
	b = appendString(b, ev.Type)
	b = append(b, `,"subject":`...)
	b = appendString(b, ev.Type)
	if !ev.Time.IsZero() {
		b = append(b, `,"time":"`...)
		b = ev.Time.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `,"datacontenttype":"application/json"`...)
	msg := schemaMessage(ev.Type)
	if msg != "" {
		b = append(b, `,"dataschema":"https://buf.build/evalops/proto/maestro.v1.`...)
		b = append(b, msg...)
		b = append(b, '"')
	}
	for _, f := range corr.fields() {
		if f.value != "" {
			b = append(b, ',', '"')
			b = append(b, f.ext...)
			b = append(b, '"', ':')
			b = appendString(b, f.value)
		}
	}
	b = append(b, `,"data":{`...)
	var err error
	first := true
	// The keys sorted without allocating for the usual few.
	var keyBuf [16]string
	keys := keyBuf[:0]
	for k := range ev.Data {
		if k != "@type" && k != "correlation" { // set below
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if b, err = appendMember(b, &first, k, ev.Data[k]); err != nil {
			return nil, fmt.Errorf("encode event %s data: %w", ev.ID, err)
		}
	}
	if msg != "" {
		b, _ = appendMember(b, &first, "@type", "type.googleapis.com/maestro.v1."+msg)
	}
	b, _ = appendMember(b, &first, "correlation", nil)
	b = corr.appendData(b)
	b = append(b, '}', '}')
	return b, nil
}

// validSource is the last source checkSource found valid: a process
// has one, so it is parsed once rather than once an event.
var validSource atomic.Pointer[string]

// checkSource fails when source is not a URI reference.
func checkSource(source string) error {
	if v := validSource.Load(); v != nil && *v == source {
		return nil
	}
	if _, err := url.Parse(source); err != nil {
		return err
	}
	// A copy: storing &source would move the parameter to the heap on
	// every call, the usual one that finds it valid already included.
	valid := source
	validSource.Store(&valid)
	return nil
}

// appendMember appends "key":value to a JSON object whose members so far
// first tells (value nil: the key alone, its value follows).
func appendMember(b []byte, first *bool, key string, v any) ([]byte, error) {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	b = appendString(b, key)
	b = append(b, ':')
	switch v := v.(type) {
	case nil:
		return b, nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("field %s: %w", key, err)
	}
	return append(b, data...), nil
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte { return protocol.AppendJSONString(b, s) }
