package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/sandbox/sandboxtest"
)

// fakeKeyVar holds a fake model API key in the initial environment of the
// test process (TestMain puts it there), so that an attack reading
// /proc/<pid>/environ of Maestro would find it.
const (
	fakeKeyVar   = "ANTHROPIC_API_KEY"
	fakeKeyValue = "sk-ant-maestro-attack-suite-fake-key"
)

// attackEnv is what one attack case runs against: a workspace, a "home"
// beside it holding a secret, an empty directory outside the workspace
// that nothing may write, and a TCP listener on 127.0.0.1 that nothing may
// reach.
type attackEnv struct {
	root, ws, home, secret, outside string
	port, udpPort                   int
	accepted                        *atomic.Int64
	marker                          string // unique argument of daemon processes
}

// seq is a number below 1000 that no other case running at the same time
// (the cases run in parallel) uses: it goes into the daemon marker.
func newAttackEnv(t *testing.T, seq int) attackEnv {
	t.Helper()
	root := t.TempDir()
	e := attackEnv{
		root: root, ws: filepath.Join(root, "ws"), home: filepath.Join(root, "home"),
		outside:  filepath.Join(root, "outside"),
		accepted: &atomic.Int64{},
	}
	for _, d := range []string{e.ws, e.home, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.secret = filepath.Join(e.home, "secret.txt")
	if err := os.WriteFile(e.secret, []byte("TOP-SECRET-CONTENT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.ws, "a.txt"), []byte("line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeEvilTar(t, filepath.Join(e.ws, "evil.tar"), e.home)
	// A fractional sleep length nobody else uses marks the daemons of this
	// case: this process, this case, and the clock.
	e.marker = fmt.Sprintf("%d.%03d%03d", 3000+os.Getpid()%1000, seq%1000, time.Now().Nanosecond()/1000%1000)
	// Listeners of the host nothing may reach: TCP on loopback, a unix
	// socket outside the workspace (a daemon's), an abstract unix socket.
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	e.udpPort = udp.LocalAddr().(*net.UDPAddr).Port
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			e.accepted.Add(1)
		}
	}()
	for _, addr := range [][2]string{
		{"tcp4", "127.0.0.1:0"},
		{"unix", filepath.Join(e.home, "daemon.sock")},
		{"unix", "@maestro-attack-" + e.marker},
	} {
		ln := listen(t, addr[0], addr[1], e.accepted)
		if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
			e.port = tcp.Port
		}
	}
	return e
}

