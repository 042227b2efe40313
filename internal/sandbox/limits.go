package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits bound what one command (its whole process tree) may use. They
// apply in every kind whose commands run through the helper (see
// Config.HelperPath). A zero field takes its default.
type Limits struct {
	// Processes caps the processes and threads of one command: the pids
	// cgroup's pids.max when a pids cgroup is writable here, else
	// RLIMIT_NPROC above what the user already runs (RLIMIT_NPROC does not
	// bind uid 0, so as root only the cgroup protects). Default 512.
	Processes int
	// FileSizeBytes is RLIMIT_FSIZE: no file written by the command may
	// grow beyond it. Default 1 GiB.
	FileSizeBytes int64
	// CPUSeconds is RLIMIT_CPU for each process of the command. Default
	// 600 (the Bash tool's longest timeout).
	CPUSeconds int
}

// Default limits.
const (
	DefaultProcessLimit  = 512
	DefaultFileSizeLimit = 1 << 30
	DefaultCPULimit      = 600
)

func (l Limits) withDefaults() Limits {
	if l.Processes <= 0 {
		l.Processes = DefaultProcessLimit
	}
	if l.FileSizeBytes <= 0 {
		l.FileSizeBytes = DefaultFileSizeLimit
	}
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = DefaultCPULimit
	}
	return l
}

// cgroupRoot is where per-command pids cgroups are made: a directory of
// the pids hierarchy Maestro may create children in.
type cgroupRoot struct {
	dir string // the parent of the per-command cgroups
	v2  bool   // unified hierarchy (cgroup.kill exists)
}

// findCgroupRoot finds a writable pids cgroup below Maestro's own: on
// cgroup v1 the pids controller's hierarchy, on cgroup v2 Maestro's cgroup
// when "pids" is enabled in its subtree_control (a delegated subtree). It
// proves the directory writable by creating and removing a child.
func findCgroupRoot() (cgroupRoot, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupRoot{}, fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	var v1path, v2path string
	hasV2 := false
	for line := range strings.SplitSeq(strings.TrimSpace(string(self)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2path, hasV2 = parts[2], true
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "pids" {
				v1path = parts[2]
			}
		}
	}
	var root cgroupRoot
	var st unix.Statfs_t
	switch {
	case v1path != "" && fileIsPresent("/sys/fs/cgroup/pids/cgroup.procs"):
		root = cgroupRoot{dir: filepath.Join("/sys/fs/cgroup/pids", v1path)}
	case hasV2 && unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC:
		dir := filepath.Join("/sys/fs/cgroup", v2path)
		ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if err != nil || !slices.Contains(strings.Fields(string(ctl)), "pids") {
			return cgroupRoot{}, fmt.Errorf("cgroup v2: the pids controller is not enabled for children of %s (delegate it with cgroup.subtree_control)", dir)
		}
		root = cgroupRoot{dir: dir, v2: true}
	default:
		return cgroupRoot{}, errors.New("no pids cgroup controller is mounted")
	}
	probe, err := root.newName()
	if err != nil {
		return cgroupRoot{}, err
	}
	if err := os.Mkdir(probe, 0o755); err != nil {
		return cgroupRoot{}, fmt.Errorf("the pids cgroup %s is not writable: %w", root.dir, err)
	}
	defer os.Remove(probe)
	if !fileIsPresent(filepath.Join(probe, "pids.max")) {
		return cgroupRoot{}, fmt.Errorf("a child of %s has no pids.max", root.dir)
	}
	return root, nil
}

func fileIsPresent(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// newName returns the path of a fresh per-command cgroup (not created).
// The name carries Maestro's pid so that leftovers can be told apart.
func (r cgroupRoot) newName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("naming a cgroup: %w", err)
	}
	return filepath.Join(r.dir, fmt.Sprintf("maestro-sandbox-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))), nil
}

// cgroupKillTimeout bounds killing the processes of one cgroup.
const cgroupKillTimeout = 5 * time.Second

// killCgroup kills every process in the cgroup dir until it is empty and
// removes it. A cgroup that does not exist is not an error.
func killCgroup(dir string, v2 bool) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if v2 {
		// cgroup.kill kills the whole subtree atomically (Linux 5.14+).
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	}
	deadline := time.Now().Add(cgroupKillTimeout)
	for {
		pids, err := cgroupPids(dir)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("listing the processes of %s: %w", dir, err)
		}
		if len(pids) == 0 {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("removing the cgroup %s: %w", dir, err)
			}
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("killing the processes of %s: %d still there after %s", dir, len(pids), cgroupKillTimeout)
		}
		// Killed processes leave the cgroup once the kernel has torn
		// them down; give it a moment.
		pause(2 * time.Millisecond)
	}
}

// pause blocks for d (a timer; used in retry loops of real processes).
func pause(d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}

func cgroupPids(dir string) ([]int, error) {
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, sc.Err()
}

// userTasks counts the tasks (threads included, as RLIMIT_NPROC does) of
// uid.
func userTasks(uid int) int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + d.Name() + "/status")
		if err != nil {
			continue
		}
		var owner, threads int
		for line := range strings.SplitSeq(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					owner, _ = strconv.Atoi(f[0])
				}
			} else if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if owner == uid {
			n += max(threads, 1)
		}
	}
	return n
}
