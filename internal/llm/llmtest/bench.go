package llmtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
)

// Chunks returns n text chunks for a long streamed answer, chunk i being
// fmt.Sprintf(format, i).
func Chunks(n int, format string) []string {
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = fmt.Sprintf(format, i)
	}
	return chunks
}

// BenchStream is the provider side of the providers' streaming
// benchmarks: in b's loop it streams req through p (each turn bounded by
// a minute) and fails unless every turn yields want text deltas.
func BenchStream(b *testing.B, p llm.Provider, req *llm.Request, want int) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
		deltas := 0
		for ev, err := range p.Stream(ctx, req) {
			if err != nil {
				cancel()
				b.Fatal(err)
			}
			if ev.Type == llm.EventTextDelta {
				deltas++
			}
		}
		cancel()
		if deltas != want {
			b.Fatalf("got %d text deltas, want %d", deltas, want)
		}
	}
}
