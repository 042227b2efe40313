package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// golden is one family of golden lines in testdata.
type golden struct {
	file   string
	decode func([]byte) (Message, error)
	types  []Message
}

func goldens() []golden {
	return []golden{
		{"client.jsonl", DecodeClient, ClientMessages()},
		{"server.jsonl", DecodeServer, ServerMessages()},
		{"sse.jsonl", DecodeEnvelope, Envelopes()},
	}
}

// readLines returns the non-empty lines of a testdata file.
func readLines(tb testing.TB, name string) [][]byte {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			lines = append(lines, bytes.Clone(l))
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}

// canonical parses JSON keeping numbers as written, so that comparing two
// canonical values is byte equality modulo key order and whitespace.
func canonical(tb testing.TB, data []byte) any {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("parse %s: %v", data, err)
	}
	return v
}

var equateEmpty = cmpopts.EquateEmpty()

func TestCatalogue(t *testing.T) {
	t.Parallel()
	c, err := buildCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    *family
		want int
	}{{c.client, 17}, {c.server, 27}, {c.envelope, 4}} {
		if len(tc.f.order) != tc.want || len(tc.f.byType) != tc.want {
			t.Errorf("%s family has %d types, want %d", tc.f.name, len(tc.f.order), tc.want)
		}
	}
	// Every struct type on the wire encodes through the codec under
	// encoding/json too.
	marshaler := reflect.TypeFor[json.Marshaler]()
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for rt, ts := range c.specs {
		if ts.kind == kindStruct || ts.kind == kindUnion {
			if !rt.Implements(marshaler) {
				t.Errorf("%v does not implement json.Marshaler", rt)
			}
			for _, f := range ts.fields {
				if !snake.MatchString(f.name) && f.name != "mimeType" && f.name != "protocolVersion" {
					t.Errorf("%v.%s is not snake_case", rt, f.name)
				}
			}
		}
	}
}

func TestGoldenRoundTrip(t *testing.T) {
	t.Parallel()
	for _, g := range goldens() {
		t.Run(g.file, func(t *testing.T) {
			t.Parallel()
			seen := map[string]bool{}
			for _, line := range readLines(t, g.file) {
				m, err := g.decode(line)
				if err != nil {
					t.Errorf("decode %s: %v", line, err)
					continue
				}
				seen[m.MessageType()] = true
				out, err := Marshal(m)
				if err != nil {
					t.Errorf("marshal %s: %v", line, err)
					continue
				}
				if diff := cmp.Diff(canonical(t, line), canonical(t, out)); diff != "" {
					t.Errorf("re-encoding changed the message (-golden +encoded):\n%s", diff)
				}
				if !bytes.HasPrefix(out, []byte(`{"type":"`+m.MessageType()+`"`)) {
					t.Errorf("type is not first: %s", out)
				}
				// Encoding is canonical: decoding the output and encoding
				// again gives the same bytes.
				m2, err := g.decode(out)
				if err != nil {
					t.Errorf("decode re-encoded %s: %v", out, err)
					continue
				}
				if diff := cmp.Diff(m, m2, equateEmpty); diff != "" {
					t.Errorf("decode(encode(m)) != m (-m +m2):\n%s", diff)
				}
				out2, err := Marshal(m2)
				if err != nil || !bytes.Equal(out, out2) {
					t.Errorf("second encoding differs (%v):\n%s\n%s", err, out, out2)
				}
				// encoding/json agrees with Marshal (it may escape <, >
				// and &, hence the comparison after parsing).
				viaJSON, err := json.Marshal(m)
				if err != nil {
					t.Errorf("json.Marshal: %v", err)
				} else if diff := cmp.Diff(canonical(t, out), canonical(t, viaJSON)); diff != "" {
					t.Errorf("json.Marshal differs from Marshal (-Marshal +json.Marshal):\n%s", diff)
				}
			}
			for _, m := range g.types {
				if !seen[m.MessageType()] {
					t.Errorf("no golden line for %q", m.MessageType())
				}
			}
		})
	}
}

