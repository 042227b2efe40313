// Package binpages drops the running executable's pages from this
// process's page tables once start-up is over, so that a long-lived idle
// process (maestro headless) is resident only for what it touches next.
//
// Why (bench/README.md, "headless: resident memory"): the few hundred
// package initialisers that run at start touch code and read-only data
// all over the binary, and the kernel maps 64 KiB around each first touch
// (fault-around). Most of the ~40 MiB that start-up leaves mapped is never
// touched again. MADV_DONTNEED on the binary's read-only mappings unmaps
// those pages without evicting them from the page cache: a later touch is
// a minor fault, with no I/O. MADV_NOHUGEPAGE keeps a later touch from
// mapping a whole 2 MiB folio of the page cache at once. madvise(MADV_RANDOM), which turns off
// read-ahead, was measured and does not turn off fault-around (kernel
// 6.18), so it is not used.
//
// Only mappings of the executable that are not writable are released:
// unmapping a written private page would lose the write.
package binpages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Mapping is one mapping of the executable from /proc/PID/smaps.
type Mapping struct {
	Start, End uintptr
	Perms      string // "r-xp", "r--p", …
	Rss        int64  // bytes resident
	Anonymous  int64  // bytes of private copies (written pages)
}

// Release unmaps this process's pages of the executable's read-only
// mappings (text, rodata, pclntab) and returns the mappings it released.
// It leaves a mapping that holds private copies: a dynamically linked
// binary's relocated, then write-protected data (RELRO: the GOT) would
// lose its relocations. It does nothing while a debugger traces the
// process: a breakpoint is such a private copy of a text page.
func Release() ([]Mapping, error) {
	traced, err := traced()
	if err != nil {
		return nil, err
	}
	if traced {
		return nil, nil
	}
	ms, err := Executable()
	if err != nil {
		return nil, err
	}
	var out []Mapping
	for _, m := range ms {
		if strings.Contains(m.Perms, "w") || m.Anonymous > 0 {
			continue
		}
		// No huge mappings first: where the page cache holds the binary
		// in 2 MiB folios, a touch would map the whole folio again.
		// Kernels without transparent huge pages refuse the advice.
		if errno := madvise(m, syscall.MADV_NOHUGEPAGE); errno != 0 && errno != syscall.EINVAL {
			return out, fmt.Errorf("advise no huge pages for the executable's pages %#x-%#x: %w", m.Start, m.End, errno)
		}
		if errno := madvise(m, syscall.MADV_DONTNEED); errno != 0 {
			return out, fmt.Errorf("release the executable's pages %#x-%#x: %w", m.Start, m.End, errno)
		}
		out = append(out, m)
	}
	return out, nil
}

func madvise(m Mapping, advice int) syscall.Errno {
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.Start, m.End-m.Start, uintptr(advice))
	return errno
}

// Executable lists the mappings of the running executable.
func Executable() ([]Mapping, error) {
	return executableOf("self")
}

func executableOf(pid string) ([]Mapping, error) {
	exe, err := os.Readlink("/proc/" + pid + "/exe")
	if err != nil {
		return nil, fmt.Errorf("find the executable of process %s: %w", pid, err)
	}
	data, err := os.ReadFile("/proc/" + pid + "/smaps")
	if err != nil {
		return nil, fmt.Errorf("read the mappings of process %s: %w", pid, err)
	}
	return parseSmaps(data, exe), nil
}

// parseSmaps returns the mappings of file exe in the text of
// /proc/PID/smaps: a header line "start-end perms offset dev inode   path"
// per mapping, then "Key: value" lines. A file replaced while it runs is
// listed with " (deleted)" after its path.
func parseSmaps(data []byte, exe string) []Mapping {
	var out []Mapping
	var cur *Mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			cur = nil
			if len(f) < 6 {
				continue
			}
			if path := strings.Join(f[5:], " "); path != exe && path != exe+" (deleted)" {
				continue
			}
			lo, hi, ok := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || end <= start {
				continue
			}
			out = append(out, Mapping{Start: uintptr(start), End: uintptr(end), Perms: f[1]})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil || len(f) != 3 || f[2] != "kB" {
			continue
		}
		switch f[0] {
		case "Rss:":
			cur.Rss = kib(f[1])
		case "Anonymous:":
			cur.Anonymous = kib(f[1])
		}
	}
	return out
}

// traced reports whether a debugger is attached (TracerPid in
// /proc/self/status).
func traced() (bool, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, fmt.Errorf("read the process status: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	return false, nil
}

// Usage is the resident memory of a process, split as in
// bench/README.md ("headless: resident memory"), in bytes.
type Usage struct {
	VmRSS, VmHWM int64 // resident now, and the most ever resident
	Anon         int64 // anonymous: heap, stacks (RssAnon)
	Text         int64 // the executable's code
	ReadOnly     int64 // the executable's rodata and pclntab
}

// ProcessUsage reads the resident memory of process pid from
// /proc/PID/status and /proc/PID/smaps.
func ProcessUsage(pid int) (Usage, error) {
	var u Usage
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return u, fmt.Errorf("read the status of process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(status)) {
		for name, dst := range map[string]*int64{"VmRSS:": &u.VmRSS, "VmHWM:": &u.VmHWM, "RssAnon:": &u.Anon} {
			if v, ok := strings.CutPrefix(line, name); ok {
				*dst = kib(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			}
		}
	}
	ms, err := executableOf(strconv.Itoa(pid))
	if err != nil {
		return u, err
	}
	for _, m := range ms {
		switch {
		case strings.Contains(m.Perms, "x"):
			u.Text += m.Rss
		case !strings.Contains(m.Perms, "w"):
			u.ReadOnly += m.Rss
		}
	}
	return u, nil
}

// kib parses a count of KiB into bytes (0 when malformed).
func kib(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}
