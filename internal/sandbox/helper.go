package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The sandbox helper.
//
// Every command of a sandbox created with Config.HelperPath runs as
//
//	<helper> -test.run=^MaestroSandboxHelper$ <spec JSON> -- <program> <args>…
//
// where <helper> is Maestro's own executable re-executed with the
// program's environment as its own: nothing of Maestro's environment (the
// model keys) except in off mode, and nothing in the command line, which
// every user of the host can read. The helper, still unconfined, puts itself in a fresh pids
// cgroup (or sets RLIMIT_NPROC), sets RLIMIT_FSIZE and RLIMIT_CPU, becomes
// a child subreaper, confines one locked OS thread (no_new_privs, then
// Landlock in the landlock kind) and starts the program from that thread,
// so that only the program and its descendants carry the restrictions.
// When the program exits (or the helper gets SIGTERM), the helper kills
// every process left in the cgroup and every descendant it adopted
// (setsid daemons included), removes the cgroup and the command's private
// temporary directory, and exits with the program's status.
//
// The marker argument is also a test flag that matches no test: a test
// binary that does not call RunHelperIfRequested, re-executed by mistake,
// runs no test and prints no probe answer, so the probe in New fails
// instead of recursing.

// helperArg is argv[1] of a helper invocation.
const helperArg = "-test.run=^MaestroSandboxHelper$"

// helperProbe is the argument asking the helper to answer helperAnswer.
const (
	helperProbe  = "probe"
	helperAnswer = "maestro-sandbox-helper 1"
)

// tmpPrefix starts the name of a command's private temporary directory
// (landlock), followed by Maestro's pid.
const tmpPrefix = "maestro-sandbox-tmp-"

// helperFailure is the helper's exit code when it could not start the
// program (as a shell's "cannot execute").
const helperFailure = 126

// helperSpec is what the helper is asked to do for one command. It
// travels in the helper's command line, so it holds no secrets: the
// program's environment is the helper's own.
type helperSpec struct {
	// Cgroup, when set, is the pids cgroup to create and run the program
	// in; CgroupV2 says which hierarchy it belongs to.
	Cgroup   string `json:"cgroup,omitempty"`
	CgroupV2 bool   `json:"cgroup_v2,omitempty"`
	// Limits are applied to the program.
	Limits Limits `json:"limits,omitzero"`
	// Landlock, when set, confines the program.
	Landlock *landlockSpec `json:"landlock,omitempty"`
	// Supervise asks for the supervise mode (supervise.go), for a program
	// of Maestro's pid Parent; the fields above are then unused.
	Supervise bool `json:"supervise,omitempty"`
	Parent    int  `json:"parent,omitempty"`
	// Session (with Supervise) starts the program in a session of its
	// own, the terminal on its stdin its controlling terminal when Ctty,
	// and reports on fd 3 (SuperviseSession).
	Session bool `json:"session,omitempty"`
	Ctty    bool `json:"ctty,omitempty"`
}

// RunHelperIfRequested runs the sandbox helper and exits when this
// process was started as one (see Config.HelperPath); otherwise it
// returns at once. Call it first thing in main, and in TestMain of test
// packages that run commands through a helper (os.Executable is the test
// binary there). It also makes this binary the supervisor of the agent
// CLIs and MCP servers it starts (Supervise).
func RunHelperIfRequested() {
	helperInstalled.Store(true)
	if len(os.Args) < 2 || os.Args[1] != helperArg {
		return
	}
	os.Exit(runHelper(os.Args[2:]))
}

func helperFail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "maestro sandbox helper: "+format+"\n", args...)
	return helperFailure
}

