// Package replay is the scripted-replay model provider: Maestro's native
// agent loop with the model replaced by a scenario file of deterministic
// model turns (text, thinking, tool calls, usage, errors). The tools the
// scenario calls really run — the agent loop runs them, this package only
// plays the model's side.
//
// Scenario files use the contract format
// evalops.maestro.scripted-scenario.v1 (JSON or YAML with the same fields)
// plus a few Maestro extensions (thinking and usage statements, explicit
// text chunks); docs/replay.md describes the format. Parsing is strict:
// every problem of a file is reported at once, each naming its location.
//
// Replay is Maestro's default when no model is configured (the bundled
// [Demo] scenario), the basis of demos, and how tests drive the whole stack.
package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/maestro-run/maestro/internal/llm"
)

// SchemaVersion is the only schemaVersion this package reads and writes.
const SchemaVersion = "evalops.maestro.scripted-scenario.v1"

// ProviderName is the provider id replay providers report.
const ProviderName = "replay"

// Model is the model id replay providers report.
const Model = "maestro-replay-v1"

// Scenario is a parsed, validated scripted scenario. Obtain one with
// [Parse], [Load] or [Demo]; a Scenario built by hand should be checked
// with [Scenario.Validate] before use.
type Scenario struct {
	SchemaVersion string `json:"schemaVersion"`
	// ID names the scenario; it is part of default tool call ids.
	ID          string `json:"id"`
	Description string `json:"description"`
	// ExpectedOutcome is the outcome a run of the scenario should have
	// ("" when unspecified).
	ExpectedOutcome Outcome  `json:"expectedOutcome,omitempty"`
	Metadata        Metadata `json:"metadata"`
	// Frames are the model turns, in order; Frames[k].Index == k.
	Frames     []Frame     `json:"frames"`
	Assertions []Assertion `json:"assertions,omitempty"`
	// Subtasks are the scripts of the run's subtasks (extension): the
	// i-th plays the model of subtask i+1, so a piece run on replay can
	// spawn subtasks (SpawnSubTask). A subtask's scenario has none.
	Subtasks []*Scenario `json:"subtasks,omitempty"`
	// WorkspaceManifestPath is carried by later contract files; it is kept
	// but not interpreted.
	WorkspaceManifestPath string `json:"workspaceManifestPath,omitempty"`
	// ReleaseGate is carried by later contract files; it is kept (a JSON
	// object) but not interpreted.
	ReleaseGate json.RawMessage `json:"releaseGate,omitempty"`

	// Name is where the scenario came from (the name given to Parse, the
	// path given to Load, "demo.yaml" for the demo); not part of the file.
	Name string `json:"-"`
	// bundled marks the bundled demo ([Demo]): its script errors say in
	// a user's words that the demo ended and how to go on.
	bundled bool
}

// Metadata describes how a scenario was made and what it needs.
type Metadata struct {
	RecordedFrom string `json:"recordedFrom,omitempty"`
	// RecordedAt is an RFC 3339 timestamp.
	RecordedAt    string `json:"recordedAt"`
	ModelOriginal string `json:"modelOriginal,omitempty"`
	// ToolsExpected lists every tool the scenario calls.
	ToolsExpected []string `json:"toolsExpected"`
	AuditEvents   []string `json:"auditEvents,omitempty"`
}

// MarshalJSON writes toolsExpected as [] rather than null when empty.
func (m Metadata) MarshalJSON() ([]byte, error) {
	type plain Metadata
	p := plain(m)
	if p.ToolsExpected == nil {
		p.ToolsExpected = []string{}
	}
	return json.Marshal(p)
}

// Outcome is a scenario run's verdict.
type Outcome string

// The outcomes.
const (
	OutcomePass Outcome = "pass"
	OutcomeFail Outcome = "fail"
)

// Frame is one model turn: the statements played by one model call.
type Frame struct {
	Index      int         `json:"index"`
	Statements []Statement `json:"statements"`
}

// StatementKind discriminates a Statement.
type StatementKind string

