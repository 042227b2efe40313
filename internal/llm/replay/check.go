package replay

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/llm"
)

// CalledTool is a tool call that ran during a scenario.
type CalledTool struct {
	ID    string
	Name  string
	Input json.RawMessage
	// IsError is the result's is_error flag.
	IsError bool
}

// CalledTools pairs the tool calls of a conversation's assistant messages
// with their results; a call without a result is left out (it never ran).
func CalledTools(msgs []llm.Message) []CalledTool {
	results := map[string]*llm.ToolResult{}
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == llm.PartToolResult && p.ToolResult != nil {
				results[p.ToolResult.CallID] = p.ToolResult
			}
		}
	}
	var out []CalledTool
	for _, m := range msgs {
		if m.Role != llm.RoleAssistant {
			continue
		}
		for _, c := range m.ToolCalls() {
			if r, ok := results[c.ID]; ok {
				out = append(out, CalledTool{ID: c.ID, Name: c.Name, Input: c.Input, IsError: r.IsError})
			}
		}
	}
	return out
}

// Status is an assertion's result.
type Status string

// The statuses of an assertion result.
const (
	StatusPass Status = "pass"
	StatusFail Status = "fail"
	// StatusUnsupported: the assertion cannot be evaluated here (an
	// audit_event_emitted assertion without a list of audit events).
	StatusUnsupported Status = "unsupported"
)

// AssertionResult is the evaluation of one assertion.
type AssertionResult struct {
	ID       string
	Kind     AssertionKind
	Severity Severity
	Status   Status
	// Message says what was found.
	Message string
}

// Check evaluates the scenario's assertions against a workspace (paths are
// relative to fsys's root; nil fails every file assertion) and the tools
// that ran. audit_event_emitted assertions are reported as unsupported;
// use [Scenario.CheckWithAuditEvents] to evaluate them.
func (s *Scenario) Check(fsys fs.FS, calls []CalledTool) []AssertionResult {
	return s.check(fsys, calls, nil, false)
}

// CheckWithAuditEvents is [Scenario.Check] with audit_event_emitted
// assertions evaluated against the given audit event types.
func (s *Scenario) CheckWithAuditEvents(fsys fs.FS, calls []CalledTool, events []string) []AssertionResult {
	return s.check(fsys, calls, events, true)
}

func (s *Scenario) check(fsys fs.FS, calls []CalledTool, events []string, haveEvents bool) []AssertionResult {
	out := make([]AssertionResult, 0, len(s.Assertions))
	for _, a := range s.Assertions {
		r := AssertionResult{ID: a.ID, Kind: a.Kind, Severity: a.Severity}
		if r.Severity == "" {
			r.Severity = SeverityError
		}
		r.Status, r.Message = evaluate(a, fsys, calls, events, haveEvents)
		out = append(out, r)
	}
	return out
}

func evaluate(a Assertion, fsys fs.FS, calls []CalledTool, events []string, haveEvents bool) (Status, string) {
	switch a.Kind {
	case AssertToolCalled, AssertToolNotCalled:
		what := a.Tool
		if a.ToolCallID != "" {
			what = fmt.Sprintf("%s (call %s)", a.Tool, a.ToolCallID)
		}
		n := 0
		for _, c := range calls {
			if c.Name == a.Tool && (a.ToolCallID == "" || c.ID == a.ToolCallID) {
				n++
			}
		}
		called := n > 0
		msg := fmt.Sprintf("%s was called %d time(s)", what, n)
		if !called {
			msg = what + " was not called"
		}
		if called == (a.Kind == AssertToolCalled) {
			return StatusPass, msg
		}
		return StatusFail, msg
	case AssertFileExists, AssertFileContents:
		p, ok := workspacePath(a.Path)
		if !ok {
			return StatusFail, fmt.Sprintf("%q is not a path inside the workspace", a.Path)
		}
		if fsys == nil {
			return StatusFail, "no workspace to check " + a.Path + " in"
		}
		if a.Kind == AssertFileExists {
			if _, err := fs.Stat(fsys, p); err != nil {
				return StatusFail, fmt.Sprintf("%s does not exist: %v", a.Path, err)
			}
			return StatusPass, a.Path + " exists"
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return StatusFail, fmt.Sprintf("read %s: %v", a.Path, err)
		}
		text := string(data)
		if a.Equals != nil && text != *a.Equals {
			return StatusFail, fmt.Sprintf("%s does not equal the expected text (got %q)", a.Path, excerpt(text, 120))
		}
		if a.Contains != nil && !strings.Contains(text, *a.Contains) {
			return StatusFail, fmt.Sprintf("%s does not contain %q", a.Path, *a.Contains)
		}
		return StatusPass, a.Path + " has the expected contents"
	case AssertAuditEventEmitted:
		if !haveEvents {
			return StatusUnsupported, "audit events are not available to this check"
		}
		if slices.Contains(events, a.EventType) {
			return StatusPass, "audit event " + a.EventType + " was emitted"
		}
		return StatusFail, "audit event " + a.EventType + " was not emitted"
	}
	return StatusFail, fmt.Sprintf("unknown assertion kind %q", a.Kind)
}

// OutcomeOf is the verdict of a set of assertion results: fail when any
// error-severity assertion failed, pass otherwise (warnings and
// unsupported assertions do not fail a scenario).
func OutcomeOf(results []AssertionResult) Outcome {
	for _, r := range results {
		if r.Status == StatusFail && r.Severity != SeverityWarning {
			return OutcomeFail
		}
	}
	return OutcomePass
}
