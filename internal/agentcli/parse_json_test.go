package agentcli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fastDecoders pairs each line struct's fast reader with the type
// encoding/json fills, so the two can be compared on the same input.
var fastDecoders = []struct {
	name string
	fast func(r *jsonReader) any // reads r's input, returns the filled struct
	slow func() any              // a new zero struct for encoding/json
}{
	{"claude", func(r *jsonReader) any { var l claudeLine; l.read(r); return &l }, func() any { return new(claudeLine) }},
	{"codex", func(r *jsonReader) any { var l codexLine; l.read(r); return &l }, func() any { return new(codexLine) }},
	{"gemini", func(r *jsonReader) any { var l geminiLine; l.read(r); return &l }, func() any { return new(geminiLine) }},
	{"opencode", func(r *jsonReader) any { var l opencodeLine; l.read(r); return &l }, func() any { return new(opencodeLine) }},
	{"opencode-state", func(r *jsonReader) any { var s opencodeState; s.read(r); return &s }, func() any { return new(opencodeState) }},
}

// checkFastDecode fails when the fast reader vouches for line but fills
// a struct other than encoding/json does (or when encoding/json rejects
// a line the fast reader accepted). It reports whether every decoder
// vouched.
func checkFastDecode(t *testing.T, line []byte) (allFast bool) {
	t.Helper()
	allFast = true
	var r jsonReader
	for _, d := range fastDecoders {
		r.reset(line)
		got := d.fast(&r)
		if !r.end() {
			allFast = false
			continue
		}
		want := d.slow()
		if err := json.Unmarshal(line, want); err != nil {
			t.Errorf("%s: fast reader accepted %q, encoding/json: %v", d.name, line, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q\nfast: %+v\njson: %+v", d.name, line, got, want)
		}
	}
	// The nested decoders.
	var p claudeParser
	if got, ok := p.fastBlocks(line); ok {
		var want []claudeBlock
		if json.Unmarshal(line, &want) != nil {
			var s string
			want = nil
			if json.Unmarshal(line, &s) == nil && s != "" {
				want = []claudeBlock{{Type: "text", Text: s}}
			}
		}
		if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0 && (got == nil) == (want == nil)) {
			t.Errorf("blocks: %q\nfast: %+v\njson: %+v", line, got, want)
		}
	}
	if len(line) > 0 {
		if got, ok := fastText(&r, line); ok {
			var s string
			want := string(line)
			if json.Unmarshal(line, &s) == nil {
				want = s
			} else {
				var bl []struct {
					Text string `json:"text"`
					Type string `json:"type"`
				}
				if json.Unmarshal(line, &bl) == nil {
					want = ""
					for _, b := range bl {
						want += b.Text
					}
				}
			}
			if got != want {
				t.Errorf("textOf: %q: fast %q, json %q", line, got, want)
			}
		}
		if got, ok := countArray(&r, line); ok {
			var want []json.RawMessage
			if err := json.Unmarshal(line, &want); err != nil || got != len(want) {
				t.Errorf("countArray: %q: fast %d, json %d (%v)", line, got, len(want), err)
			}
		}
	}
	return allFast
}

