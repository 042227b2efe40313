package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockSpec is the Landlock policy of one command.
type landlockSpec struct {
	// ABI is the Landlock ABI the ruleset is built for: the kernel's,
	// capped at what go-landlock knows. Each level handles more:
	//   1 files (read, write, execute, create, remove), 2 + rename/link
	//   across directories, 3 + truncate, 4 + TCP bind/connect, 5 + device
	//   ioctl, 6 + signal and abstract-unix-socket scoping, 7 + audit
	//   logging, 8 thread sync, 9 + pathname unix sockets, 10 + UDP.
	ABI int `json:"abi"`
	// Read are files and directories readable and executable.
	Read []string `json:"read"`
	// Write are files and directories readable, writable and executable,
	// where files may be created and removed.
	Write []string `json:"write"`
	// Network leaves TCP unrestricted; otherwise bind and connect are
	// denied (ABI 4 and later).
	Network bool `json:"network,omitempty"`
}

// landlockConfigs returns go-landlock's configurations by ABI level
// (index ABI-1).
func landlockConfigs() []landlock.Config {
	return []landlock.Config{
		landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
		landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
	}
}

// landlockABI returns the kernel's Landlock ABI capped at the levels this
// build knows, or an error saying why Landlock cannot be used.
func landlockABI() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("the kernel does not offer Landlock (%w); it needs Linux 5.13+ with landlock in the lsm= list", err)
	}
	if v < 1 {
		return 0, errors.New("the kernel does not offer Landlock")
	}
	return min(v, len(landlockConfigs())), nil
}

// rulesetFD builds the ruleset. It asks for exactly what the ABI level
// handles, so no best-effort downgrade happens: a rule that cannot be
// enforced is an error.
func (l *landlockSpec) rulesetFD() (int, uint32, error) {
	configs := landlockConfigs()
	if l.ABI < 1 || l.ABI > len(configs) {
		return -1, 0, fmt.Errorf("landlock ABI %d is not supported", l.ABI)
	}
	cfg := configs[l.ABI-1]
	if l.Network {
		cfg.HandledAccessNet = 0
	}
	var rules []landlock.Rule
	for _, p := range l.Read {
		fi, err := os.Stat(p)
		if err != nil {
			continue // optional system entries
		}
		if fi.IsDir() {
			rules = append(rules, landlock.RODirs(p))
		} else {
			rules = append(rules, landlock.ROFiles(p))
		}
	}
	for _, p := range l.Write {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			rw := landlock.RWDirs(p)
			if l.ABI >= 2 {
				rw = rw.WithRefer() // rename and link within the workspace
			}
			rules = append(rules, rw)
		} else {
			rules = append(rules, landlock.RWFiles(p))
		}
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return -1, 0, fmt.Errorf("building the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return -1, 0, errors.New("building the Landlock ruleset: nothing to enforce")
	}
	return fd, flags, nil
}

// startConfined starts cmd from an OS thread that first sets no_new_privs
// and enforces the Landlock ruleset, so the program (a clone of that
// thread) is born confined while the rest of the helper is not. The thread
// is never unlocked: it carries the domain and is the parent the program's
// parent-death signal watches, so its goroutine parks for the helper's
// lifetime.
func startConfined(cmd *exec.Cmd, l *landlockSpec) error {
	fd, flags, err := l.rulesetFD()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// Below ABI 9 unix sockets, below ABI 10 UDP (and SCTP at any level)
	// are left to seccomp.
	denyUnix, denyInet := l.ABI < 9, !l.Network && l.ABI < 10
	filter := socketFilter(denyUnix, denyInet)
	// The confined thread shares the helper's memory with its unconfined
	// threads: a command that could ptrace it could run code outside the
	// domain. Non-dumpable, only CAP_SYS_PTRACE may attach, and the
	// command has no capabilities (dropCapabilities).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the helper non-dumpable: %w", err)
	}
	errc := make(chan error, 1)
	goOffLeader(func() {
		errc <- func() error {
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				return fmt.Errorf("setting no_new_privs: %w", err)
			}
			if err := dropCapabilities(); err != nil {
				return err
			}
			if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
				return fmt.Errorf("enforcing the Landlock ruleset: %w", err)
			}
			if denyUnix || denyInet {
				if err := installSeccomp(filter); err != nil {
					return err
				}
			}
			return cmd.Start()
		}()
		select {}
	})
	return <-errc
}

// goOffLeader runs f on a new goroutine locked to an OS thread that is
// not the process's thread-group leader. Landlock domains are per thread,
// and a signal or ptrace aimed at the helper's pid is checked against the
// leader: were the leader the confined thread, the command would share its
// domain and could signal the helper (seen in CI when the Go scheduler put
// the goroutine on the main thread). A goroutine that lands on the leader
// keeps it locked, so the scheduler cannot give it to the next goroutine,
// until a fresh goroutine has locked another thread.
func goOffLeader(f func()) { goOffLeaderCheck(f, isLeaderThread) }

func isLeaderThread() bool { return unix.Gettid() == unix.Getpid() }

// goOffLeaderCheck is goOffLeader with the leader test passed in, so that
// a test can take the handover path on demand.
func goOffLeaderCheck(f func(), onLeader func() bool) {
	go func() {
		runtime.LockOSThread()
		if !onLeader() {
			f()
			return
		}
		locked := make(chan struct{})
		goOffLeaderCheck(func() { close(locked); f() }, isLeaderThread)
		<-locked
		runtime.UnlockOSThread()
	}()
}

// dropCapabilities empties the calling thread's capability sets (bounding,
// ambient, effective, permitted, inheritable). Landlock does not take
// root's capabilities away: a command run by root would keep
// CAP_NET_ADMIN (reconfigure the host's network), CAP_NET_RAW (raw
// sockets, unrestricted by Landlock), CAP_SYS_PTRACE (attach to the
// helper), CAP_SYS_MODULE, CAP_SYS_BOOT and the rest. With no_new_privs
// set first, executing a program does not give them back.
func dropCapabilities() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) {
			// EINVAL: the kernel knows fewer; EPERM: no CAP_SETPCAP (not
			// root), so nothing to regain with no_new_privs anyway.
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing the ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("dropping capabilities: %w", err)
	}
	return nil
}
