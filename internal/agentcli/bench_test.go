package agentcli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// benchStream repeats a captured tool-turn fixture until it is about size
// bytes (a 50 MB stream of real lines).
func benchStream(b *testing.B, dir string, size int) []byte {
	b.Helper()
	unit, err := os.ReadFile(filepath.Join("testdata", dir, "tool-turn.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.HasSuffix(unit, []byte("\n")) {
		unit = append(unit, '\n')
	}
	return bytes.Repeat(unit, size/len(unit)+1)
}

// BenchmarkParserThroughput parses a 50 MB stream per parser; the MB/s
// column is the throughput.
func BenchmarkParserThroughput(b *testing.B) {
	for _, c := range []struct{ id, dir string }{
		{"claude-code", "claude-code-2.1.330"}, {"codex", "codex-0.169.0"}, {"gemini-cli", "gemini-cli-0.61.0"},
		{"opencode", "opencode-1.18.33"}, {"qwen-code", "qwen-code-0.24.4"},
	} {
		b.Run(c.id, func(b *testing.B) {
			def := mustDef(b, c.id)
			data := benchStream(b, c.dir, 50<<20)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				p, _ := NewParser(def.Parser, ParserOptions{Provider: def.ID})
				for _, err := range Parse(bytes.NewReader(data), p) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkLineLatency measures what Maestro adds between a CLI's stdout
// line and our events: the time from writing one line into a pipe to the
// parsed Event reaching the consumer. It reports p50 and p99.
func BenchmarkLineLatency(b *testing.B) {
	def := mustDef(b, "claude-code")
	line, err := os.ReadFile("testdata/claude-code-2.1.330/tool-turn.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(line), []byte("\n"))
	p, _ := NewParser(def.Parser, ParserOptions{Provider: def.ID})
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	got := make(chan time.Time, 1)
	go func() {
		for range Parse(r, p) {
			got <- time.Now()
		}
		close(got)
	}()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		l := append(slices.Clone(lines[i%len(lines)]), '\n')
		i++
		start := time.Now()
		if _, err := w.Write(l); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(start))
	}
	w.Close()
	for range got {
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}
