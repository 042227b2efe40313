package openai

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// BenchmarkStream200Chunks streams a 200-chunk answer through the provider
// and the fake server, per API. The raw-http baseline reads the same stream
// with a bare HTTP client, so provider+SDK cost is the difference.
func BenchmarkStream200Chunks(b *testing.B) {
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("token%03d ", i)
	}
	turn := llmtest.Turn{Text: chunks, InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 500}
	paths := map[string]string{APIChat: "/v1/chat/completions", APIResponses: "/v1/responses"}
	for _, api := range apis {
		b.Run("provider/"+api, func(b *testing.B) {
			srv := llmtest.NewServer(b, turn)
			srv.Loop = true
			p := newProvider(b, srv.URL()+"/v1", api)
			req := hello()
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for ev, err := range p.Stream(b.Context(), req) {
					if err != nil {
						b.Fatal(err)
					}
					if ev.Type == llm.EventTextDelta {
						n++
					}
				}
				if n != len(chunks) {
					b.Fatalf("%d text deltas, want %d", n, len(chunks))
				}
			}
		})
		b.Run("raw-http/"+api, func(b *testing.B) {
			srv := llmtest.NewServer(b, turn)
			srv.Loop = true
			body := `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[],"input":[]}`
			client := &http.Client{}
			b.ReportAllocs()
			for b.Loop() {
				res, err := client.Post(srv.URL()+paths[api], "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, res.Body); err != nil {
					b.Fatal(err)
				}
				res.Body.Close()
			}
		})
	}
}
