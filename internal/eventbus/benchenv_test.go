package eventbus_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
)

// The benchmarks' servers run in their own processes, as in production,
// so that the CPU the benchmarks count (getrusage of this process) is
// Maestro's alone: a standalone NATS server, an OTLP receiver and a fake
// model server speaking the OpenAI wire format.

// procTimeout bounds starting and stopping one of them.
const procTimeout = 2 * time.Minute

// benchNATS returns MAESTRO_BENCH_NATS_URL, else the URL of a standalone
// nats-server -js started for the benchmark: the nats-server on PATH,
// else one built from the nats-server module this module requires.
func benchNATS(b *testing.B) string {
	if url := os.Getenv("MAESTRO_BENCH_NATS_URL"); url != "" {
		return url
	}
	dir := b.TempDir()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = filepath.Join(dir, "nats-server")
		ctx, cancel := context.WithTimeout(b.Context(), procTimeout)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
			b.Fatalf("build nats-server: %v\n%s", err, out)
		}
	}
	port, err := proctest.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", filepath.Join(dir, "js"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	startProc(b, cmd, func() bool {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Server is ready") {
				go drain(sc)
				return true
			}
		}
		return false
	})
	return "nats://127.0.0.1:" + strconv.Itoa(port)
}

// otlpSink starts go run ./bench/eventbus -otlp-sink and returns its URL.
func otlpSink(b *testing.B) string {
	bin, err := proctest.Build(b.Context(), "bench/eventbus", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return startURLProc(b, exec.Command(bin, "-otlp-sink"))
}

// fakeModel starts cmd/maestro-fakemodel looping over turns and returns
// its URL.
func fakeModel(b *testing.B, turns string) string {
	dir := b.TempDir()
	bin, err := proctest.Build(b.Context(), "cmd/maestro-fakemodel", dir)
	if err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(dir, "turns.json")
	if err := os.WriteFile(script, []byte(turns), 0o600); err != nil {
		b.Fatal(err)
	}
	return startURLProc(b, exec.Command(bin, "--script", script, "--loop"))
}

// startURLProc starts a server that prints {"url":…} on stdout once it
// listens and serves until its stdin closes; it returns the URL.
func startURLProc(b *testing.B, cmd *exec.Cmd) string {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var url string
	startProc(b, cmd, func() bool {
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() {
			return false
		}
		var ready struct{ URL string }
		if json.Unmarshal(sc.Bytes(), &ready) != nil || ready.URL == "" {
			return false
		}
		url = ready.URL
		go drain(sc)
		return true
	})
	return url
}

// startProc starts cmd and waits (bounded) until ready reports it ready;
// the process is stopped (stdin closed, SIGTERM) when the benchmark ends.
func startProc(b *testing.B, cmd *exec.Cmd, ready func() bool) {
	b.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", cmd.Path, err)
	}
	exited := make(chan struct{})
	b.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(procTimeout):
			cmd.Process.Kill()
			<-exited
		}
	})
	ok := make(chan bool, 1)
	go func() { ok <- ready() }()
	select {
	case r := <-ok:
		if !r {
			go func() { cmd.Wait(); close(exited) }()
			b.Fatalf("%s exited before it was ready", cmd.Path)
		}
	case <-time.After(procTimeout):
		go func() { cmd.Wait(); close(exited) }()
		b.Fatalf("%s not ready after %s", cmd.Path, procTimeout)
	}
	go func() { cmd.Wait(); close(exited) }()
}

// drain reads what is left of a process's output so that it never blocks
// writing it.
func drain(sc *bufio.Scanner) {
	for sc.Scan() {
	}
}
