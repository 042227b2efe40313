package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeClientErrors(t *testing.T) {
	t.Parallel()
	const p = "Failed to parse command: "
	const inv = p + "Invalid headless command: "
	tests := []struct {
		name, line, want, path string
		syntax                 bool
	}{
		// The three texts the contract fixes (§8.3).
		{"unknown type", `{"type":"bogus"}`, p + "Unknown headless command type", "/type", false},
		{"unexpected property", `{"type":"prompt","content":"x","unexpected":true}`, inv + "/unexpected Unexpected property", "/unexpected", false},
		{"missing type", `{"content":"x"}`, p + "$.type Expected known headless command type", "/type", false},
		// Variations of those.
		{"server type sent by client", `{"type":"status","message":"x"}`, p + "Unknown headless command type", "/type", false},
		{"type not a string", `{"type":5}`, p + "$.type Expected known headless command type", "/type", false},
		{"type null", `{"type":null,"content":"x"}`, p + "$.type Expected known headless command type", "/type", false},
		{"empty object", `{}`, p + "$.type Expected known headless command type", "/type", false},
		{"not an object", `["prompt"]`, p + "$.type Expected known headless command type", "/type", false},
		{"unknown type wins over unknown property", `{"x":1,"type":"bogus"}`, p + "Unknown headless command type", "/type", false},
		{"type last", `{"content":"x","zz":1,"type":"prompt"}`, inv + "/zz Unexpected property", "/zz", false},
		{"duplicate type", `{"type":"prompt","content":"x","type":"prompt"}`, inv + "/type Duplicate property", "/type", false},
		{"duplicate field", `{"type":"prompt","content":"x","content":"y"}`, inv + "/content Duplicate property", "/content", false},
		// Nested unknown properties carry their JSON pointer.
		{"unknown in client_info", `{"type":"hello","client_info":{"name":"x","nick":"y"}}`, inv + "/client_info/nick Unexpected property", "/client_info/nick", false},
		{"unknown in capabilities", `{"type":"hello","capabilities":{"server_requests":[],"raw":true}}`, inv + "/capabilities/raw Unexpected property", "/capabilities/raw", false},
		{"unknown in result", `{"type":"tool_response","call_id":"c","approved":true,"result":{"success":true,"output":"","extra":1}}`, inv + "/result/extra Unexpected property", "/result/extra", false},
		{"unknown in content block", `{"type":"client_tool_result","call_id":"c","content":[{"type":"text","text":"a"},{"type":"text","text":"b","extra":1}],"is_error":false}`, inv + "/content/1/extra Unexpected property", "/content/1/extra", false},
		{"other variant's field", `{"type":"client_tool_result","call_id":"c","content":[{"type":"text","text":"x","data":"y"}],"is_error":false}`, inv + "/content/0/data Unexpected property", "/content/0/data", false},
		{"camelCase mimeType only", `{"type":"client_tool_result","call_id":"c","content":[{"type":"image","data":"y","mime_type":"image/png"}],"is_error":false}`, inv + "/content/0/mime_type Unexpected property", "/content/0/mime_type", false},
		{"pointer escaping", `{"type":"hello","client_info":{"name":"x","a/b~c":1}}`, inv + "/client_info/a~1b~0c Unexpected property", "/client_info/a~1b~0c", false},
		// Required fields.
		{"missing content", `{"type":"prompt"}`, inv + "/content Expected required property", "/content", false},
		{"missing nested name", `{"type":"hello","client_info":{}}`, inv + "/client_info/name Expected required property", "/client_info/name", false},
		{"missing variant field", `{"type":"client_tool_result","call_id":"c","content":[{"type":"image","data":"y"}],"is_error":false}`, inv + "/content/0/mimeType Expected required property", "/content/0/mimeType", false},
		{"missing block type", `{"type":"client_tool_result","call_id":"c","content":[{"text":"y"}],"is_error":false}`, inv + "/content/0/type Expected required property", "/content/0/type", false},
		{"missing is_error", `{"type":"client_tool_result","call_id":"c","content":[]}`, inv + "/is_error Expected required property", "/is_error", false},
		// Types.
		{"wrong type", `{"type":"prompt","content":1}`, inv + "/content Expected string", "/content", false},
		{"null not allowed", `{"type":"prompt","content":null}`, inv + "/content Expected string", "/content", false},
		{"null for optional", `{"type":"hello","role":null}`, inv + "/role Expected string", "/role", false},
		{"bool", `{"type":"tool_response","call_id":"c","approved":"yes"}`, inv + "/approved Expected boolean", "/approved", false},
		{"array", `{"type":"prompt","content":"x","attachments":"a"}`, inv + "/attachments Expected array", "/attachments", false},
		{"array item", `{"type":"prompt","content":"x","attachments":["a",2]}`, inv + "/attachments/1 Expected string", "/attachments/1", false},
		{"object", `{"type":"hello","capabilities":[]}`, inv + "/capabilities Expected object", "/capabilities", false},
		{"integer", `{"type":"utility_command_resize","command_id":"c","columns":1.5,"rows":2}`, inv + "/columns Expected integer", "/columns", false},
		{"integer out of range", `{"type":"utility_file_read","read_id":"r","path":"p","limit":1e30}`, inv + "/limit Expected integer", "/limit", false},
		{"minimum", `{"type":"utility_command_resize","command_id":"c","columns":0,"rows":2}`, inv + "/columns Expected integer to be greater or equal to 1", "/columns", false},
		{"minimum zero", `{"type":"utility_file_watch_start","watch_id":"w","debounce_ms":-1}`, inv + "/debounce_ms Expected integer to be greater or equal to 0", "/debounce_ms", false},
		{"map value", `{"type":"utility_command_start","command_id":"c","command":"x","env":{"A":1}}`, inv + "/env/A Expected string", "/env/A", false},
		{"map duplicate", `{"type":"utility_command_start","command_id":"c","command":"x","env":{"A":"1","A":"2"}}`, inv + "/env/A Duplicate property", "/env/A", false},
		// Enumerations.
		{"enum", `{"type":"init","thinking_level":"max"}`, inv + `/thinking_level Expected one of "off", "minimal", "low", "medium", "high", "ultra"`, "/thinking_level", false},
		{"enum in array", `{"type":"hello","capabilities":{"utility_operations":["file_read","shell"]}}`, inv + `/capabilities/utility_operations/1 Expected one of "command_exec", "file_search", "file_watch", "file_read"`, "/capabilities/utility_operations/1", false},
		{"unique", `{"type":"hello","capabilities":{"server_requests":["approval","approval"]}}`, inv + "/capabilities/server_requests Expected array items to be unique", "/capabilities/server_requests", false},
		{"block type", `{"type":"client_tool_result","call_id":"c","content":[{"type":"audio"}],"is_error":false}`, inv + `/content/0/type Expected one of "text", "image"`, "/content/0/type", false},
		// Syntax.
		{"empty line", ``, p + "Unexpected end of JSON input", "", true},
		{"truncated", `{"type":"prompt","content":"x"`, p + "Unexpected end of JSON input", "", true},
		{"garbage", `hello`, p + "Unexpected token 'h' in JSON at position 0", "", true},
		{"trailing data", `{"type":"interrupt"} {}`, p + "Unexpected non-whitespace character after JSON at position 21", "", true},
		{"syntax wins over schema", `{"type":"bogus","x":}`, p + "Unexpected token '}' in JSON at position 20", "", true},
		{"syntax after schema error", `{"type":"prompt","content":1,"x":[}`, p + "Unexpected token '}' in JSON at position 34", "", true},
		{"control character", "{\"type\":\"prompt\",\"content\":\"a\x01\"}", p + "Bad control character in string literal in JSON at position 29", "", true},
		{"bad escape", `{"type":"prompt","content":"\q"}`, p + "Bad escaped character in JSON at position 29", "", true},
		{"bad unicode escape", `{"type":"prompt","content":"\u12"}`, p + "Bad Unicode escape in JSON at position 28", "", true},
		{"leading zero", `{"type":"utility_file_search","search_id":"s","query":"q","limit":01}`, p + "Unexpected token '1' in JSON at position 67", "", true},
		{"unterminated string", `{"type":"prompt","content":"abc`, p + "Unterminated string in JSON at position 31", "", true},
		{"number overflow in any value", `{"type":"init","history":[1,{"a":-1e309}]}`, inv + "/history Number out of range", "/history", false},
		{"huge integer in any value", `{"type":"init","history":` + "1" + strings.Repeat("0", 400) + `}`, inv + "/history Number out of range", "/history", false},
		{"deep nesting", `{"type":"init","history":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, p + "JSON nested too deeply at position 10024", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := DecodeClient([]byte(tt.line))
			if err == nil {
				t.Fatalf("decoded %#v", m)
			}
			if m != nil {
				t.Errorf("message %#v returned with error", m)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError", err)
			}
			if de.Message != tt.want || err.Error() != tt.want {
				t.Errorf("error\n got %q\nwant %q", de.Message, tt.want)
			}
			if de.Path != tt.path || de.Syntax != tt.syntax {
				t.Errorf("path %q syntax %v, want %q %v", de.Path, de.Syntax, tt.path, tt.syntax)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		decode func([]byte) (Message, error)
		line   string
		want   Message
	}{
		{"type not first, whitespace", DecodeClient, " {\r\n \"content\" : \"x\" ,\t\"type\":\"prompt\" }\n", Prompt{Content: "x"}},
		{"escaped type", DecodeClient, `{"type":"pr\u006fmpt","content":"\u00e9\ud83d\ude00\/"}`, Prompt{Content: "é😀/"}},
		{"lone surrogate and invalid UTF-8 become U+FFFD", DecodeClient, "{\"type\":\"prompt\",\"content\":\"\\ud800x\xff\"}", Prompt{Content: "\uFFFDx\uFFFD"}},
		{"integral numbers in any notation", DecodeClient, `{"type":"utility_command_resize","command_id":"c","columns":8e1,"rows":24.0}`, UtilityCommandResize{CommandID: "c", Columns: 80, Rows: 24}},
		{"explicit false and zero", DecodeClient, `{"type":"utility_file_watch_start","watch_id":"w","debounce_ms":0}`, UtilityFileWatchStart{WatchID: "w", DebounceMS: ptr(0)}},
		{"empty init prompt is kept", DecodeClient, `{"type":"init","system_prompt":""}`, Init{SystemPrompt: ptr("")}},
		{"raw values are compacted", DecodeClient, `{"type":"init","history":[ 1 , {"a" : "b c"} ]}`, Init{History: json.RawMessage(`[1,{"a":"b c"}]`)}},
		{"required nullable null", DecodeServer, `{"type":"session_info","session_id":null,"cwd":"/","git_branch":"main"}`, SessionInfo{Cwd: "/", GitBranch: ptr("main")}},
		{"optional nullable null", DecodeServer, `{"type":"utility_command_exited","command_id":"c","success":false,"exit_code":null,"signal":"SIGKILL"}`, UtilityCommandExited{CommandID: "c", ExitCode: Null[int](), Signal: Some("SIGKILL")}},
		{"raw null", DecodeServer, `{"type":"raw_agent_event","event_type":"e","event":null}`, RawAgentEvent{EventType: "e", Event: json.RawMessage("null")}},
		{"envelope with message", DecodeEnvelope, `{"type":"message","cursor":9,"message":{"message":"m","type":"status"}}`, MessageEnvelope{Cursor: 9, Message: Status{Message: "m"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.decode([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeOtherFamilies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		decode func([]byte) (Message, error)
		line   string
		want   string
	}{
		{"server unknown type", DecodeServer, `{"type":"prompt","content":"x"}`, "Failed to parse message: Unknown headless message type"},
		{"server missing type", DecodeServer, `{}`, "Failed to parse message: $.type Expected known headless message type"},
		{"server unknown property", DecodeServer, `{"type":"tool_start","call_id":"c","x":1}`, "Failed to parse message: Invalid headless message: /x Unexpected property"},
		{"server required nullable missing", DecodeServer, `{"type":"ready","protocol_version":"v","model":"m","provider":"p"}`, "Failed to parse message: Invalid headless message: /session_id Expected required property"},
		{"server optional nullable wrong type", DecodeServer, `{"type":"utility_command_exited","command_id":"c","success":true,"exit_code":"0"}`, "Failed to parse message: Invalid headless message: /exit_code Expected integer or null"},
		{"envelope unknown", DecodeEnvelope, `{"type":"status","message":"x"}`, "Failed to parse event: Unknown headless event type"},
		{"envelope message of client type", DecodeEnvelope, `{"type":"message","cursor":1,"message":{"type":"prompt","content":"x"}}`, "Failed to parse event: Invalid headless event: /message/type Unknown headless message type"},
		{"envelope message without type", DecodeEnvelope, `{"type":"message","cursor":1,"message":{"message":"x"}}`, "Failed to parse event: Invalid headless event: /message/type Expected known headless message type"},
		{"envelope message null", DecodeEnvelope, `{"type":"message","cursor":1,"message":null}`, "Failed to parse event: Invalid headless event: /message Expected object"},
		{"envelope inner error path", DecodeEnvelope, `{"type":"message","cursor":1,"message":{"type":"status"}}`, "Failed to parse event: Invalid headless event: /message/message Expected required property"},
		{"last_init must be init", DecodeEnvelope, `{"type":"snapshot","snapshot":{"protocolVersion":"v","session_id":"s","cursor":1,"last_init":{"type":"prompt"},"state":{}}}`, `Failed to parse event: Invalid headless event: /snapshot/last_init/type Expected "init"`},
		{"last_init needs type", DecodeEnvelope, `{"type":"snapshot","snapshot":{"protocolVersion":"v","session_id":"s","cursor":1,"last_init":{},"state":{}}}`, `Failed to parse event: Invalid headless event: /snapshot/last_init/type Expected required property`},
		{"state lists required", DecodeEnvelope, `{"type":"snapshot","snapshot":{"protocolVersion":"v","session_id":"s","cursor":1,"last_init":null,"state":{}}}`, `Failed to parse event: Invalid headless event: /snapshot/state/connection_count Expected required property`},
		{"reset reason", DecodeEnvelope, `{"type":"reset","reason":"broadcast_lag:3","snapshot":{}}`, `Failed to parse event: Invalid headless event: /reason Expected one of "lagged", "replay_gap", "restored_from_snapshot"`},
		{"pending status constant", DecodeEnvelope, `{"type":"snapshot","snapshot":{"protocolVersion":"v","session_id":"s","cursor":1,"last_init":null,"state":{"connection_count":0,"subscriber_count":0,"connections":[],"pending_requests":[{"id":"i","kind":"approval","status":"done"}]}}}`, `Failed to parse event: Invalid headless event: /snapshot/state/pending_requests/0/status Expected "pending"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.decode([]byte(tt.line))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestDecodeSnapshotErrors(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		`[]`:                      "Failed to parse snapshot: Invalid headless snapshot: Expected object",
		`{"protocolVersion":"v"}`: "Failed to parse snapshot: Invalid headless snapshot: /session_id Expected required property",
		`{"protocolVersion":1`:    "Failed to parse snapshot: Unexpected end of JSON input",
	} {
		if _, err := DecodeSnapshot([]byte(line)); err == nil || err.Error() != want {
			t.Errorf("DecodeSnapshot(%s) = %v, want %s", line, err, want)
		}
	}
}

func TestProtocolError(t *testing.T) {
	t.Parallel()
	_, err := DecodeClient([]byte(`{"type":"bogus"}`))
	got, merr := Marshal(ProtocolError(err))
	want := `{"type":"error","message":"Failed to parse command: Unknown headless command type","fatal":false,"error_type":"protocol"}`
	if merr != nil || string(got) != want {
		t.Errorf("got %s (%v), want %s", got, merr, want)
	}
	wrapped := ProtocolError(errors.Join(errors.New("reading stdin"), err))
	if wrapped.Message != "Failed to parse command: Unknown headless command type" {
		t.Errorf("wrapped DecodeError message %q", wrapped.Message)
	}
	if e := ProtocolError(errors.New("body too large")); e.Message != "Failed to parse command: body too large" || e.Fatal || e.ErrorType != ErrorProtocol {
		t.Errorf("plain error: %+v", e)
	}
}

func TestMessageEnvelopeUnmarshalJSON(t *testing.T) {
	t.Parallel()
	var body struct {
		Events []MessageEnvelope `json:"events"`
	}
	in := `{"events":[{"type":"message","cursor":2,"message":{"type":"tool_start","call_id":"c"}}]}`
	if err := json.Unmarshal([]byte(in), &body); err != nil {
		t.Fatal(err)
	}
	want := []MessageEnvelope{{Cursor: 2, Message: ToolStart{CallID: "c"}}}
	if diff := cmp.Diff(want, body.Events); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	out, err := json.Marshal(body)
	if err != nil || string(out) != in {
		t.Errorf("json.Marshal = %s, %v", out, err)
	}
	var e MessageEnvelope
	if err := json.Unmarshal([]byte(`{"type":"heartbeat","cursor":1}`), &e); err == nil {
		t.Error("heartbeat accepted as a message envelope")
	}
}