// writeEvilTar writes a tar holding a symlink "l" to target (the attack
// extracts it and reads through it).
func writeEvilTar(t *testing.T, path, target string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// attackCase is one attack of issue 14 item 3. The command template may use
// {SECRET} (the secret file), {HOME_DIR} (its directory), {OUT} (the
// directory outside the workspace), {PORT} (the listener), {PID} (the test
// process, standing for Maestro) and {MARK} (the daemon marker).
type attackCase struct {
	name, command string
}

// attackCases are the attacks that got through the old fallback, each
// written so that it succeeds on an unconfined host (see the off control).
var attackCases = []attackCase{
	{"tilde dotdot read", "cat ~/../home/secret.txt"},
	{"HOME dotdot read", `cat "$HOME/../home/secret.txt"`},
	{"command substitution path", `cat "$(printf %s {HOME_DIR})/secret.txt"`},
	{"xargs reads paths from stdin", "echo {SECRET} | xargs cat"},
	{"attached short option write", "sort -o{OUT}/sorted a.txt"},
	{"sed r FILE", "sed 'r {SECRET}' a.txt"},
	{"sed w FILE", "sed -n 'w {OUT}/sed' a.txt"},
	{"awk getline", `awk 'BEGIN { while ((getline l < "{SECRET}") > 0) print l }'`},
	{"awk print redirection", `awk 'BEGIN { print "x" > "{OUT}/awk" }'`},
	{"bash /dev/tcp", "exec 3<>/dev/tcp/127.0.0.1/{PORT} && echo hi >&3"},
	// Landlock restricts UDP only from ABI 10: a datagram carries data out
	// (DNS to any resolver) when the network is denied.
	{"bash dev-udp", "echo hi > /dev/udp/127.0.0.1/{UDP}"},
	{"python UDP sendto", `python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"hi", ("127.0.0.1", {UDP}))'`},
	// io_uring's IORING_OP_SOCKET makes a socket without socket(2), out of
	// the seccomp filter's sight.
	{"UDP socket through io_uring", "python3 - udp {UDP} <<'PY'\n" + ioUringSocket + "PY"},
	{"unix socket through io_uring", "python3 - unix {HOME_DIR}/daemon.sock <<'PY'\n" + ioUringSocket + "PY"},
	{"python TCP connect", `python3 -c 'import socket; socket.create_connection(("127.0.0.1", {PORT}), 2)'`},
	{"unix socket outside the workspace", `python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect("{HOME_DIR}/daemon.sock")'`},
	{"abstract unix socket", `python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect("\0maestro-attack-{MARK}")'`},
	{"arithmetic injection", `x='a[$(cat {SECRET} >&2)]'; echo $((x))`},
	{"indirect expansion injection", `x='a[$(cat {SECRET} >&2)]'; echo ${!x}`},
	{"parent environ", `cat /proc/$PPID/environ /proc/{PID}/environ | tr '\0' '\n'`},
	{"tar-planted symlink", "tar xf evil.tar && cat l/secret.txt"},
	{"setsid daemon survives", "setsid sleep {MARK} >/dev/null 2>&1 < /dev/null & sleep 0.5; echo started"},
	// In bwrap, PID 1 is bubblewrap's init inside the sandbox's own PID
	// namespace; a parent outside it is what must be out of reach.
	{"signal the parent", "kill -CONT $PPID && [ $PPID -ne 1 ] && echo SIGNALED"},
	{"signal Maestro", "kill -CONT {PID} && echo SIGNALED"},
	{"git diff.external", `git init -q . && git config diff.external 'cp {SECRET} {OUT}/git #' && echo a > f && git add f && echo b > f && git diff`},
	{"write outside", "echo x > {OUT}/direct"},
	{"list outside", "ls {HOME_DIR} | sed 's/^/TOP-SECRET /'"},
	{"read /etc/shadow", "cat /etc/shadow | head -c 64 | sed 's/^/TOP-SECRET /'"},
	{"write /tmp shared with the host", "echo x > /tmp/maestro-attack-{MARK}"},
	// The helper's confined thread shares memory with its unconfined
	// threads: attaching to any thread of the parent is a way out. SEIZE
	// does not stop the tracee; the tracer's exit detaches.
	{"ptrace the parent (the helper)", `[ $PPID -ne 1 ] && python3 -c 'import ctypes,os; l=ctypes.CDLL(None); p=os.getppid(); ok=[t for t in range(p, p+32) if l.ptrace(0x4206, t, 0, 0) == 0]; print("ESCAPED ptrace attached to", ok) if ok else None'`},
}

// rootAttackCases need root's capabilities to succeed unconfined (CI
// runs as root): a sandboxed command must not keep them.
var rootAttackCases = []attackCase{
	{"raw socket (CAP_NET_RAW)", `python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print("ESCAPED raw socket")'`},
	{"CAP_NET_ADMIN or CAP_SYS_ADMIN kept", `capsh --has-p=cap_net_admin 2>/dev/null && echo ESCAPED net_admin; capsh --has-p=cap_sys_admin 2>/dev/null && echo ESCAPED sys_admin`},
}

// allAttackCases are attackCases plus rootAttackCases when the tests run
// as root.
func allAttackCases() []attackCase {
	if os.Geteuid() != 0 {
		return attackCases
	}
	return append(append([]attackCase{}, attackCases...), rootAttackCases...)
}

// ioUringSocket (python3 - udp PORT | unix PATH) creates a socket with
// io_uring's IORING_OP_SOCKET, then sends a datagram to 127.0.0.1:PORT or
// connects to the unix socket PATH with it.
const ioUringSocket = `import ctypes, mmap, struct, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
p = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 4, p)
if fd < 0: sys.exit("io_uring_setup: errno %d" % ctypes.get_errno())
sqe_n, cqe_n = struct.unpack_from("II", p, 0)
sq_tail, sq_mask, sq_array = struct.unpack_from("I", p, 44)[0], struct.unpack_from("I", p, 48)[0], struct.unpack_from("I", p, 64)[0]
cq_cqes = struct.unpack_from("I", p, 100)[0]
sq = mmap.mmap(fd, sq_array + sqe_n * 4, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
sqes = mmap.mmap(fd, sqe_n * 64, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0x10000000)
cq = mmap.mmap(fd, cq_cqes + cqe_n * 16, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0x8000000)
dom, typ = (socket.AF_UNIX, socket.SOCK_STREAM) if sys.argv[1] == "unix" else (socket.AF_INET, socket.SOCK_DGRAM)
sqe = bytearray(64); struct.pack_into("BBHiQQII", sqe, 0, 45, 0, 0, dom, typ, 0, 0, 0)
sqes[0:64] = bytes(sqe)
t = struct.unpack_from("I", sq, sq_tail)[0]
struct.pack_into("I", sq, sq_array + (t & struct.unpack_from("I", sq, sq_mask)[0]) * 4, 0)
struct.pack_into("I", sq, sq_tail, t + 1)
if libc.syscall(426, fd, 1, 1, 1, None, 0) < 0: sys.exit("io_uring_enter: errno %d" % ctypes.get_errno())
res = struct.unpack_from("i", cq, cq_cqes + 8)[0]
if res < 0: sys.exit("IORING_OP_SOCKET: errno %d" % -res)
s = socket.socket(fileno=res)
if sys.argv[1] == "unix": s.connect(sys.argv[2])
else: s.sendto(b"hi", ("127.0.0.1", int(sys.argv[2])))
print("socket made through io_uring and used")
`

func (e attackEnv) expand(command string) string {
	return strings.NewReplacer(
		"{SECRET}", e.secret, "{HOME_DIR}", e.home, "{OUT}", e.outside,
		"{PORT}", strconv.Itoa(e.port), "{UDP}", strconv.Itoa(e.udpPort), "{PID}", strconv.Itoa(os.Getpid()), "{MARK}", e.marker,
	).Replace(command)
}

// outcome is what an attack achieved; a blocked attack achieves nothing.
type outcome struct {
	rejected bool // refused by the policy before running
	leaks    []string
}

// runAttack runs one case like the Bash tool does (start, wait, remove the
// process group) and then looks for every effect an attack could have.
func runAttack(t *testing.T, sb *sandbox.Sandbox, e attackEnv, c attackCase) outcome {
	t.Helper()
	command := e.expand(c.command)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// HOME is the workspace in the sandbox; off mode gets it too so that
	// the control runs the same attacks.
	cmd, err := sb.Command(ctx, e.ws, command, sandbox.CommandOptions{Env: map[string]string{"HOME": e.ws}})
	if _, ok := errors.AsType[*sandbox.PolicyError](err); ok {
		return outcome{rejected: true}
	}
	if err != nil {
		t.Fatalf("Command(%q): %v", command, err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil && !errors.As(err, new(*exec.ExitError)) && !errors.Is(err, exec.ErrWaitDelay) {
		t.Fatalf("running %q: %v", command, err)
	}
	_ = sandbox.KillProcessGroup(cmd)
	var o outcome
	text := out.String()
	if strings.Contains(text, "TOP-SECRET") {
		o.leaks = append(o.leaks, "read a secret: "+firstLine(text))
	}
	if strings.Contains(text, fakeKeyValue) {
		o.leaks = append(o.leaks, "read Maestro's API key from its environ")
	}
	if strings.Contains(text, "ESCAPED") {
		o.leaks = append(o.leaks, "kept a privilege over the host: "+firstLine(text[strings.Index(text, "ESCAPED"):]))
	}
	if strings.Contains(text, "SIGNALED") {
		o.leaks = append(o.leaks, "signalled a process outside the sandbox")
	}
	if entries, _ := os.ReadDir(e.outside); len(entries) > 0 {
		o.leaks = append(o.leaks, fmt.Sprintf("wrote outside the workspace (%s)", entries[0].Name()))
	}
	if tmp := "/tmp/maestro-attack-" + e.marker; fileExists(tmp) {
		os.Remove(tmp)
		o.leaks = append(o.leaks, "wrote the host's /tmp")
	}
	// A connection the kernel completed may still be on its way to Accept.
	for deadline := time.Now().Add(300 * time.Millisecond); e.accepted.Load() == 0 && time.Now().Before(deadline); {
		waitABit()
	}
	if n := e.accepted.Load(); n > 0 {
		o.leaks = append(o.leaks, fmt.Sprintf("reached a listener of the host (%d connections)", n))
	}
	if pids := processesWithArg(t, e.marker); len(pids) > 0 {
		for _, p := range pids {
			p.Kill()
		}
		o.leaks = append(o.leaks, fmt.Sprintf("left %d process(es) running after the command", len(pids)))
	}
	return o
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// processesWithArg lists the live processes with arg in their command
// line, waiting briefly for ones being killed to go.
func processesWithArg(t *testing.T, arg string) []*os.Process {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var found []*os.Process
		for _, pid := range proctest.Processes(t, func(p proctest.Process) bool { return proctest.CommandLineHas(p.PID, arg) }) {
			if p, err := os.FindProcess(pid); err == nil {
				found = append(found, p)
			}
		}
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
		// Processes being killed take a moment to disappear from /proc.
		waitABit()
	}
}

// waitABit yields for a short while without time.Sleep (a timer on a
// channel).
func waitABit() { <-time.After(20 * time.Millisecond) }

// attackModes are the sandboxes the suite runs in: each must block every
// case.
func attackModes() []sandboxMode {
	return slices.DeleteFunc(limitedModes(sandbox.Config{}), func(m sandboxMode) bool { return m.name == "off" })
}

// TestAttacks runs every attack of issue 14 item 3 in every sandbox mode
// and asserts that nothing got through. The cases run in parallel (each
// has its own workspace, listeners and daemon marker): most of a case's
// time is waiting on its processes and for late connections.
func TestAttacks(t *testing.T) {
	if os.Getenv(fakeKeyVar) != fakeKeyValue {
		t.Fatalf("TestMain did not put the fake key in the environment")
	}
	for mi, m := range attackModes() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			sb := m.new(t)
			var blocked atomic.Int64
			cases := allAttackCases()
			// Cleanups run once every parallel case is done.
			t.Cleanup(func() { t.Logf("%s: %d of %d attacks blocked", m.name, blocked.Load(), len(cases)) })
			for ci, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					e := newAttackEnv(t, mi*100+ci)
					o := runAttack(t, sb, e, c)
					if len(o.leaks) > 0 {
						t.Errorf("%s: attack %q got through: %s", m.name, e.expand(c.command), strings.Join(o.leaks, "; "))
						return
					}
					blocked.Add(1)
				})
			}
		})
	}
}

