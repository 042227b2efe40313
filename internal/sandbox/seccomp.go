package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// socketFilter is a seccomp program that refuses system calls of any
// other architecture (i386's socketcall, x32 numbers) and, with denyUnix,
// makes socket(AF_UNIX, …) fail with EACCES; with denyInet, it also refuses
// every AF_INET/AF_INET6 socket but TCP (SOCK_STREAM with protocol 0 or
// IPPROTO_TCP), allowing everything else. Landlock restricts connecting to
// pathname unix sockets only from ABI 9, so without denyUnix a confined
// command could reach a daemon's socket outside the workspace (a container
// runtime's, say); it restricts TCP from ABI 4 but UDP only from ABI 10 and
// SCTP not at all, so without denyInet a command denied the network could
// still send datagrams out (to any DNS resolver, say). io_uring_setup(2)
// is refused too: IORING_OP_SOCKET would make either socket without
// socket(2). socketpair(2) is not affected. It returns nil on architectures it does not know.
func socketFilter(denyUnix, denyInet bool) []unix.SockFilter {
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
		offArg1 = 24
		offArg2 = 32
		x32Bit  = 0x40000000
	)
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	deny := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EACCES)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	const jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	ret := func(k uint32) unix.SockFilter { return stmt(unix.BPF_RET|unix.BPF_K, k) }
	onUnix, onInet := allow, allow
	if denyUnix {
		onUnix = deny
	}
	f := []unix.SockFilter{
		/* 0 */ stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch),
		/* 1 */ jump(jeq, arch, 1, 0),
		/* 2 */ ret(deny),
		/* 3 */ stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
		/* 4 */ jump(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, x32Bit, 0, 1),
		/* 5 */ ret(deny),
		// io_uring makes sockets (IORING_OP_SOCKET) without socket(2).
		/* 6 */ jump(jeq, uint32(unix.SYS_IO_URING_SETUP), 12, 0), // → 19
		/* 7 */ jump(jeq, uint32(unix.SYS_SOCKET), 0, 12), // → 20
		/* 8 */ stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArg0),
		/* 9 */ jump(jeq, unix.AF_UNIX, 0, 1),
		/* 10 */ ret(onUnix),
		/* 11 */ jump(jeq, unix.AF_INET, 1, 0),
		/* 12 */ jump(jeq, unix.AF_INET6, 0, 7), // → 20
		/* 13 */ ret(onInet),
		/* 14 */ stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, 0xf), // type without SOCK_NONBLOCK/CLOEXEC
		/* 15 */ jump(jeq, unix.SOCK_STREAM, 0, 3), // → 19
		/* 16 */ stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArg2),
		/* 17 */ jump(jeq, 0, 2, 0), // → 20
		/* 18 */ jump(jeq, unix.IPPROTO_TCP, 1, 0), // → 20, else 19
		/* 19 */ ret(deny),
		/* 20 */ ret(allow),
	}
	if denyInet {
		f[13] = stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArg1)
	}
	return f
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
