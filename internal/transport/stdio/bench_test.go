package stdio_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	hrt "github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/transport/stdio"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

// chunker is a model that streams n text deltas as fast as it can.
type chunker struct{ n int }

func (c chunker) Name() string  { return "bench" }
func (c chunker) Model() string { return "bench-1" }
func (c chunker) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		for range c.n {
			if ctx.Err() != nil {
				yield(llm.Event{}, ctx.Err())
				return
			}
			if !yield(llm.Event{Type: llm.EventTextDelta, Delta: "token "}, nil) {
				return
			}
		}
		msg := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("done")}}
		yield(llm.Event{Type: llm.EventDone, Response: &llm.Response{Message: msg, StopReason: llm.StopEndTurn}}, nil)
	}
}

// benchSession is an in-process stdio session over pipes.
type benchSession struct {
	in     *io.PipeWriter
	out    *bufio.Reader
	served chan error
}

func startSession(b testing.TB, p llm.Provider) *benchSession {
	b.Helper()
	return serveSession(b, hrt.Config{Provider: p, Cwd: b.TempDir()})
}

// serveSession serves a runtime of cfg (with no tools) over pipes and
// reads up to its session_info.
func serveSession(b testing.TB, cfg hrt.Config) *benchSession {
	b.Helper()
	cfg.Tools = func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil }
	rt, err := hrt.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &benchSession{in: inW, out: bufio.NewReaderSize(outR, 1<<16), served: make(chan error, 1)}
	go func() {
		s.served <- stdio.Serve(context.Background(), stdio.Config{Runtime: rt, In: inR, Out: outW})
		outW.Close()
	}()
	s.readUntil(b, "session_info")
	return s
}

// readUntil reads lines until one of type typ and returns how many lines
// it read.
func (s *benchSession) readUntil(b testing.TB, typ string) int {
	b.Helper()
	want := []byte(`{"type":"` + typ + `"`)
	for n := 1; ; n++ {
		line, err := s.out.ReadSlice('\n')
		if err != nil {
			b.Fatalf("read: %v", err)
		}
		if bytes.HasPrefix(line, want) {
			return n
		}
	}
}

func (s *benchSession) close(b testing.TB) {
	s.in.Close()
	go io.Copy(io.Discard, s.out)
	if err := <-s.served; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHelloRoundTrip: hello in, hello_ok (and connection_info) out,
// through the decoder, the runtime and the writer.
func BenchmarkHelloRoundTrip(b *testing.B) {
	s := startSession(b, chunker{})
	hello := []byte(`{"type":"hello","protocol_version":"2026-04-02","client_info":{"name":"bench","version":"1"},"capabilities":{"server_requests":["approval"]}}` + "\n")
	for b.Loop() {
		if _, err := s.in.Write(hello); err != nil {
			b.Fatal(err)
		}
		s.readUntil(b, "connection_info")
	}
	s.close(b)
}

// BenchmarkChunkStream measures the sustained response_chunk rate through
// the transport, to a fast reader and to a slow one (which parses every
// line and pauses 1 ms every 256 lines). With the slow reader the agent is
// held back by backpressure; peak-heap-MB shows memory stays bounded by
// the frame ring instead of growing with the backlog.
func BenchmarkChunkStream(b *testing.B) {
	const chunks = 100_000
	for _, slow := range []bool{false, true} {
		name := "reader=fast"
		if slow {
			name = "reader=slow"
		}
		b.Run(name, func(b *testing.B) {
			s := startSession(b, chunker{n: chunks})
			var peak atomic.Uint64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				var ms runtime.MemStats
				t := time.NewTicker(20 * time.Millisecond)
				defer t.Stop()
				for {
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
					select {
					case <-t.C:
					case <-stop:
						return
					}
				}
			}()
			prompt := []byte(`{"type":"prompt","content":"go"}` + "\n")
			start := time.Now()
			total := 0
			for b.Loop() {
				if _, err := s.in.Write(prompt); err != nil {
					b.Fatal(err)
				}
				for n := 0; ; n++ {
					line, err := s.out.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if slow {
						if _, err := protocol.DecodeServer(bytes.TrimSpace(line)); err != nil {
							b.Fatal(err)
						}
						if n%256 == 255 {
							time.Sleep(time.Millisecond)
						}
					}
					if bytes.HasPrefix(line, []byte(`{"type":"response_end"`)) {
						break
					}
				}
				total += chunks
			}
			elapsed := time.Since(start)
			close(stop)
			<-sampled
			b.ReportMetric(float64(total)/elapsed.Seconds(), "chunks/s")
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
			s.close(b)
		})
	}
}

// BenchmarkFileReadRoundTrip: utility_file_read in, utility_file_read_result
// out, through the decoder, the runtime's capability check, the real utility
// manager (a 200-line file, confined to the workspace) and the writer.
func BenchmarkFileReadRoundTrip(b *testing.B) {
	dir := b.TempDir()
	var content strings.Builder
	for i := range 200 {
		fmt.Fprintf(&content, "line %d of a source file with some ordinary text in it\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(content.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	root, err := workspace.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	s := serveSession(b, hrt.Config{
		Provider: chunker{},
		Cwd:      dir,
		Utilities: func(emit func(protocol.Message)) hrt.Utilities {
			return utility.New(utility.Config{Root: root, Emit: emit})
		},
	})
	hello := []byte(`{"type":"hello","protocol_version":"2026-04-02","capabilities":{"utility_operations":["file_read"]}}` + "\n")
	if _, err := s.in.Write(hello); err != nil {
		b.Fatal(err)
	}
	s.readUntil(b, "connection_info")
	read := []byte(`{"type":"utility_file_read","read_id":"r1","path":"main.go","offset":1,"limit":100}` + "\n")
	for b.Loop() {
		if _, err := s.in.Write(read); err != nil {
			b.Fatal(err)
		}
		s.readUntil(b, "utility_file_read_result")
	}
	s.close(b)
}
