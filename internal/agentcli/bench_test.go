package agentcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
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

// benchCLIs are the built-in CLIs and their captured fixture directories.
func benchCLIs() []struct{ id, dir string } {
	return []struct{ id, dir string }{
		{"claude-code", "claude-code-2.1.330"}, {"codex", "codex-0.169.0"}, {"gemini-cli", "gemini-cli-0.61.0"},
		{"opencode", "opencode-1.18.33"}, {"qwen-code", "qwen-code-0.24.4"},
	}
}

// BenchmarkParserThroughput parses a 50 MB stream per parser; the MB/s
// column is the throughput.
func BenchmarkParserThroughput(b *testing.B) {
	for _, c := range benchCLIs() {
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

// BenchmarkParserBaseline gives the same-run baselines for
// BenchmarkParserThroughput on the Claude Code stream: "split" only cuts
// the 50 MB into lines (the floor any line parser pays), "json-any"
// decodes every line into a map[string]any with encoding/json (what a
// generic decoder pays before mapping anything to events).
func BenchmarkParserBaseline(b *testing.B) {
	data := benchStream(b, "claude-code-2.1.330", 50<<20)
	b.Run("split", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
			n := 0
			for sc.Scan() {
				n += len(sc.Bytes())
			}
			if n == 0 {
				b.Fatal("no lines")
			}
		}
	})
	b.Run("json-any", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
			for sc.Scan() {
				var v map[string]any
				if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkLineLatencyBaseline is the floor under BenchmarkLineLatency,
// measured the same way: one line written into a pipe → the line read
// back by a goroutine (no parsing). The difference is what Maestro adds.
func BenchmarkLineLatencyBaseline(b *testing.B) {
	pipeLatency(b, 0, readLines(b))
}

// readLines reads lines and sends the time each one arrived on got.
func readLines(b *testing.B) func(r io.Reader, got chan<- time.Time) {
	return func(r io.Reader, got chan<- time.Time) {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			if _, err := br.ReadBytes('\n'); err != nil {
				if err != io.EOF {
					b.Error(err)
				}
				return
			}
			got <- time.Now()
		}
	}
}

// BenchmarkLineLatency measures what Maestro adds between a CLI's stdout
// line and our events: the time from writing one line into a pipe to the
// parsed Event reaching the consumer. It reports p50 and p99.
func BenchmarkLineLatency(b *testing.B) {
	def := mustDef(b, "claude-code")
	p, _ := NewParser(def.Parser, ParserOptions{Provider: def.ID})
	pipeLatency(b, 0, parseLines(p))
}

// parseLines parses lines with p and sends the time each Event arrived on
// got.
func parseLines(p *Parser) func(r io.Reader, got chan<- time.Time) {
	return func(r io.Reader, got chan<- time.Time) {
		for range Parse(r, p) {
			got <- time.Now()
		}
	}
}

// linePace is how often a line arrives in BenchmarkLineLatencyPaced: the
// agent CLIs write a few lines a second while the model streams (a model
// at 50-100 tokens/s, one line per message or tool event); 2 ms is far
// faster than that, so the figure is an upper bound.
const linePace = 2 * time.Millisecond

// BenchmarkLineLatencyPaced is BenchmarkLineLatency (and its baseline) with
// the lines arriving at an agent CLI's pace instead of back to back: what a
// user can notice is the latency added per line at the rates the CLIs
// really write, beside the milliseconds between lines.
func BenchmarkLineLatencyPaced(b *testing.B) {
	b.Run("baseline", func(b *testing.B) { pipeLatency(b, linePace, readLines(b)) })
	b.Run("maestro", func(b *testing.B) {
		def := mustDef(b, "claude-code")
		p, _ := NewParser(def.Parser, ParserOptions{Provider: def.ID})
		pipeLatency(b, linePace, parseLines(p))
	})
}

// BenchmarkLineCost is the CPU cost of parsing one line (ns/op is per
// line): the captured tool-turn lines of each CLI fed to its parser in turn.
func BenchmarkLineCost(b *testing.B) {
	for _, c := range benchCLIs() {
		b.Run(c.id, func(b *testing.B) {
			def := mustDef(b, c.id)
			data, err := os.ReadFile(filepath.Join("testdata", c.dir, "tool-turn.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
			p, _ := NewParser(def.Parser, ParserOptions{Provider: def.ID})
			i := 0
			for b.Loop() {
				p.Feed(lines[i%len(lines)])
				i++
			}
			b.ReportMetric(float64(len(data))/float64(len(lines)), "B/line")
		})
	}
}

// pipeLatency writes the lines of a captured Claude Code tool turn into a
// pipe one at a time (one per pace, or back to back when pace is 0);
// consume reads the other end and sends the time of each result on got.
// It reports the p50 and p99 of write → result.
func pipeLatency(b *testing.B, pace time.Duration, consume func(r io.Reader, got chan<- time.Time)) {
	data, err := os.ReadFile("testdata/claude-code-2.1.330/tool-turn.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	got := make(chan time.Time, 1)
	go func() {
		defer close(got)
		consume(r, got)
	}()
	var tick <-chan time.Time
	if pace > 0 {
		t := time.NewTicker(pace)
		defer t.Stop()
		tick = t.C
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		l := append(slices.Clone(lines[i%len(lines)]), '\n')
		i++
		if tick != nil {
			<-tick
		}
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
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
}