func TestSnapshotGolden(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if s.ProtocolVersion != Version || s.Cursor != 42 || s.LastInit != nil || !s.State.IsReady {
		t.Errorf("decoded %+v", s)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(canonical(t, data), canonical(t, out)); diff != "" {
		t.Errorf("re-encoding changed the snapshot (-golden +encoded):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

func TestEncoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    Message
		want string
	}{
		{"required nullable emits null", Ready{ProtocolVersion: Version, Model: "m", Provider: "p"},
			`{"type":"ready","protocol_version":"2026-04-02","model":"m","provider":"p","session_id":null}`},
		{"session_info nulls", SessionInfo{Cwd: "/w"},
			`{"type":"session_info","session_id":null,"cwd":"/w","git_branch":null}`},
		{"optional nullable: absent, null, value", HelloOK{ProtocolVersion: Version, ConnectionID: "local", LeaseExpiresAt: Null[string](), ControllerConnectionID: Some("local")},
			`{"type":"hello_ok","protocol_version":"2026-04-02","connection_id":"local","controller_connection_id":"local","lease_expires_at":null}`},
		{"optional fields omitted", Hello{}, `{"type":"hello"}`},
		{"empty message", Interrupt{}, `{"type":"interrupt"}`},
		{"explicit false kept", UtilityCommandStart{CommandID: "c", Command: "ls", AllowStdin: ptr(false)},
			`{"type":"utility_command_start","command_id":"c","command":"ls","allow_stdin":false}`},
		{"explicit zero kept", UtilityFileWatchStart{WatchID: "w", DebounceMS: ptr(0)},
			`{"type":"utility_file_watch_start","watch_id":"w","debounce_ms":0}`},
		{"nil required list is []", ResponseEnd{ResponseID: "r", Usage: Usage{ModelID: "m", Provider: "p"}, DurationMS: 3},
			`{"type":"response_end","response_id":"r","usage":{"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"total_tokens":0,"total_cost_usd":0,"model_id":"m","provider":"p"},"tools_summary":{"tools_used":[],"calls_succeeded":0,"calls_failed":0},"duration_ms":3}`},
		{"ttft kept", ResponseEnd{ResponseID: "r", ToolsSummary: ToolsSummary{ToolsUsed: []string{"Read"}, SummaryLabels: []string{"x"}}, TTFTMS: ptr(int64(5))},
			`{"type":"response_end","response_id":"r","usage":{"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"total_tokens":0,"total_cost_usd":0,"model_id":"","provider":""},"tools_summary":{"tools_used":["Read"],"calls_succeeded":0,"calls_failed":0,"summary_labels":["x"]},"duration_ms":0,"ttft_ms":5}`},
		{"nil raw is null", ToolCall{CallID: "c", Tool: "t"}, `{"type":"tool_call","call_id":"c","tool":"t","args":null,"requires_approval":false}`},
		{"raw is compacted", ToolCall{CallID: "c", Tool: "t", Args: json.RawMessage("{\n  \"a\": [1, 2]\n}")}, `{"type":"tool_call","call_id":"c","tool":"t","args":{"a":[1,2]},"requires_approval":false}`},
		{"strings: no HTML escaping, controls and separators escaped", ResponseChunk{ResponseID: "r", Content: "<a&b>\n\t\"\\\u0001\u2028\xff"},
			`{"type":"response_chunk","response_id":"r","content":"<a&b>\n\t\"\\\u0001\u2028\ufffd","is_thinking":false}`},
		{"content block variants always complete", ClientToolResult{CallID: "c", Content: []ContentBlock{TextBlock(""), ImageBlock("AA==", "image/png")}},
			`{"type":"client_tool_result","call_id":"c","content":[{"type":"text","text":""},{"type":"image","data":"AA==","mimeType":"image/png"}],"is_error":false}`},
		{"floats like JavaScript", FileSearchResultsFixture(), `{"type":"utility_file_search_results","search_id":"s","query":"q","cwd":"/","results":[{"path":"a","score":1e-7},{"path":"b","score":100},{"path":"c","score":1e+21},{"path":"d","score":0.5}],"truncated":false}`},
		{"map keys sorted", UtilityCommandStart{CommandID: "c", Command: "x", Env: map[string]string{"B": "2", "A": "1"}},
			`{"type":"utility_command_start","command_id":"c","command":"x","env":{"A":"1","B":"2"}}`},
		{"message envelope", MessageEnvelope{Cursor: 3, Message: Status{Message: "hi"}},
			`{"type":"message","cursor":3,"message":{"type":"status","message":"hi"}}`},
		{"pending request constants filled, pending_requests always present", SnapshotEnvelope{Snapshot: Snapshot{ProtocolVersion: Version, SessionID: "s", LastInit: &Init{ApprovalMode: ApprovalAuto}, State: RuntimeState{PendingRequests: []PendingRequest{{ID: "i", Kind: RequestApproval, ToolCallID: "c", CallID: "c", ToolName: "t", Tool: "t", Args: json.RawMessage(`{}`), Source: SourceLocal}}}}},
			`{"type":"snapshot","snapshot":{"protocolVersion":"2026-04-02","session_id":"s","cursor":0,"last_init":{"type":"init","approval_mode":"auto"},"state":{"connection_count":0,"subscriber_count":0,"connections":[],"pending_requests":[{"id":"i","kind":"approval","status":"pending","visibility":"user","tool_call_id":"c","call_id":"c","tool_name":"t","tool":"t","args":{},"source":"local"}],"pending_approvals":[],"pending_client_tools":[],"pending_mcp_elicitations":[],"pending_user_inputs":[],"pending_tool_retries":[],"tracked_tools":[],"active_tools":[],"active_utility_commands":[],"active_file_watches":[],"is_ready":false,"is_responding":false}}}`},
		{"pointer message", &Status{Message: "p"}, `{"type":"status","message":"p"}`},
	}
	v := newTestValidator(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal:\n got %s\nwant %s", got, tt.want)
			}
			if bytes.ContainsAny(got, "\n\r") {
				t.Errorf("output spans lines: %q", got)
			}
			if err := v.validate(got); err != nil {
				t.Errorf("schema rejects Marshal output: %v", err)
			}
			var buf bytes.Buffer
			if err := Encode(&buf, tt.m); err != nil || buf.String() != tt.want+"\n" {
				t.Errorf("Encode = %q, %v", buf.String(), err)
			}
		})
	}
}

