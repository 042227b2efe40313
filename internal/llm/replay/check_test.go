package replay

import (
	"encoding/json"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	workspace := fstest.MapFS{
		"a.txt":     {Data: []byte("alpha beta\n")},
		"sub/b.txt": {Data: []byte("")},
	}
	calls := []CalledTool{
		{ID: "c1", Name: "Read"},
		{ID: "call-ls", Name: "Bash", IsError: true},
	}
	s := fullScenario()
	s.Assertions = append(s.Assertions,
		Assertion{ID: "missing", Kind: AssertFileExists, Path: "nope.txt", Severity: SeverityWarning},
		Assertion{ID: "wrong-call", Kind: AssertToolCalled, Tool: "Read", ToolCallID: "zzz"},
		Assertion{ID: "edit-called", Kind: AssertToolNotCalled, Tool: "Bash"},
		Assertion{ID: "a-equals", Kind: AssertFileContents, Path: "a.txt", Equals: ptr("alpha")},
		Assertion{ID: "a-lacks", Kind: AssertFileContents, Path: "a.txt", Contains: ptr("gamma")},
		Assertion{ID: "dir-exists", Kind: AssertFileExists, Path: "sub"},
	)
	want := []AssertionResult{
		{"read", AssertToolCalled, SeverityError, StatusPass, "Read was called 1 time(s)"},
		{"ls", AssertToolCalled, SeverityError, StatusPass, "Bash (call call-ls) was called 1 time(s)"},
		{"no-edit", AssertToolNotCalled, SeverityWarning, StatusPass, "Edit was not called"},
		{"a-exists", AssertFileExists, SeverityError, StatusPass, "a.txt exists"},
		{"a-has", AssertFileContents, SeverityError, StatusPass, "./a.txt has the expected contents"},
		{"b-empty", AssertFileContents, SeverityError, StatusPass, "sub/b.txt has the expected contents"},
		{"audited", AssertAuditEventEmitted, SeverityError, StatusUnsupported, "audit events are not available to this check"},
		{"missing", AssertFileExists, SeverityWarning, StatusFail, "nope.txt does not exist: open nope.txt: file does not exist"},
		{"wrong-call", AssertToolCalled, SeverityError, StatusFail, "Read (call zzz) was not called"},
		{"edit-called", AssertToolNotCalled, SeverityError, StatusFail, "Bash was called 1 time(s)"},
		{"a-equals", AssertFileContents, SeverityError, StatusFail, `a.txt does not equal the expected text (got "alpha beta")`},
		{"a-lacks", AssertFileContents, SeverityError, StatusFail, `a.txt does not contain "gamma"`},
		{"dir-exists", AssertFileExists, SeverityError, StatusPass, "sub exists"},
	}
	got := s.Check(workspace, calls)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
	if OutcomeOf(got) != OutcomeFail {
		t.Errorf("OutcomeOf = pass, want fail")
	}

	withEvents := s.CheckWithAuditEvents(workspace, calls, []string{"tool.approved"})
	if r := withEvents[6]; r.Status != StatusPass {
		t.Errorf("audit assertion with the event = %+v, want pass", r)
	}
	withEvents = s.CheckWithAuditEvents(workspace, calls, nil)
	if r := withEvents[6]; r.Status != StatusFail || r.Message != "audit event tool.approved was not emitted" {
		t.Errorf("audit assertion without the event = %+v, want fail", r)
	}
}

func TestCheckWithoutWorkspace(t *testing.T) {
	t.Parallel()
	s := &Scenario{Assertions: []Assertion{{ID: "x", Kind: AssertFileExists, Path: "a"}}}
	got := s.Check(nil, nil)
	if len(got) != 1 || got[0].Status != StatusFail || got[0].Message != "no workspace to check a in" {
		t.Errorf("Check(nil) = %+v", got)
	}
}

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		results []AssertionResult
		want    Outcome
	}{
		{"none", nil, OutcomePass},
		{"all pass", []AssertionResult{{Status: StatusPass, Severity: SeverityError}}, OutcomePass},
		{"warning fails", []AssertionResult{{Status: StatusFail, Severity: SeverityWarning}}, OutcomePass},
		{"unsupported", []AssertionResult{{Status: StatusUnsupported, Severity: SeverityError}}, OutcomePass},
		{"error fails", []AssertionResult{{Status: StatusPass}, {Status: StatusFail, Severity: SeverityError}}, OutcomeFail},
	}
	for _, tt := range tests {
		if got := OutcomeOf(tt.results); got != tt.want {
			t.Errorf("%s: OutcomeOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestCalledTools(t *testing.T) {
	t.Parallel()
	call := func(id, name string) llm.Part {
		return llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Input: json.RawMessage(`{}`)}}
	}
	result := func(id string, isErr bool) llm.Part {
		return llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: id, IsError: isErr}}
	}
	msgs := []llm.Message{
		llm.UserText("go"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("x"), call("1", "Read"), call("2", "Bash")}},
		{Role: llm.RoleUser, Parts: []llm.Part{result("1", false), result("2", true)}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{call("3", "Write")}}, // never answered
	}
	want := []CalledTool{
		{ID: "1", Name: "Read", Input: json.RawMessage(`{}`)},
		{ID: "2", Name: "Bash", Input: json.RawMessage(`{}`), IsError: true},
	}
	if diff := cmp.Diff(want, CalledTools(msgs)); diff != "" {
		t.Errorf("CalledTools (-want +got):\n%s", diff)
	}
}