const (
	// KindText streams assistant text.
	KindText StatementKind = "text"
	// KindDelay waits.
	KindDelay StatementKind = "delay"
	// KindToolCall makes the model call a tool.
	KindToolCall StatementKind = "tool_call"
	// KindError fails the model call.
	KindError StatementKind = "error"
	// KindWaitForUser ends the turn, waiting for the user.
	KindWaitForUser StatementKind = "wait_for_user"
	// KindEnd ends the turn with a reason.
	KindEnd StatementKind = "end"
	// KindThinking streams thinking (Maestro extension).
	KindThinking StatementKind = "thinking"
	// KindUsage sets the frame's token usage (Maestro extension).
	KindUsage StatementKind = "usage"
)

// statementKinds lists the kinds in the order error messages name them.
func statementKinds() []StatementKind {
	return []StatementKind{KindText, KindDelay, KindToolCall, KindError, KindWaitForUser, KindEnd, KindThinking, KindUsage}
}

// terminal reports whether a statement of kind k ends its frame.
func (k StatementKind) terminal() bool {
	return k == KindError || k == KindWaitForUser || k == KindEnd
}

// ExpectedResult is what a tool call's result must be for the next frame
// to play.
type ExpectedResult string

// The expected results; "" (unset) means any.
const (
	ExpectSuccess ExpectedResult = "success"
	ExpectError   ExpectedResult = "error"
	ExpectAny     ExpectedResult = "any"
)

// ErrorType is the type of an error statement.
type ErrorType string

const (
	// ErrorTransient fails the call with a transient stream error.
	ErrorTransient ErrorType = "transient"
	// ErrorFatal fails the call with a script error.
	ErrorFatal ErrorType = "fatal"
)

// EndReason is the reason of an end statement.
type EndReason string

// The end reasons: complete ends the turn normally (end_turn), aborted
// reports an aborted turn, limit_exceeded reports max_tokens.
const (
	EndComplete      EndReason = "complete"
	EndAborted       EndReason = "aborted"
	EndLimitExceeded EndReason = "limit_exceeded"
)

// Statement is one step of a frame. Kind says which fields are meaningful.
type Statement struct {
	Kind StatementKind
	// Text is the text of text and thinking statements.
	Text string
	// Chunks, when set on a text statement, are its explicit deltas; they
	// join to Text.
	Chunks []string
	// StreamMS, when > 0 on a text statement, streams it one rune (or
	// chunk) per delta with StreamMS milliseconds spread over them.
	StreamMS int64
	// MS is the wait of a delay statement.
	MS int64
	// Tool, Input, ID and ExpectedResult describe a tool_call statement.
	// Input is a JSON value ({} when the file gives none); ID is "" when
	// the file gives none (see [DefaultToolCallID]); ExpectedResult is ""
	// when the file gives none, which means any.
	Tool           string
	Input          json.RawMessage
	ID             string
	ExpectedResult ExpectedResult
	// ErrorType and Message describe an error statement.
	ErrorType ErrorType
	Message   string
	// Reason is the reason of an end statement.
	Reason EndReason
	// Usage is the usage a usage statement adds to its frame.
	Usage llm.Usage
}

// MarshalJSON writes the statement in the file format, with the fields of
// its kind only.
func (s Statement) MarshalJSON() ([]byte, error) {
	m := orderedObject{{"kind", s.Kind}}
	switch s.Kind {
	case KindText:
		m = append(m, kv{"text", s.Text})
		if s.Chunks != nil {
			m = append(m, kv{"chunks", s.Chunks})
		}
		if s.StreamMS > 0 {
			m = append(m, kv{"streamMs", s.StreamMS})
		}
	case KindThinking:
		m = append(m, kv{"text", s.Text})
	case KindDelay:
		m = append(m, kv{"ms", s.MS})
	case KindToolCall:
		m = append(m, kv{"tool", s.Tool})
		if len(s.Input) > 0 {
			m = append(m, kv{"input", s.Input})
		}
		if s.ID != "" {
			m = append(m, kv{"id", s.ID})
		}
		if s.ExpectedResult != "" {
			m = append(m, kv{"expectedResult", s.ExpectedResult})
		}
	case KindError:
		m = append(m, kv{"type", s.ErrorType}, kv{"message", s.Message})
	case KindEnd:
		m = append(m, kv{"reason", s.Reason})
	case KindUsage:
		m = append(m,
			kv{"input_tokens", s.Usage.InputTokens},
			kv{"output_tokens", s.Usage.OutputTokens},
			kv{"cache_read_tokens", s.Usage.CacheReadTokens},
			kv{"cache_write_tokens", s.Usage.CacheWriteTokens})
	}
	return m.MarshalJSON()
}

