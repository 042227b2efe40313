package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// unixSocketFilter is a seccomp program that makes socket(AF_UNIX, …)
// fail with EACCES and refuses system calls of any other architecture
// (i386's socketcall, x32 numbers), allowing everything else. Landlock
// restricts connecting to pathname unix sockets only from ABI 9, so without
// it a confined command could reach a daemon's socket outside the
// workspace (a container runtime's, say). socketpair(2) is not affected.
// It returns nil on architectures it does not know.
func unixSocketFilter() []unix.SockFilter {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return nil
	}
	const (
		offNr   = 0  // seccomp_data.nr
		offArch = 4  // seccomp_data.arch
		offArg0 = 16 // seccomp_data.args[0], low 32 bits (little-endian)
		x32Bit  = 0x40000000
	)
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	deny := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EACCES)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	return []unix.SockFilter{
		/* 0 */ stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch),
		/* 1 */ jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, arch, 1, 0),
		/* 2 */ stmt(unix.BPF_RET|unix.BPF_K, deny),
		/* 3 */ stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
		/* 4 */ jump(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, x32Bit, 0, 1),
		/* 5 */ stmt(unix.BPF_RET|unix.BPF_K, deny),
		/* 6 */ jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(unix.SYS_SOCKET), 0, 3),
		/* 7 */ stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArg0),
		/* 8 */ jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.AF_UNIX, 0, 1),
		/* 9 */ stmt(unix.BPF_RET|unix.BPF_K, deny),
		/* 10 */ stmt(unix.BPF_RET|unix.BPF_K, allow),
	}
}

// installSeccomp installs the filter on the calling thread (no_new_privs
// must be set). A nil filter installs nothing.
func installSeccomp(filter []unix.SockFilter) error {
	if len(filter) == 0 {
		return nil
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("installing the seccomp filter: %w", err)
	}
	return nil
}
