package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func FuzzDecodeClient(f *testing.F) {
	fuzzDecode(f, "client.jsonl", DecodeClient, "Failed to parse command: ", (*Validator).ValidateClientFrame)
}

func FuzzDecodeServer(f *testing.F) {
	fuzzDecode(f, "server.jsonl", DecodeServer, "Failed to parse message: ", (*Validator).ValidateServerFrame)
}

func FuzzDecodeEnvelope(f *testing.F) {
	fuzzDecode(f, "sse.jsonl", DecodeEnvelope, "Failed to parse event: ", (*Validator).ValidateEnvelope)
}

// fuzzDecode checks that decoding never panics, that failures are
// *DecodeErrors with the family's prefix, and that whatever decodes
// re-encodes to a schema-valid line that decodes to the same message and
// encodes to the same bytes.
func fuzzDecode(f *testing.F, seeds string, decode func([]byte) (Message, error), prefix string,
	validate func(*Validator, []byte) error) {
	for _, l := range readLines(f, seeds) {
		f.Add(l)
	}
	for _, s := range []string{``, `{}`, `{"type":"bogus"}`, `{"type":"prompt","content":"\ud800"}`, `[`, `{"type":"hello","capabilities":{"x":1}}`, `{"type":"init","history":[1e308,-0,1e-400]}`} {
		f.Add([]byte(s))
	}
	v, err := NewValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := decode(line)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !strings.HasPrefix(de.Message, prefix) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		// The decoder takes one JSON value; cutting the stream into lines
		// is the transport's job (an HTTP body may be pretty-printed). A
		// raw newline in JSON can only be whitespace between tokens, so a
		// decoded value is checked against the schema as one line.
		frame := line
		if bytes.ContainsRune(bytes.TrimRight(line, "\r\n"), '\n') {
			var compact bytes.Buffer
			if err := json.Compact(&compact, line); err != nil {
				t.Fatalf("decoder accepted invalid JSON %q: %v", line, err)
			}
			frame = compact.Bytes()
		}
		if err := validate(v, frame); err != nil {
			t.Errorf("decoder accepted a line the schema rejects: %v\n%q", err, line)
		}
		out, err := Marshal(m)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", m, err)
		}
		if err := validate(v, out); err != nil {
			t.Errorf("schema rejects re-encoded %s: %v", out, err)
		}
		m2, err := decode(out)
		if err != nil {
			t.Fatalf("decode re-encoded %s: %v", out, err)
		}
		if diff := cmp.Diff(m, m2, equateEmpty); diff != "" {
			t.Errorf("decode(Marshal(m)) != m (-m +m2):\n%s", diff)
		}
		out2, err := Marshal(m2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Errorf("encoding not stable (%v):\n%s\n%s", err, out, out2)
		}
	})
}