// kv is one member of an orderedObject.
type kv struct {
	k string
	v any
}

// orderedObject marshals as a JSON object keeping member order.
type orderedObject []kv

func (o orderedObject) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := marshalPlain(m.k, "")
		if err != nil {
			return nil, err
		}
		v, err := marshalPlain(m.v, "")
		if err != nil {
			return nil, fmt.Errorf("marshal %s: %w", m.k, err)
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// marshalPlain is json.Marshal without HTML escaping (a shell command's
// && stays readable), indented when indent is set.
func marshalPlain(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// AssertionKind discriminates an Assertion.
type AssertionKind string

const (
	// AssertToolCalled: a tool (optionally a given call id) was called.
	AssertToolCalled AssertionKind = "tool_called"
	// AssertToolNotCalled: a tool (optionally a given call id) was not called.
	AssertToolNotCalled AssertionKind = "tool_not_called"
	// AssertFileExists: a workspace file exists.
	AssertFileExists AssertionKind = "file_exists"
	// AssertFileContents: a workspace file contains or equals a text.
	AssertFileContents AssertionKind = "file_contents"
	// AssertAuditEventEmitted: an audit event of a type was emitted.
	AssertAuditEventEmitted AssertionKind = "audit_event_emitted"
)

// assertionKinds lists the kinds in the order error messages name them.
func assertionKinds() []AssertionKind {
	return []AssertionKind{AssertToolCalled, AssertToolNotCalled, AssertFileExists, AssertFileContents, AssertAuditEventEmitted}
}

// Severity says whether a failed assertion fails the scenario.
type Severity string

const (
	// SeverityError (the default) fails the scenario.
	SeverityError Severity = "error"
	// SeverityWarning is reported only.
	SeverityWarning Severity = "warning"
)

// Assertion is a check run after a scenario has played.
type Assertion struct {
	ID   string        `json:"id"`
	Kind AssertionKind `json:"kind"`
	// Severity is "" (meaning error), error or warning.
	Severity Severity `json:"severity,omitempty"`
	// Tool and ToolCallID are used by tool_called and tool_not_called.
	Tool       string `json:"tool,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	// Path (relative to the workspace) is used by file_exists and
	// file_contents; Contains and Equals (at least one) by file_contents.
	Path     string  `json:"path,omitempty"`
	Contains *string `json:"contains,omitempty"`
	Equals   *string `json:"equals,omitempty"`
	// EventType is used by audit_event_emitted.
	EventType string `json:"eventType,omitempty"`
	Note      string `json:"note,omitempty"`
}

// Tools returns metadata.toolsExpected: every tool the scenario calls.
func (s *Scenario) Tools() []string { return slices.Clone(s.Metadata.ToolsExpected) }

// Marshal returns the scenario as an indented JSON file.
func (s *Scenario) Marshal() ([]byte, error) {
	b, err := marshalPlain(s, "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal scenario %s: %w", s.ID, err)
	}
	return append(b, '\n'), nil
}

// Validate checks a scenario built in Go against the same rules as
// [Parse]. Problems name fields by path (there are no line numbers).
func (s *Scenario) Validate() error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("validate scenario %s: %w", s.ID, err)
	}
	name := s.Name
	if name == "" {
		name = s.ID
	}
	_, err = parse(b, name, formatJSON, false)
	return err
}

// DefaultToolCallID is the id of a tool_call statement that gives none:
// replay_<scenarioId>_<frame, 3 digits>_<statement, 3 digits>.
func DefaultToolCallID(scenarioID string, frame, statement int) string {
	return fmt.Sprintf("replay_%s_%03d_%03d", scenarioID, frame, statement)
}

// callID is the id the statement's tool call is played with.
func (s *Scenario) callID(frame, stmt int) string {
	if id := s.Frames[frame].Statements[stmt].ID; id != "" {
		return id
	}
	return DefaultToolCallID(s.ID, frame, stmt)
}
