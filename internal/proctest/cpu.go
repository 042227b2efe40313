//go:build unix

package proctest

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is this process's CPU time so far, user plus system (what a
// benchmark reports instead of wall time on a shared machine).
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