// TestAttacksSucceedUnconfined is the control: with isolation off every
// case achieves its effect, so a blocked case above is the sandbox's doing.
func TestAttacksSucceedUnconfined(t *testing.T) {
	sb := sandboxtest.Off(t, sandbox.Config{})
	for ci, c := range allAttackCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newAttackEnv(t, ci)
			o := runAttack(t, sb, e, c)
			if o.rejected {
				t.Fatalf("attack %q was rejected by the policy with isolation off: the case does not test the sandbox", e.expand(c.command))
			}
			if len(o.leaks) == 0 {
				t.Errorf("attack %q achieved nothing with isolation off: the case does not test anything", e.expand(c.command))
			}
		})
	}
}

// TestBwrapWithoutHelperKillsDaemons: even without the helper, a setsid
// daemon does not outlive its bwrap command: --unshare-pid and
// --die-with-parent take the whole PID namespace down with it.
func TestBwrapWithoutHelperKillsDaemons(t *testing.T) {
	sb := sandboxtest.Bwrap(t, sandbox.Config{})
	if sb.Limited() {
		t.Fatal("a bwrap sandbox without HelperPath reports limits")
	}
	for _, c := range attackCases {
		if c.name != "setsid daemon survives" {
			continue
		}
		e := newAttackEnv(t, 0)
		if o := runAttack(t, sb, e, c); len(o.leaks) > 0 {
			t.Errorf("bwrap without helper: %s", strings.Join(o.leaks, "; "))
		}
		return
	}
	t.Fatal("the setsid daemon case is missing")
}

