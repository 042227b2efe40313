package protocol

import (
	"encoding/json"
	"testing"
)

var promptLine = []byte(`{"type":"prompt","content":"Fix the failing test in internal/llm and explain the cause.","attachments":["notes.md"]}`)

func BenchmarkDecodeClientPrompt(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(promptLine)))
	for b.Loop() {
		if _, err := DecodeClient(promptLine); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodePromptBaseline is the baseline: encoding/json into the
// struct, with no strictness at all (no type dispatch, no unknown-field,
// required or enum checks).
func BenchmarkDecodePromptBaseline(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(promptLine)))
	for b.Loop() {
		var p Prompt
		if err := json.Unmarshal(promptLine, &p); err != nil {
			b.Fatal(err)
		}
	}
}

var chunk = ResponseChunk{ResponseID: "resp_1745366400000_a1b2c3", Content: "Let me look at the failing test first.", IsThinking: false}

func BenchmarkMarshalResponseChunk(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalResponseChunkBaseline is the baseline: the original
// Marshal (encoding/json, then splicing "type" in front).
func BenchmarkMarshalResponseChunkBaseline(b *testing.B) {
	type plain ResponseChunk // without the MarshalJSON method
	b.ReportAllocs()
	for b.Loop() {
		body, err := json.Marshal(plain(chunk))
		if err != nil {
			b.Fatal(err)
		}
		out := make([]byte, 0, len(body)+32)
		out = append(out, `{"type":"response_chunk",`...)
		_ = append(out, body[1:]...)
	}
}

func BenchmarkValidateServerFrame(b *testing.B) {
	v, err := NewValidator()
	if err != nil {
		b.Fatal(err)
	}
	line, err := Marshal(chunk)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := v.ValidateServerFrame(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewValidator(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewValidator(); err != nil {
			b.Fatal(err)
		}
	}
}
