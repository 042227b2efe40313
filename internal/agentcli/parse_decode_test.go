package agentcli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
)

// TestLineDecoding pins how a line is decoded and counted where JSON's
// rules are subtle (encoding/json's rules: case-insensitive keys, the last
// of duplicated keys wins, invalid UTF-8 and lone surrogates become
// U+FFFD). A line that is not a JSON object whose "type" is a string is
// non-JSON; one whose known fields have the wrong type is unknown.
func TestLineDecoding(t *testing.T) {
	t.Parallel()
	deep := `{"type":"thread.started","thread_id":"t","x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`
	tests := []struct {
		name, parser, line string
		want               string // "ok", "unknown" or "non-json"
		session            string // the session id the line reveals
		messages           int    // protocol events it yields
	}{
		{"plain", "codex-json", `{"type":"thread.started","thread_id":"t"}`, "ok", "t", 0},
		{"spaces", "codex-json", " { \"type\" : \"thread.started\" , \"thread_id\" : \"t\" } ", "ok", "t", 0},
		{"unknown type", "codex-json", `{"type":"brand_new"}`, "unknown", "", 0},
		{"type not a string", "claude-stream-json", `{"type":1}`, "non-json", "", 0},
		{"type null", "claude-stream-json", `{"type":null}`, "unknown", "", 0},
		{"no type", "gemini-stream-json", `{}`, "unknown", "", 0},
		{"case-folded type key", "codex-json", `{"Type":"thread.started","THREAD_ID":"t"}`, "ok", "t", 0},
		{"escaped key", "codex-json", `{"typ\u0065":"thread.started","thread_id":"t"}`, "ok", "t", 0},
		{"duplicate key: last wins", "gemini-stream-json", `{"type":"init","session_id":"a","session_id":"b"}`, "ok", "b", 0},
		{"duplicate type, first not a string", "codex-json", `{"type":1,"type":"thread.started","thread_id":"t"}`, "non-json", "", 0},
		{"lone surrogate", "codex-json", `{"type":"thread.started","thread_id":"a\ud800"}`, "ok", "a\uFFFD", 0},
		{"invalid UTF-8", "codex-json", "{\"type\":\"thread.started\",\"thread_id\":\"a\xff\"}", "ok", "a\uFFFD", 0},
		{"surrogate pair", "codex-json", `{"type":"thread.started","thread_id":"\ud83d\ude00"}`, "ok", "\U0001F600", 0},
		{"deep unknown field", "codex-json", deep, "ok", "t", 0},
		{"trailing data", "codex-json", `{"type":"thread.started","thread_id":"t"} x`, "non-json", "", 0},
		{"partial line", "opencode-json", `{"type":"step_start","sessionID":"s"`, "non-json", "", 0},
		{"trailing comma", "opencode-json", `{"type":"step_start",}`, "non-json", "", 0},
		{"invalid number", "gemini-stream-json", `{"type":"init","a":01}`, "non-json", "", 0},
		{"fraction into an int", "claude-stream-json", `{"type":"system","subtype":"api_retry","attempt":1.5}`, "unknown", "", 0},
		{"int overflow", "claude-stream-json", `{"type":"result","num_turns":99999999999999999999}`, "unknown", "", 0},
		{"float overflow", "claude-stream-json", `{"type":"result","total_cost_usd":1e999}`, "unknown", "", 0},
		{"string into a bool", "claude-stream-json", `{"type":"result","is_error":"true"}`, "unknown", "", 0},
		{"string into a struct", "claude-stream-json", `{"type":"assistant","message":"str"}`, "unknown", "", 0},
		{"array into a struct pointer", "codex-json", `{"type":"turn.completed","usage":[1]}`, "unknown", "", 0},
		{"null struct pointer", "opencode-json", `{"type":"error","error":null,"part":null,"sessionID":"s"}`, "ok", "s", 1},
		{"blocks of the wrong shape", "claude-stream-json", `{"type":"assistant","message":{"id":"m","content":[1]}}`, "ok", "", 0},
		{"content as a string", "claude-stream-json", `{"type":"assistant","message":{"id":"m","content":"hi"}}`, "ok", "", 2},
		{"api_retry with an object error", "claude-stream-json", `{"type":"system","subtype":"api_retry","error":{"type":"overloaded"},"attempt":1,"max_retries":3}`, "ok", "", 1},
		{"opencode state of the wrong shape", "opencode-json", `{"type":"tool_use","part":{"callID":"c","tool":"t","state":{"status":1,"output":"o"}}}`, "ok", "", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := NewParser(tt.parser, ParserOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ev := p.Feed([]byte(tt.line))
			st := p.Stats()
			got := "ok"
			switch {
			case st.Unknown == 1 && st.NonJSON == 0:
				got = "unknown"
			case st.NonJSON == 1 && st.Unknown == 0:
				got = "non-json"
			case st.NonJSON+st.Unknown != 0:
				t.Fatalf("stats %+v: counted twice", st)
			}
			if got != tt.want {
				t.Errorf("line counted %s, want %s", got, tt.want)
			}
			if ev.SessionID != tt.session {
				t.Errorf("session id %q, want %q", ev.SessionID, tt.session)
			}
			if len(ev.Messages) != tt.messages {
				t.Errorf("%d events, want %d: %+v", len(ev.Messages), tt.messages, ev.Messages)
			}
		})
	}
}