// runHelper is the helper's main; it returns the exit code.
func runHelper(args []string) int {
	if len(args) == 1 && args[0] == helperProbe {
		fmt.Println(helperAnswer)
		return 0
	}
	if len(args) < 3 || args[1] != "--" {
		return helperFail("usage: %s <spec> -- program [args…]", helperArg)
	}
	var spec helperSpec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		return helperFail("decoding the spec: %v", err)
	}
	argv := args[2:]
	env := os.Environ()
	// SIGTERM is a cancelled call or Maestro's death (the helper's
	// parent-death signal); caught from here on, one that comes before
	// the program starts kills it as soon as it has.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if spec.Supervise && spec.Session {
		return runSessionSupervisor(argv, spec.Parent, spec.Ctty, sigs)
	}
	if spec.Supervise {
		return runSupervisor(argv, spec.Parent, sigs)
	}
	// Adopt orphaned descendants (setsid daemons) so they can be killed.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return helperFail("becoming a child subreaper: %v", err)
	}
	if spec.Landlock != nil {
		// Named after Maestro (the parent) so that a directory left by a
		// helper killed outright can be swept (sweepStale).
		tmp, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", tmpPrefix, os.Getppid()))
		if err != nil {
			return helperFail("creating the command's temporary directory: %v", err)
		}
		defer os.RemoveAll(tmp)
		env = setEnv(env, "TMPDIR", tmp)
		spec.Landlock.Write = append(spec.Landlock.Write, tmp)
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if spec.Landlock != nil {
		// A new session without a controlling terminal, as bwrap's
		// --new-session: the user's terminal (maestro run) would otherwise
		// take input pushed with TIOCSTI, which Landlock refuses only
		// from ABI 5. Descendants are still killed through the cgroup
		// and the subreaper.
		cmd.SysProcAttr.Setsid = true
	}

	limits := spec.Limits.withDefaults()
	cg, err := enterCgroup(spec, limits, cmd.SysProcAttr)
	if err != nil {
		return helperFail("%v", err)
	}
	if cg.fd >= 0 {
		defer unix.Close(cg.fd)
	}
	if err := setLimits(limits, cg.dir == ""); err != nil {
		return helperFail("%v", err)
	}

	if spec.Landlock != nil {
		err = startConfined(cmd, spec.Landlock)
	} else {
		err = cmd.Start()
	}
	cg.leave()
	if err != nil {
		cg.remove()
		return helperFail("starting %s: %v", argv[0], err)
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-sigs:
		// Kill the program (the whole cgroup, and the program itself when
		// there is none) and wait for it before reaping anything else:
		// killDescendants reaps with wait4(-1), which would take the
		// program's status from cmd.Wait (ECHILD).
		cg.kill()
		_ = cmd.Process.Kill()
		waitErr = <-done
	}
	cg.remove()
	killDescendants()
	return exitLike(waitErr)
}

// exitLike returns the exit code for the program's status; a program
// killed by a signal makes the helper die of the same signal.
func exitLike(err error) int {
	if err == nil {
		return 0
	}
	exit, ok := errors.AsType[*exec.ExitError](err)
	if !ok {
		return helperFail("waiting for the program: %v", err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := ws.Signal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		return 128 + int(sig)
	}
	return exit.ExitCode()
}

func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// setLimits sets the resource limits the program inherits. nproc says
// whether RLIMIT_NPROC must stand in for a pids cgroup.
func setLimits(l Limits, nproc bool) error {
	fsize := uint64(l.FileSizeBytes)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: fsize, Max: fsize}); err != nil {
		return fmt.Errorf("setting RLIMIT_FSIZE: %w", err)
	}
	// The soft limit sends SIGXCPU, the hard one SIGKILL a little later.
	cpu := uint64(l.CPUSeconds)
	if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: cpu, Max: cpu + 5}); err != nil {
		return fmt.Errorf("setting RLIMIT_CPU: %w", err)
	}
	if nproc {
		// RLIMIT_NPROC counts every task of the user, so the budget is
		// what already runs plus the command's share. It does not bind
		// uid 0.
		n := uint64(userTasks(os.Getuid()) + l.Processes)
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			return fmt.Errorf("setting RLIMIT_NPROC: %w", err)
		}
	}
	return nil
}

// helperCgroup is the helper's per-command cgroup (dir empty when none).
type helperCgroup struct {
	dir    string
	v2     bool
	fd     int  // v2: the cgroup directory, for clone3's CLONE_INTO_CGROUP
	joined bool // v1: the helper itself joined and must leave
}

