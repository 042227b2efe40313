package httpedge

import (
	"syscall"
	"unsafe"
)

// unacked is how many bytes written to the socket rc its peer has not
// acknowledged yet (SIOCOUTQ); false when it cannot tell.
func unacked(rc syscall.RawConn) (int, bool) {
	var q int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&q)))
	}); err != nil || errno != 0 {
		return 0, false
	}
	return int(q), true
}
