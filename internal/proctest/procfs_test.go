//go:build linux

package proctest

import (
	"os"
	"slices"
	"syscall"
	"testing"
)

// TestProcesses: the test process is read from /proc as the kernel sees
// it (parent, group, command line), and a pid that does not run is not.
func TestProcesses(t *testing.T) {
	t.Parallel()
	self := os.Getpid()
	p, ok := Stat(self)
	if !ok || p.PID != self || p.PPID != os.Getppid() || p.Pgrp != syscall.Getpgrp() || p.State == "" {
		t.Errorf("Stat(self) = %+v, %v; want pid %d, ppid %d, pgrp %d", p, ok, self, os.Getppid(), syscall.Getpgrp())
	}
	if got := Processes(t, func(p Process) bool { return p.PID == self }); !slices.Equal(got, []int{self}) {
		t.Errorf("Processes(self) = %v, want [%d]", got, self)
	}
	if !CommandLineHas(self, os.Args[0]) || CommandLineHas(self, "\x00no such argument\x00") {
		t.Error("CommandLineHas does not read the test's command line")
	}
	if _, ok := Stat(-1); ok {
		t.Error("Stat(-1) is ok")
	}
}
