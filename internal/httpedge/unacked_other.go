//go:build !linux

package httpedge

import "syscall"

// unacked cannot tell outside Linux: a write makes progress only when
// the kernel takes some of it.
func unacked(syscall.RawConn) (int, bool) { return 0, false }
