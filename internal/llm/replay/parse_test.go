package replay

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/proctest"
)

var _ = flag.Bool("update", false, "rewrite golden files") // read by proctest.Golden

func ptr[T any](v T) *T { return &v }

// fullScenario is what testdata/valid/full.{json,yaml} hold.
func fullScenario() *Scenario {
	return &Scenario{
		SchemaVersion:         SchemaVersion,
		ID:                    "full",
		Description:           "Every field and statement kind, once.",
		ExpectedOutcome:       OutcomeFail,
		WorkspaceManifestPath: "manifests/full.json",
		ReleaseGate:           json.RawMessage(`{"releaseBlocking":false,"tier":"smoke","requiredArtifacts":["replay"]}`),
		Metadata: Metadata{
			RecordedFrom:  "session-123",
			RecordedAt:    "2026-05-10T00:00:00.000Z",
			ModelOriginal: "anthropic/claude-sonnet-4-5",
			ToolsExpected: []string{"Read", "Bash"},
			AuditEvents:   []string{"tool.approved"},
		},
		Frames: []Frame{
			{Index: 0, Statements: []Statement{
				{Kind: KindThinking, Text: "Look first."},
				{Kind: KindText, Text: "Reading <a> & b.", StreamMS: 160},
				{Kind: KindDelay, MS: 0},
				{Kind: KindToolCall, Tool: "Read", Input: json.RawMessage(`{"path":"a.txt","limit":10}`), ExpectedResult: ExpectSuccess},
				{Kind: KindToolCall, Tool: "Bash", ID: "call-ls", Input: json.RawMessage(`{"command":"ls && echo ok"}`), ExpectedResult: ExpectAny},
				{Kind: KindUsage, Usage: llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, CacheWriteTokens: 7}},
			}},
			{Index: 1, Statements: []Statement{
				{Kind: KindText, Text: "Done.", Chunks: []string{"Do", "ne."}},
				{Kind: KindText, Text: " Bye", Chunks: []string{" B", "ye"}},
				{Kind: KindWaitForUser},
			}},
			{Index: 2, Statements: []Statement{
				{Kind: KindText, Text: "Retry me."},
				{Kind: KindError, ErrorType: ErrorTransient, Message: "Upstream hiccup."},
			}},
			{Index: 3, Statements: []Statement{
				{Kind: KindToolCall, Tool: "Read", Input: json.RawMessage(`{}`)},
				{Kind: KindEnd, Reason: EndLimitExceeded},
			}},
		},
		Assertions: []Assertion{
			{ID: "read", Kind: AssertToolCalled, Tool: "Read", Severity: SeverityError, Note: "reads a.txt"},
			{ID: "ls", Kind: AssertToolCalled, Tool: "Bash", ToolCallID: "call-ls"},
			{ID: "no-edit", Kind: AssertToolNotCalled, Tool: "Edit", Severity: SeverityWarning},
			{ID: "a-exists", Kind: AssertFileExists, Path: "a.txt"},
			{ID: "a-has", Kind: AssertFileContents, Path: "./a.txt", Contains: ptr("alpha")},
			{ID: "b-empty", Kind: AssertFileContents, Path: "sub/b.txt", Equals: ptr("")},
			{ID: "audited", Kind: AssertAuditEventEmitted, EventType: "tool.approved"},
		},
	}
}

// cmpScenario compares scenarios, ignoring where they came from and
// comparing raw JSON semantically.
var cmpScenario = []cmp.Option{
	cmpopts.IgnoreFields(Scenario{}, "Name"),
	cmpopts.IgnoreUnexported(Scenario{}), // bundled: the demo is the bundled one
	cmp.Transformer("json", func(r json.RawMessage) any {
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return "invalid JSON: " + string(r)
		}
		return v
	}),
}