// enterCgroup creates the command's pids cgroup and arranges for the
// program to be born in it: on v2 with CLONE_INTO_CGROUP, on v1 by joining
// it before the start (leave moves the helper back out afterwards, so its
// own threads never count against the command's budget).
func enterCgroup(spec helperSpec, l Limits, attr *syscall.SysProcAttr) (helperCgroup, error) {
	cg := helperCgroup{fd: -1}
	if spec.Cgroup == "" {
		return cg, nil
	}
	if err := os.Mkdir(spec.Cgroup, 0o755); err != nil {
		return cg, fmt.Errorf("creating the pids cgroup: %w", err)
	}
	cg.dir, cg.v2 = spec.Cgroup, spec.CgroupV2
	if err := os.WriteFile(filepath.Join(cg.dir, "pids.max"), []byte(strconv.Itoa(l.Processes)), 0); err != nil {
		cg.remove()
		return cg, fmt.Errorf("setting pids.max: %w", err)
	}
	if cg.v2 {
		fd, err := unix.Open(cg.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			cg.remove()
			return cg, fmt.Errorf("opening the pids cgroup: %w", err)
		}
		cg.fd = fd
		attr.UseCgroupFD, attr.CgroupFD = true, fd
		return cg, nil
	}
	if err := os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		cg.remove()
		return cg, fmt.Errorf("joining the pids cgroup: %w", err)
	}
	cg.joined = true
	return cg, nil
}

// leave moves the helper back to its parent cgroup (v1).
func (cg *helperCgroup) leave() {
	if !cg.joined {
		return
	}
	cg.joined = false
	_ = os.WriteFile(filepath.Join(filepath.Dir(cg.dir), "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
}

// kill kills every process of the cgroup.
func (cg *helperCgroup) kill() {
	if cg.dir != "" {
		cg.leave()
		_ = killCgroup(cg.dir, cg.v2)
	}
}

// remove kills what is left in the cgroup and removes it.
func (cg *helperCgroup) remove() {
	cg.kill()
	cg.dir = ""
}

// descendantsTimeout bounds killDescendants.
const descendantsTimeout = 5 * time.Second

// killDescendants kills and reaps every descendant of the helper: the
// program's leftovers, including setsid daemons, which were reparented to
// the helper because it is a child subreaper.
func killDescendants() {
	self := os.Getpid()
	deadline := time.Now().Add(descendantsTimeout)
	for {
		reap()
		pids := descendants(self)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		pause(2 * time.Millisecond)
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// descendants lists the live descendants of pid from /proc.
func descendants(root int) []int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// probeHelper checks that path runs the sandbox helper.
func probeHelper(ctx context.Context, path string) error {
	out, err := runProbe(ctx, path, helperArg, helperProbe)
	if err != nil {
		return fmt.Errorf("running %s as the sandbox helper: %w", path, err)
	}
	if strings.TrimSpace(out) != helperAnswer {
		return fmt.Errorf("%s does not run the sandbox helper (its main must call sandbox.RunHelperIfRequested first)", path)
	}
	return nil
}

// sweepStale removes what helpers of Maestro processes that no longer run
// left behind when they were killed outright: per-command cgroups (their
// processes are killed first) and private temporary directories. Names
// carry the owning Maestro's pid.
func sweepStale(cg *cgroupRoot) {
	dead := func(name, prefix string) bool {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			return false
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			return false
		}
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	if cg != nil {
		if ents, err := os.ReadDir(cg.dir); err == nil {
			for _, e := range ents {
				if e.IsDir() && dead(e.Name(), "maestro-sandbox-") {
					_ = killCgroup(filepath.Join(cg.dir, e.Name()), cg.v2)
				}
			}
		}
	}
	if ents, err := os.ReadDir(os.TempDir()); err == nil {
		for _, e := range ents {
			if e.IsDir() && dead(e.Name(), tmpPrefix) {
				// RemoveAll does not follow symbolic links the command left.
				_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
			}
		}
	}
}
