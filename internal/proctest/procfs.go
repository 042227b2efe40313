//go:build linux

package proctest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Process is what a test reads of a process from /proc/<pid>/stat.
type Process struct {
	PID, PPID, Pgrp int
	// State is stat's one-letter state: R, S, D, … Z (zombie), X (dead).
	State string
}

// Stat reads pid's /proc/<pid>/stat. ok is false when the process has
// gone or has exited (a zombie not yet reaped); p is filled as far as
// stat could be read.
func Stat(pid int) (p Process, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Process{PID: pid}, false
	}
	// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return Process{PID: pid}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 3 {
		return Process{PID: pid}, false
	}
	p = Process{PID: pid, State: f[0]}
	p.PPID, _ = strconv.Atoi(f[1])
	p.Pgrp, _ = strconv.Atoi(f[2])
	return p, p.State != "Z" && p.State != "X"
}

// Processes lists the live processes (see [Stat]) for which keep is true,
// in /proc's order. A process that goes while it is read is left out.
func Processes(tb testing.TB, keep func(Process) bool) []int {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatalf("list processes: %v", err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := Stat(pid); ok && keep(p) {
			out = append(out, pid)
		}
	}
	return out
}

// CommandLineHas reports whether pid's command line (its arguments joined
// by NUL bytes) contains s; false when the process has gone.
func CommandLineHas(pid int, s string) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(s))
}