func TestParseValidFilesJSONAndYAMLAgree(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"full.json", "full.yaml"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", "valid", name)
			s, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if s.Name != path {
				t.Errorf("Name = %q, want %q", s.Name, path)
			}
			if diff := cmp.Diff(fullScenario(), s, cmpScenario...); diff != "" {
				t.Errorf("scenario (-want +got):\n%s", diff)
			}
			if got, want := s.Tools(), []string{"Read", "Bash"}; !cmp.Equal(got, want) {
				t.Errorf("Tools() = %v, want %v", got, want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load error = %v, want one wrapping fs.ErrNotExist", err)
	}
}

// TestParseInvalidGolden checks the complete error text (every problem,
// with line:col) for each file in testdata/invalid against its .golden.
func TestParseInvalidGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, ".golden") {
			continue
		}
		n++
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(path)
			_, err = Parse(data, name)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse error = %v, want a *ValidationError", err)
			}
			for _, p := range ve.Problems {
				if p.Line == 0 || p.Column == 0 {
					t.Errorf("problem without a position: %v", p)
				}
			}
			proctest.Golden(t, path+".golden", []byte(err.Error()+"\n"))
		})
	}
	if n < 5 {
		t.Fatalf("found only %d invalid files", n)
	}
}

// TestParseReportsLineAndColumn pins the brief's example: a JSON file whose
// third frame has a statement of unknown kind.
func TestParseReportsLineAndColumn(t *testing.T) {
	t.Parallel()
	doc := `{
  "schemaVersion": "evalops.maestro.scripted-scenario.v1",
  "id": "lc", "description": "d",
  "metadata": {"recordedAt": "2026-01-02T03:04:05Z", "toolsExpected": []},
  "frames": [
    {"index": 0, "statements": [{"kind": "text", "text": "a"}]},
    {"index": 1, "statements": [{"kind": "text", "text": "b"}]},
    {"index": 2, "statements": [
        {"kind": "foo"}
    ]}
  ]
}`
	_, err := Parse([]byte(doc), "lc.json")
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse error = %v, want a *ValidationError", err)
	}
	want := []Problem{{
		Line: 9, Column: 18, Path: "frames[2].statements[0].kind",
		Message: `unknown statement kind "foo" (expected one of text, delay, tool_call, error, wait_for_user, end, thinking, usage)`,
	}}
	if diff := cmp.Diff(want, ve.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	wantText := `invalid scripted scenario lc.json: 9:18: frames[2].statements[0].kind: unknown statement kind "foo" (expected one of text, delay, tool_call, error, wait_for_user, end, thinking, usage)`
	if err.Error() != wantText {
		t.Errorf("Error() =\n%s\nwant\n%s", err, wantText)
	}
}

// base is a minimal valid scenario as a generic JSON document.
func base() map[string]any {
	return map[string]any{
		"schemaVersion": SchemaVersion,
		"id":            "rules",
		"description":   "rule tests",
		"metadata":      map[string]any{"recordedAt": "2026-01-02T03:04:05Z", "toolsExpected": []any{"Read"}},
		"frames": []any{
			map[string]any{"index": 0, "statements": []any{map[string]any{"kind": "text", "text": "hi"}}},
		},
	}
}

type obj = map[string]any

func meta(m obj) obj { return m["metadata"].(obj) }

func frame(m obj, i int) obj { return m["frames"].([]any)[i].(obj) }

// setStatements replaces frame i's statements.
func setStatements(m obj, i int, st ...any) {
	if st == nil {
		st = []any{}
	}
	for len(m["frames"].([]any)) <= i {
		n := len(m["frames"].([]any))
		m["frames"] = append(m["frames"].([]any), obj{"index": n, "statements": []any{obj{"kind": "text", "text": "x"}}})
	}
	frame(m, i)["statements"] = st
}