// TestFastDecodeMatchesEncodingJSON checks the fast reader against
// encoding/json on lines where their rules differ in subtle ways: the
// fast reader must either give up (the parser then uses encoding/json)
// or fill exactly what encoding/json fills.
func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dec  string // a fastDecoders name, or "blocks"
		line string
		fast bool // the fast reader vouches for it
	}{
		{"claude", `{"type":"result","session_id":"s","usage":{"input_tokens":3,"output_tokens":4},"total_cost_usd":0.25}`, true},
		{"claude", `{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"a\nb \"q\" \u00e9 \ud83d\ude00 é"}],"usage":null}}`, true},
		{"claude", ` { "type" : "x" , "extra" : [ 1 , { "a" : null } , -0.5e+3 , true , false ] } `, true},
		{"codex", `{"type":"item.completed","item":{"id":"i","exit_code":null,"status":"completed"}}`, true},
		{"codex", `{"type":"item.completed","item":{"id":"i","exit_code":-2}}`, true},
		{"claude", `{"type":"system","subtype":"api_retry","error":{"type":"overloaded"},"attempt":1}`, true},
		{"claude", `{"type":"system","error":"text"}`, true},
		{"opencode", `{"type":"error","error":null,"part":null}`, true},
		{"opencode", `{"type":"tool_use","part":{"state":{"status":"completed","input":{"k":"v"},"output":"o"}}}`, true},
		{"claude", `{"type":"x","permission_denials":[{},[],"s",1],"errors":["a"]}`, true},
		{"gemini", `{"type":"x","unknown":{"\ud800":"\ud800","é":[2]}}`, true}, // skipped values are only validated
		{"gemini", `{}`, true},
		{"blocks", `[]`, true},
		{"blocks", `"plain"`, true},
		{"blocks", `[null,{"type":"tool_use","input":{"a":1}}]`, true},
		// Left to encoding/json:
		{"claude", `{"type":1}`, false},                 // wrong type
		{"claude", `{"type":"x","attempt":1.5}`, false}, // a fraction into an int
		{"claude", `{"type":"x","attempt":1e2}`, false}, // an exponent into an int
		{"claude", `{"type":"x","num_turns":99999999999999999999}`, false},
		{"claude", `{"type":"x","total_cost_usd":1e999}`, false}, // float overflow
		{"codex", `{"Type":"x"}`, false},                         // case-insensitive key match
		{"claude", `{"type":"x","SESSION_ID":"s"}`, false},       // case-insensitive key match
		{"claude", `{"type":"x","ſession_id":"s"}`, false},       // non-ASCII key (long s folds to s)
		{"codex", `{"typ\u0065":"x"}`, false},                    // escaped key
		{"gemini", `{"type":"x","type":"y"}`, false},             // duplicate key
		{"claude", `{"type":"x","message":{"id":"a"},"message":{"model":"b"}}`, false},
		{"claude", `{"type":"x","message":"str"}`, false},   // a string into a struct
		{"claude", `{"type":"x","usage":[1]}`, false},       // an array into a struct pointer
		{"codex", `{"type":"a\ud800"}`, false},              // lone surrogate decoded
		{"codex", "{\"type\":\"a\xff\"}", false},            // invalid UTF-8 decoded
		{"opencode", `{"type":"x"} x`, false},               // trailing data
		{"opencode", `{"type":"x"`, false},                  // partial line
		{"opencode", `{"type":"x",}`, false},                // invalid JSON
		{"gemini", `{"type":"x","a":01}`, false},            // invalid number
		{"gemini", `{"type":"x","a":"\x"}`, false},          // invalid escape
		{"claude", `{"type":"x","is_error":"true"}`, false}, // a string into a bool
		{"blocks", `[1]`, false},
		{"blocks", `[{"type":2}]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.dec+"/"+tt.line, func(t *testing.T) {
			vouched := false
			if tt.dec == "blocks" {
				_, vouched = (&claudeParser{}).fastBlocks([]byte(tt.line))
			}
			for _, d := range fastDecoders {
				if d.name == tt.dec {
					var r jsonReader
					r.reset([]byte(tt.line))
					d.fast(&r)
					vouched = r.end()
				}
			}
			if vouched != tt.fast {
				t.Errorf("fast reader vouched = %v, want %v", vouched, tt.fast)
			}
			checkFastDecode(t, []byte(tt.line))
		})
	}
}

// fixtureLines returns every line of the captured streams.
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

// TestFastDecodeFixtures checks every captured line on both paths and
// that the fast reader vouches for each line of the built-in CLIs' streams
// (falling back to encoding/json there would cost the throughput the
// benchmark measures).
func TestFastDecodeFixtures(t *testing.T) {
	t.Parallel()
	reg, err := builtinRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for f, lines := range fixtureLines(t) {
		dir := filepath.Base(filepath.Dir(f))
		var fast func(r *jsonReader) any
		for _, d := range reg.All() {
			if len(dir) > len(d.ID) && dir[:len(d.ID)+1] == d.ID+"-" {
				switch d.Parser {
				case "claude-stream-json", "qwen-stream-json":
					fast = fastDecoders[0].fast
				case "codex-json":
					fast = fastDecoders[1].fast
				case "gemini-stream-json":
					fast = fastDecoders[2].fast
				case "opencode-json":
					fast = fastDecoders[3].fast
				}
			}
		}
		for i, l := range lines {
			checkFastDecode(t, l)
			if fast == nil {
				continue
			}
			var r jsonReader
			r.reset(l)
			if fast(&r); !r.end() {
				t.Errorf("%s:%d: the fast reader gave up on a captured line: %s", f, i+1, l)
			}
		}
	}
}

// FuzzFastDecode compares the fast reader with encoding/json on arbitrary
// input, seeded with the captured lines.
func FuzzFastDecode(f *testing.F) {
	for _, lines := range fixtureLines(f) {
		for _, l := range lines {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"x","a":[{"b":"\u00e9\ud83d\ude00"}],"attempt":-1,"total_cost_usd":1.5e-3}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		checkFastDecode(t, line)
	})
}