// FileSearchResultsFixture exercises float formatting.
func FileSearchResultsFixture() UtilityFileSearchResults {
	return UtilityFileSearchResults{SearchID: "s", Query: "q", Cwd: "/", Results: []FileSearchResult{
		{"a", 1e-7}, {"b", 100}, {"c", 1e21}, {"d", 0.5},
	}}
}

// foreign is a Message that is not one of the package's types.
type foreign struct {
	A int `json:"a"`
}

func (foreign) MessageType() string { return "job_event" }

func TestMarshalForeignAndErrors(t *testing.T) {
	t.Parallel()
	got, err := Marshal(foreign{A: 1})
	if err != nil || string(got) != `{"type":"job_event","a":1}` {
		t.Errorf("Marshal(foreign) = %s, %v", got, err)
	}
	if _, err := Marshal(nil); err == nil {
		t.Error("Marshal(nil) succeeded")
	}
	if _, err := Marshal((*Status)(nil)); err == nil {
		t.Error("Marshal((*Status)(nil)) succeeded")
	}
	if _, err := Marshal(ToolCall{Args: json.RawMessage("{bad")}); err == nil || !strings.Contains(err.Error(), "args") {
		t.Errorf("Marshal with invalid raw args: %v", err)
	}
	if _, err := Marshal(UtilityFileSearchResults{Results: []FileSearchResult{{"x", nanValue()}}}); err == nil {
		t.Error("Marshal of NaN succeeded")
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func TestNullable(t *testing.T) {
	t.Parallel()
	var absent Nullable[string]
	if !absent.IsZero() || absent.IsNull() || absent.String() != "<absent>" {
		t.Errorf("zero Nullable: %v", absent)
	}
	if n := Null[int](); n.IsZero() || !n.IsNull() || n.String() != "null" {
		t.Errorf("Null: %v", n)
	}
	if v, ok := Some("x").Get(); !ok || v != "x" {
		t.Errorf("Some(x).Get() = %q, %v", v, ok)
	}
	// Nullable works with encoding/json in foreign structs.
	type body struct {
		A Nullable[string] `json:"a,omitzero"`
		B Nullable[string] `json:"b,omitzero"`
		C Nullable[int]    `json:"c,omitzero"`
	}
	out, err := json.Marshal(body{B: Null[string](), C: Some(3)})
	if err != nil || string(out) != `{"b":null,"c":3}` {
		t.Errorf("json.Marshal = %s, %v", out, err)
	}
	var back body
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(body{B: Null[string](), C: Some(3)}, back); diff != "" {
		t.Errorf("json round trip (-want +got):\n%s", diff)
	}
}
