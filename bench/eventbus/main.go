// Command eventbus measures the platform event publisher's catch-up: a
// session log with a backlog of -events bus events (tool calls begun and
// ended, two records each) that an earlier process followed but did not
// publish, published by Bus.CatchUp to an embedded NATS JetStream server
// (file storage). It prints the wall time, the process's CPU time and the
// events per second, and checks that the stream holds every event once.
//
//	go run ./bench/eventbus -events 100000
//
// With -otlp-sink it is instead an OTLP/HTTP endpoint that accepts and
// discards every export, in its own process: the agent-loop overhead
// benchmarks (internal/eventbus) export their spans to it so that the
// receiver's CPU is not counted as Maestro's. It prints one JSON line,
// {"url":"http://127.0.0.1:PORT"}, and serves until stdin closes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
)

func main() {
	events := flag.Int("events", 100000, "bus events in the backlog (even)")
	sink := flag.Bool("otlp-sink", false, "serve an OTLP/HTTP endpoint that discards what it receives (until stdin closes)")
	flag.Parse()
	if *sink {
		if err := otlpSink(); err != nil {
			fmt.Fprintln(os.Stderr, "bench/eventbus:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*events); err != nil {
		fmt.Fprintln(os.Stderr, "bench/eventbus:", err)
		os.Exit(1)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(events int) error {
	tmp, err := os.MkdirTemp("", "bench-eventbus-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(tmp, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		return fmt.Errorf("start NATS: %w", err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("start NATS: not ready after 10s")
	}

	// The backlog: a session followed before (a publish cursor at 0) whose
	// records were never published.
	storeDir := filepath.Join(tmp, "sessions")
	s, err := session.NewStore(storeDir).Create(session.Meta{Provider: "replay", Model: "bench"})
	if err != nil {
		return err
	}
	for i := range events / 2 {
		id := fmt.Sprintf("call_%d", i)
		s.Event(protocol.ToolCall{CallID: id, Tool: "Read", Args: json.RawMessage(`{"path":"a.go"}`)})
		s.Event(protocol.ToolEnd{CallID: id, Success: true})
	}
	if err := s.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "eventbus.json"), []byte(`{"cursor":0,"offset":0}`), 0o600); err != nil {
		return err
	}

	bus, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: srv.ClientURL(), CreateStream: true, Source: "bench"}})
	if err != nil {
		return err
	}
	defer bus.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cpu0, t0 := cpuTime(), time.Now()
	if err := bus.CatchUp(ctx, storeDir); err != nil {
		return err
	}
	wall, cpu := time.Since(t0), cpuTime()-cpu0

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, eventbus.StreamName)
	if err != nil {
		return err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs != uint64(events) {
		return fmt.Errorf("the stream holds %d messages, want %d", info.State.Msgs, events)
	}
	fmt.Printf("| backlog events | catch-up wall | CPU (Maestro + embedded NATS) | events/s (wall) |\n|---:|---:|---:|---:|\n")
	fmt.Printf("| %d | %.2f s | %.2f s | %.0f |\n", events, wall.Seconds(), cpu.Seconds(), float64(events)/wall.Seconds())
	return nil
}

// otlpSink answers every OTLP/HTTP export with an empty success until
// stdin closes.
func otlpSink() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go hs.Serve(ln)
	ready, _ := json.Marshal(map[string]string{"url": "http://" + ln.Addr().String()})
	fmt.Println(string(ready))
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(ctx)
}
