package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// benchStream is 100 tool results of 10 KiB each, one a line.
func benchStream() []byte {
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{
		"content": []any{map[string]any{"type": "text", "text": strings.Repeat("some text ", 1<<10)}}}})
	return bytes.Repeat(append(msg, '\n'), 100)
}

// BenchmarkStdout: what the filter costs on a server's stdout (Filter)
// against reading it as is (Raw), and against one decoding of the same
// messages (Decode; the SDK decodes each message more than once).
func BenchmarkStdout(b *testing.B) {
	data := benchStream()
	b.Run("Raw", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			io.Copy(io.Discard, struct{ io.Reader }{bytes.NewReader(data)})
		}
	})
	b.Run("Filter", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			io.Copy(io.Discard, newStdoutFilter(bytes.NewReader(data), 0, nil))
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(data))
			for {
				var raw json.RawMessage
				if dec.Decode(&raw) != nil {
					break
				}
				var m map[string]any
				json.Unmarshal(raw, &m)
			}
		}
	})
}
