package sandbox_test

import (
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/maestro-run/maestro/internal/sandbox"
)

// TestMain runs the sandbox helper when asked to, and makes sure the test process was started with a fake model API
// key in its environment (re-executing itself once if not), so that the
// attack suite can check that no sandboxed command reads it from
// /proc/<pid>/environ. /proc shows the environment a process was started
// with; os.Setenv does not change it.
func TestMain(m *testing.M) {
	// The Landlock tests re-execute this binary as the sandbox helper.
	sandbox.RunHelperIfRequested()
	if os.Getenv(fakeKeyVar) != fakeKeyValue {
		os.Exit(reexecWithFakeKey())
	}
	os.Exit(m.Run())
}

func reexecWithFakeKey() int {
	exe, err := os.Executable()
	if err != nil {
		panic("sandbox tests: finding the test binary: " + err.Error())
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), fakeKeyVar+"="+fakeKeyValue)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode()
		}
		panic("sandbox tests: re-running the test binary: " + err.Error())
	}
	return 0
}

// listen listens on addr, closed when t ends, and accepts and drops every
// connection, counting them in accepted when it is not nil.
func listen(t *testing.T, network, addr string, accepted *atomic.Int64) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted != nil {
				accepted.Add(1)
			}
			c.Close()
		}
	}()
	return ln
}