func TestParseRules(t *testing.T) {
	t.Parallel()
	kinds := "text, delay, tool_call, error, wait_for_user, end, thinking, usage"
	tests := []struct {
		name   string
		mutate func(m obj)
		want   []string // "path: message" of every problem; nil = valid
	}{
		{"base is valid", func(obj) {}, nil},
		{"schemaVersion missing", func(m obj) { delete(m, "schemaVersion") }, []string{"schemaVersion: required field is missing"}},
		{"schemaVersion wrong", func(m obj) { m["schemaVersion"] = "v0" },
			[]string{`schemaVersion: unsupported schema version "v0" (expected "evalops.maestro.scripted-scenario.v1")`}},
		{"id empty", func(m obj) { m["id"] = "" }, []string{"id: must not be empty"}},
		{"id blank", func(m obj) { m["id"] = "  " }, []string{"id: must not be empty"}},
		{"id number", func(m obj) { m["id"] = 3 }, []string{"id: expected a string, got a number"}},
		{"description missing", func(m obj) { delete(m, "description") }, []string{"description: required field is missing"}},
		{"expectedOutcome unknown", func(m obj) { m["expectedOutcome"] = "maybe" },
			[]string{`expectedOutcome: unknown outcome "maybe" (expected one of pass, fail)`}},
		{"expectedOutcome pass", func(m obj) { m["expectedOutcome"] = "pass" }, nil},
		{"unknown top-level field", func(m obj) { m["title"] = "x" },
			[]string{`title: unknown field "title" in a scripted scenario object (expected one of schemaVersion, id, description, expectedOutcome, metadata, frames, assertions, workspaceManifestPath, releaseGate, subtasks)`}},
		{"releaseGate not an object", func(m obj) { m["releaseGate"] = []any{} }, []string{"releaseGate: expected an object, got an array"}},
		{"workspaceManifestPath empty", func(m obj) { m["workspaceManifestPath"] = "" }, []string{"workspaceManifestPath: must not be empty"}},

		{"metadata missing", func(m obj) { delete(m, "metadata") }, []string{"metadata: required field is missing"}},
		{"metadata not an object", func(m obj) { m["metadata"] = "x" }, []string{"metadata: expected a metadata object, got a string"}},
		{"recordedAt missing", func(m obj) { delete(meta(m), "recordedAt") }, []string{"metadata.recordedAt: required field is missing"}},
		{"recordedAt not a timestamp", func(m obj) { meta(m)["recordedAt"] = "2026-01-02" },
			[]string{`metadata.recordedAt: expected an RFC 3339 timestamp such as 2026-01-02T15:04:05Z, got "2026-01-02"`}},
		{"toolsExpected missing", func(m obj) { delete(meta(m), "toolsExpected") }, []string{"metadata.toolsExpected: required field is missing"}},
		{"toolsExpected empty is fine", func(m obj) { meta(m)["toolsExpected"] = []any{} }, nil},
		{"toolsExpected not an array", func(m obj) { meta(m)["toolsExpected"] = "Read" },
			[]string{"metadata.toolsExpected: expected an array of strings, got a string"}},
		{"toolsExpected duplicate", func(m obj) { meta(m)["toolsExpected"] = []any{"Read", "Read"} },
			[]string{`metadata.toolsExpected: tool "Read" is listed twice`}},
		{"toolsExpected empty name", func(m obj) { meta(m)["toolsExpected"] = []any{""} },
			[]string{"metadata.toolsExpected[0]: must not be empty"}},
		{"auditEvents wrong item", func(m obj) { meta(m)["auditEvents"] = []any{true} },
			[]string{"metadata.auditEvents[0]: expected a string, got a boolean"}},
		{"metadata unknown field", func(m obj) { meta(m)["model"] = "x" },
			[]string{`metadata.model: unknown field "model" in a metadata object (expected one of recordedFrom, recordedAt, modelOriginal, toolsExpected, auditEvents)`}},

		{"frames missing", func(m obj) { delete(m, "frames") }, []string{"frames: required field is missing"}},
		{"frames empty", func(m obj) { m["frames"] = []any{} }, []string{"frames: a scenario needs at least one frame"}},
		{"frames not an array", func(m obj) { m["frames"] = obj{} }, []string{"frames: expected an array of frames, got an object"}},
		{"frame not an object", func(m obj) { m["frames"] = []any{1} }, []string{"frames[0]: expected a frame object, got a number"}},
		{"index missing", func(m obj) { delete(frame(m, 0), "index") }, []string{"frames[0].index: required field is missing"}},
		{"index not contiguous", func(m obj) { setStatements(m, 1, obj{"kind": "text", "text": "x"}); frame(m, 1)["index"] = 2 },
			[]string{"frames[1].index: expected 1, got 2 (frame indexes are contiguous from 0, in order)"}},
		{"index fractional", func(m obj) { frame(m, 0)["index"] = 0.5 }, []string{"frames[0].index: expected an integer, got 0.5"}},
		{"index string", func(m obj) { frame(m, 0)["index"] = "0" }, []string{"frames[0].index: expected an integer, got a string"}},
		{"statements missing", func(m obj) { delete(frame(m, 0), "statements") }, []string{"frames[0].statements: required field is missing"}},
		{"statements empty", func(m obj) { setStatements(m, 0) }, []string{"frames[0].statements: a frame needs at least one statement"}},
		{"frame unknown field", func(m obj) { frame(m, 0)["name"] = "x" },
			[]string{`frames[0].name: unknown field "name" in a frame object (expected one of index, statements)`}},

		{"statement not an object", func(m obj) { setStatements(m, 0, "text") },
			[]string{"frames[0].statements[0]: expected a statement object, got a string"}},
		{"kind missing", func(m obj) { setStatements(m, 0, obj{"text": "x"}) },
			[]string{"frames[0].statements[0].kind: required field is missing (one of " + kinds + ")"}},
		{"kind unknown", func(m obj) { setStatements(m, 0, obj{"kind": "foo"}) },
			[]string{`frames[0].statements[0].kind: unknown statement kind "foo" (expected one of ` + kinds + ")"}},
		{"kind not a string", func(m obj) { setStatements(m, 0, obj{"kind": 1}) },
			[]string{"frames[0].statements[0].kind: expected a string, got a number"}},
		{"field of another kind", func(m obj) { setStatements(m, 0, obj{"kind": "delay", "ms": 1, "text": "x"}) },
			[]string{`frames[0].statements[0].text: unknown field "text" in a delay statement (expected one of kind, ms)`}},

		{"text missing", func(m obj) { setStatements(m, 0, obj{"kind": "text"}) },
			[]string{"frames[0].statements[0].text: required field is missing (give text, chunks or both)"}},
		{"text empty is fine", func(m obj) { setStatements(m, 0, obj{"kind": "text", "text": ""}) }, nil},
		{"chunks only", func(m obj) { setStatements(m, 0, obj{"kind": "text", "chunks": []any{"a", "b"}}) }, nil},
		{"chunks differ from text", func(m obj) { setStatements(m, 0, obj{"kind": "text", "text": "ab", "chunks": []any{"a", "c"}}) },
			[]string{`frames[0].statements[0].chunks: the chunks join to "ac", which differs from text "ab"`}},
		{"chunks empty", func(m obj) { setStatements(m, 0, obj{"kind": "text", "chunks": []any{}}) },
			[]string{"frames[0].statements[0].chunks: must hold at least one chunk"}},
		{"chunk not a string", func(m obj) { setStatements(m, 0, obj{"kind": "text", "chunks": []any{"a", 1}}) },
			[]string{"frames[0].statements[0].chunks[1]: expected a string, got a number"}},
		{"streamMs negative", func(m obj) { setStatements(m, 0, obj{"kind": "text", "text": "a", "streamMs": -1}) },
			[]string{"frames[0].statements[0].streamMs: must be between 0 and 86400000, got -1"}},
		{"streamMs too large", func(m obj) { setStatements(m, 0, obj{"kind": "text", "text": "a", "streamMs": 1e12}) },
			[]string{"frames[0].statements[0].streamMs: must be between 0 and 86400000, got 1000000000000"}},
		{"thinking empty", func(m obj) { setStatements(m, 0, obj{"kind": "thinking", "text": ""}) },
			[]string{"frames[0].statements[0].text: must not be empty"}},
		{"thinking with chunks", func(m obj) { setStatements(m, 0, obj{"kind": "thinking", "text": "a", "chunks": []any{"a"}}) },
			[]string{`frames[0].statements[0].chunks: unknown field "chunks" in a thinking statement (expected one of kind, text)`}},

		{"delay ms missing", func(m obj) { setStatements(m, 0, obj{"kind": "delay"}) },
			[]string{"frames[0].statements[0].ms: required field is missing"}},
		{"delay ms zero", func(m obj) { setStatements(m, 0, obj{"kind": "delay", "ms": 0}) }, nil},
		{"delay ms float", func(m obj) { setStatements(m, 0, obj{"kind": "delay", "ms": 1.5}) },
			[]string{"frames[0].statements[0].ms: expected an integer, got 1.5"}},
		{"delay ms integral float", func(m obj) { setStatements(m, 0, obj{"kind": "delay", "ms": 2e3}) }, nil},

		{"tool missing", func(m obj) { setStatements(m, 0, obj{"kind": "tool_call"}) },
			[]string{"frames[0].statements[0].tool: required field is missing"}},
		{"tool not expected", func(m obj) { setStatements(m, 0, obj{"kind": "tool_call", "tool": "Bash"}) },
			[]string{`frames[0].statements[0].tool: tool "Bash" is not listed in metadata.toolsExpected`}},
		{"tool input of any JSON type", func(m obj) {
			setStatements(m, 0, obj{"kind": "tool_call", "tool": "Read", "input": []any{1}}, obj{"kind": "tool_call", "tool": "Read", "input": nil})
		}, nil},
		{"tool id empty", func(m obj) { setStatements(m, 0, obj{"kind": "tool_call", "tool": "Read", "id": ""}) },
			[]string{"frames[0].statements[0].id: must not be empty"}},
		{"expectedResult unknown", func(m obj) { setStatements(m, 0, obj{"kind": "tool_call", "tool": "Read", "expectedResult": "ok"}) },
			[]string{`frames[0].statements[0].expectedResult: unknown expected result "ok" (expected one of success, error, any)`}},
		{"duplicate explicit ids", func(m obj) {
			setStatements(m, 0, obj{"kind": "tool_call", "tool": "Read", "id": "a"})
			setStatements(m, 1, obj{"kind": "tool_call", "tool": "Read", "id": "a"})
		}, []string{`frames[1].statements[0].id: tool call id "a" is already used by frames[0].statements[0]`}},
		{"explicit id equal to a default id", func(m obj) {
			setStatements(m, 0, obj{"kind": "tool_call", "tool": "Read"}, obj{"kind": "tool_call", "tool": "Read", "id": "replay_rules_000_000"})
		}, []string{`frames[0].statements[1].id: tool call id "replay_rules_000_000" is already used by frames[0].statements[0]`}},

		{"error type missing", func(m obj) { setStatements(m, 0, obj{"kind": "error", "message": "m"}) },
			[]string{"frames[0].statements[0].type: required field is missing"}},
		{"error type unknown", func(m obj) { setStatements(m, 0, obj{"kind": "error", "type": "soft", "message": "m"}) },
			[]string{`frames[0].statements[0].type: unknown error type "soft" (expected one of transient, fatal)`}},
		{"error message missing", func(m obj) { setStatements(m, 0, obj{"kind": "error", "type": "fatal"}) },
			[]string{"frames[0].statements[0].message: required field is missing"}},
		{"end reason missing", func(m obj) { setStatements(m, 0, obj{"kind": "end"}) },
			[]string{"frames[0].statements[0].reason: required field is missing"}},
		{"end reason unknown", func(m obj) { setStatements(m, 0, obj{"kind": "end", "reason": "done"}) },
			[]string{`frames[0].statements[0].reason: unknown end reason "done" (expected one of complete, aborted, limit_exceeded)`}},
		{"wait_for_user extra field", func(m obj) { setStatements(m, 0, obj{"kind": "wait_for_user", "reason": "x"}) },
			[]string{`frames[0].statements[0].reason: unknown field "reason" in a wait_for_user statement (expected one of kind)`}},
		{"usage empty is fine", func(m obj) { setStatements(m, 0, obj{"kind": "usage"}) }, nil},
		{"usage negative", func(m obj) { setStatements(m, 0, obj{"kind": "usage", "output_tokens": -1}) },
			[]string{"frames[0].statements[0].output_tokens: must be between 0 and 1099511627776, got -1"}},
		{"usage camelCase field", func(m obj) { setStatements(m, 0, obj{"kind": "usage", "inputTokens": 1}) },
			[]string{`frames[0].statements[0].inputTokens: unknown field "inputTokens" in a usage statement (expected one of kind, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)`}},

		{"statement after end", func(m obj) {
			setStatements(m, 0, obj{"kind": "end", "reason": "complete"}, obj{"kind": "text", "text": "a"}, obj{"kind": "text", "text": "b"})
		}, []string{"frames[0].statements[1]: unreachable: the end statement at frames[0].statements[0] already ends the frame"}},
		{"statement after error", func(m obj) {
			setStatements(m, 0, obj{"kind": "error", "type": "fatal", "message": "m"}, obj{"kind": "usage"})
		}, []string{"frames[0].statements[1]: unreachable: the error statement at frames[0].statements[0] already ends the frame"}},
		{"statement after wait_for_user", func(m obj) {
			setStatements(m, 0, obj{"kind": "wait_for_user"}, obj{"kind": "end", "reason": "complete"})
		}, []string{"frames[0].statements[1]: unreachable: the wait_for_user statement at frames[0].statements[0] already ends the frame"}},
		{"tool calls with a terminal statement", func(m obj) {
			setStatements(m, 0, obj{"kind": "tool_call", "tool": "Read"}, obj{"kind": "end", "reason": "limit_exceeded"})
		}, nil},

		{"assertions not an array", func(m obj) { m["assertions"] = obj{} }, []string{"assertions: expected an array of assertions, got an object"}},
		{"assertion id missing", func(m obj) { m["assertions"] = []any{obj{"kind": "tool_called", "tool": "Read"}} },
			[]string{"assertions[0].id: required field is missing"}},
		{"assertion id duplicate", func(m obj) {
			m["assertions"] = []any{obj{"id": "a", "kind": "tool_called", "tool": "Read"}, obj{"id": "a", "kind": "tool_not_called", "tool": "Edit"}}
		}, []string{`assertions[1].id: assertion id "a" is already used by assertions[0]`}},
		{"assertion kind unknown", func(m obj) { m["assertions"] = []any{obj{"id": "a", "kind": "file_missing"}} },
			[]string{`assertions[0].kind: unknown assertion kind "file_missing" (expected one of tool_called, tool_not_called, file_exists, file_contents, audit_event_emitted)`}},
		{"assertion field of another kind", func(m obj) {
			m["assertions"] = []any{obj{"id": "a", "kind": "file_exists", "path": "x", "tool": "Read"}}
		},
			[]string{`assertions[0].tool: unknown field "tool" in a file_exists assertion (expected one of id, kind, severity, note, path)`}},
		{"assertion tool missing", func(m obj) { m["assertions"] = []any{obj{"id": "a", "kind": "tool_not_called"}} },
			[]string{"assertions[0].tool: required field is missing"}},
		{"assertion path absolute", func(m obj) { m["assertions"] = []any{obj{"id": "a", "kind": "file_exists", "path": "/etc/passwd"}} },
			[]string{`assertions[0].path: "/etc/passwd" must be a relative path inside the workspace`}},
		{"assertion path escapes", func(m obj) { m["assertions"] = []any{obj{"id": "a", "kind": "file_exists", "path": "a/../../b"}} },
			[]string{`assertions[0].path: "a/../../b" must be a relative path inside the workspace`}},
		{"file_contents without a check", func(m obj) { m["assertions"] = []any{obj{"id": "a", "kind": "file_contents", "path": "x"}} },
			[]string{"assertions[0]: a file_contents assertion needs contains or equals"}},
		{"file_contents with both checks", func(m obj) {
			m["assertions"] = []any{obj{"id": "a", "kind": "file_contents", "path": "x", "contains": "a", "equals": "a"}}
		}, nil},
		{"audit event type missing", func(m obj) { m["assertions"] = []any{obj{"id": "a", "kind": "audit_event_emitted"}} },
			[]string{"assertions[0].eventType: required field is missing"}},
		{"severity unknown", func(m obj) {
			m["assertions"] = []any{obj{"id": "a", "kind": "tool_called", "tool": "Read", "severity": "info"}}
		},
			[]string{`assertions[0].severity: unknown severity "info" (expected one of error, warning)`}},

		{"several problems at once", func(m obj) {
			m["id"] = ""
			delete(meta(m), "recordedAt")
			setStatements(m, 0, obj{"kind": "foo"}, obj{"kind": "delay", "ms": -2})
		}, []string{
			"id: must not be empty",
			"frames[0].statements[0].kind: unknown statement kind \"foo\" (expected one of " + kinds + ")",
			"frames[0].statements[1].ms: must be between 0 and 86400000, got -2",
			"metadata.recordedAt: required field is missing",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			tt.mutate(m)
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(data, "rules.json")
			var got []string
			if err != nil {
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("Parse error = %v, want a *ValidationError", err)
				}
				for _, p := range ve.Problems {
					got = append(got, p.Path+": "+p.Message)
				}
			}
			// Problems come sorted by position; json.Marshal sorts keys, so
			// compare as sets.
			if diff := cmp.Diff(tt.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nfull error: %v", diff, err)
			}
		})
	}
}

