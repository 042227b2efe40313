// Command pgtestd runs one throwaway PostgreSQL cluster (internal/pgtest)
// for a whole test run, so that the test binaries needing PostgreSQL share
// it instead of each running initdb and a server of its own:
// scripts/test.sh starts it before the Go tests and passes the admin DSN it
// prints (one line on standard output, once the server is ready) to every
// test binary in $MAESTRO_PGTEST_CLUSTER. Each test still gets its own
// schema or database. It stops the server and removes its directory when
// its standard input closes (its parent ended) or on SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/pgtest"
)

// maxConnections: the test binaries running at once (go test -p, and the
// longest-running packages' go test beside it) share the server.
const maxConnections = 1000

// startTimeout bounds initdb and the server's start.
const startTimeout = 2 * time.Minute

func main() { os.Exit(run()) }

func run() int {
	// The server is killed if the thread that started it ends (parent-death
	// signal): keep this goroutine, which starts it, on one thread.
	runtime.LockOSThread()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	c, err := pgtest.StartWith(ctx, maxConnections)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtestd: start a PostgreSQL cluster: %v\n", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	fmt.Println(c.DSN("postgres", nil))
	select {
	case <-sig:
	case <-eof:
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtestd: stop the cluster: %v\n", err)
		return 1
	}
	return 0
}
