package openai

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// BenchmarkStream200Chunks streams a 200-chunk answer through the provider
// and the fake server, per API. The raw-http baseline reads the same stream
// with a bare HTTP client, so provider+SDK cost is the difference.
func BenchmarkStream200Chunks(b *testing.B) {
	chunks := llmtest.Chunks(200, "token%03d ")
	turn := llmtest.Turn{Text: chunks, InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 500}
	paths := map[string]string{APIChat: "/v1/chat/completions", APIResponses: "/v1/responses"}
	for _, api := range apis {
		b.Run("provider/"+api, func(b *testing.B) {
			srv := llmtest.NewServer(b, turn)
			srv.Loop = true
			p := newProvider(b, srv.URL()+"/v1", api)
			llmtest.BenchStream(b, p, hello(), len(chunks))
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