// TestWorkspaceHoldingMaestroHome: `maestro run` started in the home
// directory makes ~ the workspace, and ~/.maestro (model keys in
// config.yaml, session logs) lies inside it. A sandbox that binds the
// workspace read-write would hand both to the command; with Maestro's home
// in Config.Protected the command is refused in every isolating kind.
func TestWorkspaceHoldingMaestroHome(t *testing.T) {
	for _, m := range []struct {
		name string
		new  func(t *testing.T, cfg sandbox.Config) *sandbox.Sandbox
	}{
		{"bwrap", func(t *testing.T, cfg sandbox.Config) *sandbox.Sandbox {
			cfg.HelperPath = sandboxtest.Helper(t)
			return sandboxtest.Bwrap(t, cfg)
		}},
		{"landlock", func(t *testing.T, cfg sandbox.Config) *sandbox.Sandbox { return sandboxtest.Landlock(t, cfg) }},
	} {
		t.Run(m.name, func(t *testing.T) {
			home := t.TempDir()
			mhome := filepath.Join(home, ".maestro")
			if err := os.Mkdir(mhome, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mhome, "config.yaml"), []byte("providers: {anthropic: {api_key: TOP-SECRET-KEY}}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			sb := m.new(t, sandbox.Config{Protected: []string{mhome}})
			for _, ws := range []string{home, mhome} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cmd, err := sb.Command(ctx, ws, "cat ~/.maestro/config.yaml ~/config.yaml ~/../config.yaml", sandbox.CommandOptions{Env: map[string]string{"HOME": home}})
				if err == nil {
					out, _ := cmd.CombinedOutput()
					cancel()
					t.Errorf("workspace %s holding Maestro's home: the command ran (output %q)", ws, firstLine(string(out)))
					continue
				}
				cancel()
				if _, ok := errors.AsType[*sandbox.PolicyError](err); !ok || !strings.Contains(err.Error(), "MAESTRO_HOME") {
					t.Errorf("workspace %s: error %v, want a PolicyError saying how to fix it", ws, err)
				}
			}
			// A project directory beside the home, and a workspace inside
			// it (serve's tasks/<id>/work under the default data dir),
			// still work.
			for _, ws := range []string{filepath.Join(home, "proj"), filepath.Join(mhome, "tasks", "1", "work")} {
				if err := os.MkdirAll(ws, 0o755); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cmd, err := sb.Command(ctx, ws, "echo ok", sandbox.CommandOptions{})
				if err != nil {
					cancel()
					t.Fatalf("workspace %s refused: %v", ws, err)
				}
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil || strings.TrimSpace(string(out)) != "ok" {
					t.Fatalf("workspace %s: %q, %v", ws, out, err)
				}
			}
		})
	}
}

