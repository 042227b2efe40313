package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

type testValidator struct{ *Validator }

func newTestValidator(tb testing.TB) testValidator {
	tb.Helper()
	v, err := NewValidator()
	if err != nil {
		tb.Fatal(err)
	}
	return testValidator{v}
}

// validate picks the schema family from the message type.
func (v testValidator) validate(line []byte) error {
	var probe struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &probe); err != nil {
		return err
	}
	c := theCatalogue()
	switch {
	case c.client.byType[probe.Type] != nil:
		return v.ValidateClientFrame(line)
	case c.envelope.byType[probe.Type] != nil:
		return v.ValidateEnvelope(line)
	}
	return v.ValidateServerFrame(line)
}

func TestValidatorAcceptsGoldens(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	for _, g := range goldens() {
		for _, line := range readLines(t, g.file) {
			if err := v.validate(line); err != nil {
				t.Errorf("%s: %v", line, err)
			}
		}
	}
}

func TestValidatorRejects(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	tests := []struct {
		name  string
		check func([]byte) error
		line  string
	}{
		{"extra field", v.ValidateServerFrame, `{"type":"status","message":"x","extra":1}`},
		{"nested extra field", v.ValidateClientFrame, `{"type":"hello","client_info":{"name":"x","nick":"y"}}`},
		{"wrong enum", v.ValidateServerFrame, `{"type":"error","message":"x","fatal":false,"error_type":"bogus"}`},
		{"missing required", v.ValidateServerFrame, `{"type":"response_chunk","response_id":"r","content":"x"}`},
		{"null for optional", v.ValidateClientFrame, `{"type":"hello","role":null}`},
		{"wrong type", v.ValidateClientFrame, `{"type":"prompt","content":1}`},
		{"unknown type", v.ValidateClientFrame, `{"type":"bogus"}`},
		{"missing type", v.ValidateClientFrame, `{"content":"x"}`},
		{"not an object", v.ValidateClientFrame, `[]`},
		{"not JSON", v.ValidateClientFrame, `{`},
		{"two lines", v.ValidateServerFrame, "{\"type\":\"status\",\n\"message\":\"x\"}"},
		{"client message as server frame", v.ValidateServerFrame, `{"type":"prompt","content":"x"}`},
		{"bad message in envelope", v.ValidateEnvelope, `{"type":"message","cursor":1,"message":{"type":"status"}}`},
		{"content block variant mix", v.ValidateClientFrame, `{"type":"client_tool_result","call_id":"c","content":[{"type":"text","text":"x","mimeType":"a"}],"is_error":false}`},
		{"duplicate capability", v.ValidateClientFrame, `{"type":"hello","capabilities":{"server_requests":["approval","approval"]}}`},
		{"resize to zero", v.ValidateClientFrame, `{"type":"utility_command_resize","command_id":"c","columns":0,"rows":1}`},
		{"pending status constant", v.ValidateEnvelope, `{"type":"heartbeat","cursor":1.5}`},
	}
	for _, tt := range tests {
		if err := tt.check([]byte(tt.line)); err == nil {
			t.Errorf("%s: %s accepted", tt.name, tt.line)
		}
	}
	if err := v.ValidateSnapshot([]byte(`{"protocolVersion":"x"}`)); err == nil {
		t.Error("incomplete snapshot accepted")
	}
}

// TestDecoderAgreesWithSchemas mutates every golden line in many ways and
// checks that the strict decoder and the schema validator accept and reject
// exactly the same frames, so neither can drift from the other.
func TestDecoderAgreesWithSchemas(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	for _, g := range goldens() {
		t.Run(g.file, func(t *testing.T) {
			t.Parallel()
			rejected, total := 0, 0
			for _, line := range readLines(t, g.file) {
				var doc any
				if err := json.Unmarshal(line, &doc); err != nil {
					t.Fatal(err)
				}
				for _, mu := range mutations(doc) {
					total++
					frame, err := json.Marshal(mu.doc)
					if err != nil {
						t.Fatal(err)
					}
					_, decErr := g.decode(frame)
					valErr := v.validate(frame)
					if (decErr == nil) != (valErr == nil) {
						t.Errorf("%s of %s:\n  frame %s\n  decoder: %v\n  schema: %v", mu.what, line, frame, decErr, valErr)
					}
					if decErr != nil {
						rejected++
					}
				}
			}
			t.Logf("%d of %d mutations rejected", rejected, total)
			// The mutations must actually exercise both outcomes.
			if rejected == 0 || rejected == total {
				t.Errorf("%d of %d mutations rejected", rejected, total)
			}
		})
	}
}

type mutation struct {
	what string
	doc  any
}

// mutations returns variants of doc, each with one change somewhere.
func mutations(doc any) []mutation {
	var out []mutation
	var walk func(path string, node any, replace func(any) any)
	walk = func(path string, node any, replace func(any) any) {
		add := func(what string, v any) { out = append(out, mutation{path + ": " + what, replace(v)}) }
		switch n := node.(type) {
		case map[string]any:
			add("extra property", withKey(n, "zz_extra", 1.0))
			keys := make([]string, 0, len(n))
			for k := range n {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = append(out, mutation{path + "/" + k + ": deleted", replace(withoutKey(n, k))})
				walk(path+"/"+k, n[k], func(v any) any { return replace(withKey(n, k, v)) })
			}
		case []any:
			if len(n) > 0 {
				add("first item duplicated", append(slices.Clone(n), n[0]))
				add("emptied", []any{})
			}
			for i := range n {
				walk(fmt.Sprintf("%s/%d", path, i), n[i], func(v any) any {
					c := slices.Clone(n)
					c[i] = v
					return replace(c)
				})
			}
		case string:
			add("bogus string", "zz_bogus")
			add("number", 12345.0)
			add("null", nil)
		case bool:
			add("string", "true")
			add("negated", !n)
		case float64:
			add("string", "1")
			add("fraction", n+0.5)
			add("negative", -1.0)
			add("zero", 0.0)
			add("null", nil)
		case nil:
			add("string", "x")
			add("object", map[string]any{})
		}
		if _, isObj := node.(map[string]any); !isObj {
			add("object", map[string]any{"zz": true})
		}
	}
	walk("", doc, func(v any) any { return v })
	return out
}

func withKey(m map[string]any, k string, v any) map[string]any {
	c := make(map[string]any, len(m)+1)
	for key, val := range m {
		c[key] = val
	}
	c[k] = v
	return c
}

func withoutKey(m map[string]any, k string) map[string]any {
	c := withKey(m, k, nil)
	delete(c, k)
	return c
}

func TestValidatorConcurrent(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	lines := readLines(t, "server.jsonl")
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var first error
			for _, l := range lines {
				if err := v.ValidateServerFrame(l); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestValidatorErrorNamesType(t *testing.T) {
	t.Parallel()
	v := newTestValidator(t)
	err := v.ValidateServerFrame([]byte(`{"type":"status"}`))
	if err == nil || !strings.Contains(err.Error(), `"status"`) {
		t.Errorf("error %v does not name the message type", err)
	}
}
