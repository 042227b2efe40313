//go:build linux

// Package proctest holds process helpers for tests.
package proctest

import (
	"time"

	"golang.org/x/sys/unix"
)

// Alive reports whether pid still runs after within (a signalled process
// may need a moment to exit). It waits on a pidfd, which becomes readable
// once the process has terminated, rather than polling.
func Alive(pid int, within time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false // already gone
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(within.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 0
	}
}