// TestConfinedCommandHasNoTerminal: `maestro run` in a terminal gives the
// helper the user's terminal as controlling terminal. A command that can
// open /dev/tty can push input into it with TIOCSTI (Landlock refuses that
// ioctl only from ABI 5, and many kernels still allow TIOCSTI), which the
// user's shell runs after Maestro exits. bwrap starts a new session; the
// landlock kind must too.
func TestConfinedCommandHasNoTerminal(t *testing.T) {
	for _, m := range attackModes() {
		t.Run(m.name, func(t *testing.T) {
			sb := m.new(t)
			ptm, pts := openPTY(t)
			ws := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd, err := sb.Command(ctx, ws, "exec 3</dev/tty && echo HAS-A-TERMINAL", sandbox.CommandOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The helper starts as Maestro would in a terminal: in a session
			// whose controlling terminal is the pty.
			cmd.SysProcAttr.Setpgid = false
			cmd.SysProcAttr.Setsid = true
			cmd.SysProcAttr.Setctty = true
			cmd.SysProcAttr.Ctty = 0
			cmd.Stdin = pts
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil && !errors.As(err, new(*exec.ExitError)) {
				t.Fatalf("running: %v", err)
			}
			_ = ptm
			if strings.Contains(out.String(), "HAS-A-TERMINAL") {
				t.Errorf("%s: the sandboxed command opened the user's terminal (/dev/tty): %q", m.name, out.String())
			}
		})
	}
}

// openPTY opens a pseudo-terminal pair (master, slave).
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	unlock := 0
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlocking the pty: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("pty number: %v", e)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pty's slave: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptm, pts
}
