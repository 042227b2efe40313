package eventbus

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

// skimRecord reads the records internal/session writes without
// decoding them, and agrees with decoding them: the cursor, and whether
// the record may map to a platform event.
func TestSkimRecordAgreesWithDecoding(t *testing.T) {
	s, err := session.NewStore(t.TempDir()).Create(session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", Model: "m", Provider: "p", ExecutorType: protocol.ExecutorReplay})
	s.Event(protocol.ResponseStart{ResponseID: "r1"})
	s.Event(protocol.ResponseChunk{ResponseID: "r1", Content: `"type":"tool_call" \"kind\":\"event\"`})
	s.Event(protocol.ToolCall{CallID: "c1", Tool: "Read", Args: json.RawMessage(`{"path":"a"}`)})
	s.Event(protocol.ToolOutput{CallID: "c1", Content: "x"})
	s.Event(protocol.ToolEnd{CallID: "c1", Success: true})
	s.Event(protocol.ServerRequest{RequestID: "q", RequestType: protocol.RequestApproval, CallID: "c2", Tool: "Bash", Args: json.RawMessage(`{}`)})
	s.Message(llm.UserText(`{"cursor":1,"kind":"event"}`))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mappedTypes := map[string]bool{protocol.TypeReady: true, protocol.TypeToolCall: true, protocol.TypeToolEnd: true, protocol.TypeServerRequest: true}
	file, err := os.Open(filepath.Join(s.Dir(), logFile))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	lines := 0
	for sc.Scan() {
		lines++
		line := sc.Bytes()
		var rec logRecord
		if err := decodeRecord(line, &rec); err != nil {
			t.Fatal(err)
		}
		cursor, mapped, ok := skimRecord(line)
		if !ok {
			t.Fatalf("record %d was not skimmed: %s", rec.Cursor, line)
		}
		want := rec.Kind == session.KindEvent && mappedTypes[rec.Event.Type]
		if cursor != rec.Cursor || mapped != want {
			t.Errorf("skim %s = cursor %d mapped %v, want %d %v", line, cursor, mapped, rec.Cursor, want)
		}
	}
	if lines != 8 {
		t.Fatalf("%d records, want 8", lines)
	}
	// Lines in another shape are left to the decoder.
	for _, line := range []string{
		`{"time":"2026-01-01T00:00:00Z","cursor":1,"kind":"event","event":{"type":"ready"}}`,
		`{"cursor":x,"time":"t","kind":"event","event":{"type":"ready"}}`,
		`{"cursor":1,"time":"t","kind":"event","event":{"call_id":"c","type":"tool_call"}}`,
		`{"cursor":1,"time":"t","kind":"ev\u0065nt","event":{"type":"ready"}}`,
		`{"cursor":1,"time":"t","kind":"event","event":{"type":"tool\u005fcall"}}`,
	} {
		if _, _, ok := skimRecord([]byte(line)); ok {
			t.Errorf("skimmed %s", line)
		}
	}
}

// decodeMapped decodes the mapped records as decodeRecord does, or
// leaves them to it: never a different record.
func TestDecodeMappedAgreesWithDecoding(t *testing.T) {
	s, err := session.NewStore(t.TempDir()).Create(session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	s.Event(protocol.Ready{ProtocolVersion: "2026-04-02", Model: "m", Provider: "p", ExecutorType: protocol.ExecutorReplay})
	s.Event(protocol.ToolCall{CallID: "c1", Tool: "Read", RequiresApproval: true, Args: json.RawMessage(`{"path":"a\"}{,","n":[1,{"x":"]"}],"t":true,"z":null,"e":-1.5e3}`)})
	s.Event(protocol.ToolEnd{CallID: "c1", ErrorCode: "sandbox_violation"})
	s.Event(protocol.ServerRequest{RequestID: "q", RequestType: protocol.RequestApproval, CallID: "c2", Tool: "Bash", Args: json.RawMessage(`{}`)})
	s.Event(protocol.ToolCall{CallID: "c\"3", Tool: "é"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir(), logFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	const head = `{"cursor":9,"time":"2026-11-27T11:36:16.290688527Z","kind":"event","event":`
	lines = append(lines,
		head+`{"type":"tool_end","call_id":"c","success":true,"extra":{"a":[]},"error_code":""}}`+"\n",
		head+`{"type":"tool_end","Call_ID":"c"}}`+"\n",              // a key matched case-insensitively
		head+`{"type":"tool_end","success":"yes"}}`+"\n",            // a type error
		head+`{"type":"tool_end","call_id":null}}`+"\n",             // null
		head+`{"type":"tool_call","tool":"\u0050ing"}}`+"\n",        // an escape
		head+`{"type":"tool_call","tool":"a"},"message":null}`+"\n", // a member after the event
		head+`{"type":"tool_call","tool":"a"}`+"\n",                 // not JSON
		head+`{"type":"tool_call","tool":"a","tool":"b"}}`+"\n",     // a duplicate: the last
		head+`{}}`+"\n", // empty
		`{"cursor":9,"time":"yesterday","kind":"event","event":{"type":"ready"}}`+"\n", // a time that does not parse
		head+`{"type":"tool_call","tool":"`+"\xff"+`"}}`+"\n",                          // invalid UTF-8
	)
	fast := 0
	for _, line := range lines {
		var want logRecord
		wantErr := decodeRecord([]byte(line), &want)
		var got logRecord
		if !decodeMapped([]byte(line), &got) {
			continue
		}
		fast++
		if wantErr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeMapped %s = %+v, decodeRecord %+v (%v)", line, got, want, wantErr)
		}
	}
	if fast != 7 {
		t.Errorf("%d records decoded without reflection, want 7", fast)
	}
}
