// Package benchproc holds what the benchmarks share about processes: for
// the fan-out benchmarks (bench/attach, bench/sse), a server that runs its
// clients in a child process of the same binary (so that the server's
// memory figures are its own), the loopback HTTP server they measure, the
// resident memory of a process and the open-file limit that thousands of
// sockets need; for those that drive a child over its standard streams
// (bench/attach, bench/headless, bench/hostedrunner), starting it piped.
package benchproc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Main runs clients with the remaining arguments when this process is the
// child that ClientsCommand starts, else server with the command-line
// arguments; an error ends the process with status 1 after "name: error".
func Main(name string, server, clients func(args []string) error) {
	var err error
	if len(os.Args) > 2 && os.Args[1] == "-role" && os.Args[2] == "clients" {
		err = clients(os.Args[3:])
	} else {
		err = server(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// ClientsCommand is this binary started as the clients child with args;
// its standard error is this process's.
func ClientsCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"-role", "clients"}, args...)...)
	cmd.Stderr = os.Stderr
	return cmd, nil
}

// StartPiped starts cmd with a pipe to its standard input and one from its
// standard output.
func StartPiped(cmd *exec.Cmd) (stdin io.WriteCloser, stdout io.ReadCloser, err error) {
	stdin, err = cmd.StdinPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("pipe to %s: %w", cmd.Path, err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("pipe from %s: %w", cmd.Path, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return stdin, stdout, nil
}

// Serve serves h on a loopback port until stop is called; base is the
// server's URL ("http://127.0.0.1:port").
func Serve(h http.Handler) (base string, stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen on a loopback port: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String(), hs.Close, nil
}

// KiB reads a field of /proc/self/status in KiB: VmRSS (resident memory)
// or VmHWM (its peak); 0 when it cannot be read.
func KiB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// RaiseFileLimit lifts the soft open-file limit to the hard one (each
// subscriber is a socket, on both sides).
func RaiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