// FuzzParseLine feeds arbitrary lines (seeded with the captured ones) to
// every parser: none may panic, each line is counted once, a line that is
// a JSON object with a string (or no) "type" is never counted as non-JSON,
// and every event encodes as a protocol frame that validates.
func FuzzParseLine(f *testing.F) {
	for _, lines := range fixtureLines(f) {
		for _, l := range lines {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"x","a":[{"b":"\u00e9\ud83d\ude00"}],"attempt":-1,"total_cost_usd":1.5e-3}`))
	f.Add([]byte(`{"type":"result","is_error":true,"errors":["a","b"],"usage":{"input_tokens":1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		v := prototest.Validator(t)
		// A JSON object with one key that matches "type" (encoding/json
		// folds case), a string, or with none is an object for us.
		var obj map[string]any
		isObject := json.Unmarshal(line, &obj) == nil && obj != nil
		typ, hasType := obj["type"]
		_, typeIsString := typ.(string)
		object := isObject && ((typeKeys(line) == 1 && hasType && typeIsString) || typeKeys(line) == 0)
		for _, name := range ParserNames() {
			p, err := NewParser(name, ParserOptions{})
			if err != nil {
				t.Fatal(err)
			}
			evs := []Event{p.Feed(line), p.Finish()}
			st := p.Stats()
			if st.Lines != 1 || st.Unknown+st.NonJSON > 1 {
				t.Errorf("%s: stats %+v for one line", name, st)
			}
			if object && st.NonJSON != 0 {
				t.Errorf("%s: a JSON object counted as non-JSON: %q", name, line)
			}
			for _, ev := range evs {
				for _, m := range ev.Messages {
					frame, err := protocol.Marshal(m)
					if err != nil {
						t.Fatalf("%s: marshal %s: %v", name, m.MessageType(), err)
					}
					if err := v.ValidateServerFrame(frame); err != nil {
						t.Errorf("%s: %q: frame does not validate: %v", name, line, err)
					}
				}
			}
		}
	})
}

// typeKeys counts the top-level keys of the object in line that
// encoding/json matches to a "type" field (-1 if line is not an object).
func typeKeys(line []byte) int {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return -1
	}
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return -1
		}
		if k, _ := tok.(string); strings.EqualFold(k, "type") {
			n++
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return -1
		}
	}
	return n
}

// fixtureLines returns every JSON line of the captured streams.
func fixtureLines(t testing.TB) map[string][][]byte {
	t.Helper()
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	out := map[string][][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 && l[0] == '{' {
				out[f] = append(out[f], l)
			}
		}
	}
	return out
}