func TestParseFormatDetection(t *testing.T) {
	t.Parallel()
	jsonDoc, err := os.ReadFile(filepath.Join("testdata", "valid", "full.json"))
	if err != nil {
		t.Fatal(err)
	}
	yamlDoc, err := os.ReadFile(filepath.Join("testdata", "valid", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"scenario", jsonDoc, true},       // sniffed as JSON
		{"scenario", yamlDoc, true},       // sniffed as YAML
		{"scenario.yml", yamlDoc, true},   // by extension
		{"scenario.YAML", yamlDoc, true},  // case-insensitive
		{"scenario.yaml", jsonDoc, true},  // JSON is YAML
		{"scenario.json", yamlDoc, false}, // YAML is not JSON
		{"bom.json", append([]byte("\ufeff"), jsonDoc...), true},
	}
	for _, tt := range tests {
		s, err := Parse(tt.data, tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("Parse(%s, %.10q…) error = %v, want ok=%v", tt.name, tt.data, err, tt.ok)
			continue
		}
		if err == nil {
			if diff := cmp.Diff(fullScenario(), s, cmpScenario...); diff != "" {
				t.Errorf("Parse(%s): scenario (-want +got):\n%s", tt.name, diff)
			}
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []*Scenario{fullScenario(), Demo()} {
		data, err := s.Marshal()
		if err != nil {
			t.Fatalf("Marshal(%s): %v", s.ID, err)
		}
		back, err := Parse(data, s.ID+".json")
		if err != nil {
			t.Fatalf("Parse(Marshal(%s)): %v\n%s", s.ID, err, data)
		}
		if diff := cmp.Diff(s, back, cmpScenario...); diff != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", s.ID, diff)
		}
		if strings.Contains(string(data), `\u0026`) {
			t.Errorf("Marshal(%s) escapes &: %s", s.ID, data)
		}
	}
}

func TestValidateHandBuiltScenario(t *testing.T) {
	t.Parallel()
	good := &Scenario{
		SchemaVersion: SchemaVersion, ID: "hand", Description: "built in Go",
		Metadata: Metadata{RecordedAt: "2026-01-02T03:04:05Z"},
		Frames:   []Frame{{Index: 0, Statements: []Statement{{Kind: KindText, Text: "hi"}}}},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	bad := &Scenario{
		ID:       "hand",
		Metadata: Metadata{RecordedAt: "2026-01-02T03:04:05Z"},
		Frames:   []Frame{{Index: 1, Statements: []Statement{{Kind: KindToolCall, Tool: "Read"}, {Kind: "bogus"}}}},
	}
	err := bad.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate(bad) = %v, want a *ValidationError", err)
	}
	var got []string
	for _, p := range ve.Problems {
		if p.Line != 0 {
			t.Errorf("hand-built problem has a position: %+v", p)
		}
		got = append(got, p.Path+": "+p.Message)
	}
	want := []string{
		`schemaVersion: unsupported schema version "" (expected "evalops.maestro.scripted-scenario.v1")`,
		"description: must not be empty",
		"frames[0].index: expected 0, got 1 (frame indexes are contiguous from 0, in order)",
		`frames[0].statements[0].tool: tool "Read" is not listed in metadata.toolsExpected`,
		`frames[0].statements[1].kind: unknown statement kind "bogus" (expected one of text, delay, tool_call, error, wait_for_user, end, thinking, usage)`,
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func BenchmarkParseDemoYAML(b *testing.B) {
	src := DemoSource()
	for b.Loop() {
		if _, err := Parse(src, DemoName); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseDemoJSON(b *testing.B) {
	src, err := Demo().Marshal()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Parse(src, "demo.json"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseSubtasks: subtasks holds one scenario per subtask, each
// validated as a scenario, none with subtasks of its own.
func TestParseSubtasks(t *testing.T) {
	t.Parallel()
	leaf := `{"schemaVersion":"` + SchemaVersion + `","id":"leaf","description":"d","metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":[]},
		"frames":[{"index":0,"statements":[{"kind":"text","text":"done"}]}]%s}`
	root := func(subs ...string) string {
		return `{"schemaVersion":"` + SchemaVersion + `","id":"root","description":"d","metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":[]},
		"frames":[{"index":0,"statements":[{"kind":"text","text":"hi"}]}],"subtasks":[` + strings.Join(subs, ",") + `]}`
	}
	ok := fmt.Sprintf(leaf, "")
	tests := []struct {
		name    string
		src     string
		wantErr string
		subs    int
	}{
		{"two", root(ok, ok), "", 2},
		{"nested", root(fmt.Sprintf(leaf, `,"subtasks":[`+ok+`]`)), "a subtask's scenario cannot have subtasks", 0},
		{"not a scenario", root(`{"id":"x"}`), "required field is missing", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.src), "s.json")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(s.Subtasks) != tc.subs || s.Subtasks[0].ID != "leaf" {
				t.Fatalf("Parse = %+v, %v; want %d subtask scenarios", s, err, tc.subs)
			}
		})
	}
}
