package anthropic

import (
	"context"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// BenchmarkStream200Chunks streams a 200-chunk text turn through the
// provider, the official SDK and the fake server (loopback HTTP). The
// baseline "sdk" reads the same stream with the bare SDK and its own
// accumulator, so the ratio shows what the provider layer costs.
func BenchmarkStream200Chunks(b *testing.B) {
	chunks := llmtest.Chunks(200, "chunk %03d of a streamed answer. ")
	s := llmtest.NewServer(b, llmtest.Turn{Text: chunks, InputTokens: 1000, OutputTokens: 1600})
	s.Loop = true
	p := newProvider(b, s.URL())
	req := userRequest("write a long answer")
	b.Run("sdk", func(b *testing.B) {
		params, err := p.params(req)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(b.Context(), testTimeout)
			stream := p.client.Messages.NewStreaming(ctx, params)
			var msg sdk.Message
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					b.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				b.Fatal(err)
			}
			stream.Close()
			cancel()
			if len(msg.Content) != 1 {
				b.Fatalf("got %d blocks", len(msg.Content))
			}
		}
	})
	b.Run("provider", func(b *testing.B) { llmtest.BenchStream(b, p, req, len(chunks)) })
}
