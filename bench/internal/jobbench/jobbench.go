// Package jobbench is what bench/queue (Maestro's queue) and bench/river
// (River) share so that their figures compare: the JSON result line, the
// paced claim-latency measurement and its quantiles. It imports only the
// standard library, so that bench/river, a module of its own, can use it
// without taking in Maestro's dependencies.
package jobbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Result is one measured configuration, one JSON line of the results file.
type Result struct {
	System   string  `json:"system"`  // "maestro" (pool), "maestro-store" (bare loop) or "river"
	Backend  string  `json:"backend"` // "sqlite" or "postgres"
	Workers  int     `json:"workers"`
	Jobs     int     `json:"jobs"`
	Seconds  float64 `json:"seconds"`
	JobsPerS float64 `json:"jobs_per_s"`
	LatJobs  int     `json:"lat_jobs"`
	LatRate  float64 `json:"lat_rate"` // claim-latency jobs enqueued per second
	LatP50US float64 `json:"lat_p50_us"`
	LatP99US float64 `json:"lat_p99_us"`
	LatMaxUS float64 `json:"lat_max_us"`
	// FetchCooldownUS is River's FetchCooldown setting (River rows only).
	FetchCooldownUS float64 `json:"fetch_cooldown_us,omitempty"`
	// Completed counts the jobs the system recorded as done afterwards
	// (a check).
	Completed int64 `json:"completed"`
	// CPU time per job of the throughput phase, in µs: of the bench
	// process (the queue's client side) and of the PostgreSQL server (all
	// its processes; 0 when the bench was not given its postmaster.pid).
	// On a shared machine these move far less than jobs/s.
	ClientCPUUSPerJob float64 `json:"client_cpu_us_per_job,omitempty"`
	ServerCPUUSPerJob float64 `json:"server_cpu_us_per_job,omitempty"`
}

// CPU is the CPU time used so far by this process and by a PostgreSQL
// server.
type CPU struct{ Client, Server time.Duration }

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// ReadCPU reads this process's CPU time and, when pidfile names a
// postmaster.pid, the server's: the postmaster's own, that of the children
// it has reaped, and that of its live children (backends, autovacuum).
func ReadCPU(pidfile string) (CPU, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPU{}, fmt.Errorf("read the process's CPU time: %w", err)
	}
	c := CPU{Client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if pidfile == "" {
		return c, nil
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return c, fmt.Errorf("read the server's CPU time: %w", err)
	}
	pid, _, _ := strings.Cut(string(b), "\n")
	pid = strings.TrimSpace(pid)
	own, err := procTicks(pid, true)
	if err != nil {
		return c, err
	}
	c.Server = own
	children, err := os.ReadFile(filepath.Join("/proc", pid, "task", pid, "children"))
	if err != nil {
		return c, fmt.Errorf("read the server's CPU time: %w", err)
	}
	for _, child := range strings.Fields(string(children)) {
		t, err := procTicks(child, false)
		if err == nil { // a child that just exited is counted as reaped later
			c.Server += t
		}
	}
	return c, nil
}

// procTicks is the CPU time of process pid from /proc/PID/stat: user and
// system time, plus that of its reaped children with reaped.
func procTicks(pid string, reaped bool) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of process %s: %w", pid, err)
	}
	// Fields after the command name in parentheses: state is field 3,
	// utime 14, stime 15, cutime 16, cstime 17.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n := 2
	if reaped {
		n = 4
	}
	if len(f) < 11+n {
		return 0, fmt.Errorf("read the CPU time of process %s: short /proc stat line", pid)
	}
	var ticks int64
	for _, v := range f[11 : 11+n] {
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read the CPU time of process %s: %w", pid, err)
		}
		ticks += t
	}
	return time.Duration(ticks) * clockTick, nil
}

// CPUPerJob sets the CPU fields from readings before and after jobs jobs.
func (r *Result) CPUPerJob(before, after CPU, jobs int) {
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(jobs) }
	r.ClientCPUUSPerJob = us(after.Client - before.Client)
	r.ServerCPUUSPerJob = us(after.Server - before.Server)
}

// Throughput sets the throughput fields of jobs done in elapsed.
func (r *Result) Throughput(jobs int, elapsed time.Duration) {
	r.Jobs, r.Seconds, r.JobsPerS = jobs, elapsed.Seconds(), float64(jobs)/elapsed.Seconds()
}

// Append writes r as one JSON line to the file at path (appending), or to
// stdout when path is empty.
func Append(stdout io.Writer, path string, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode the result: %w", err)
	}
	b = append(b, '\n')
	if path == "" {
		_, err = stdout.Write(b)
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open the results file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write the results file: %w", err)
	}
	return f.Close()
}

// Latency measures claim latency: jobs numbered 1…n are enqueued at a
// fixed rate, and a job's latency is the time from just before its enqueue
// call to the start of its run (Started).
type Latency struct {
	mu         sync.Mutex
	enq, start []time.Time
}

// Enqueue enqueues n jobs at rate per second with enqueue(seq), seq
// counting from 1, timing each; it returns at the first error.
func (l *Latency) Enqueue(ctx context.Context, n int, rate float64, enqueue func(ctx context.Context, seq int) error) error {
	l.mu.Lock()
	l.enq, l.start = make([]time.Time, n), make([]time.Time, n)
	l.mu.Unlock()
	ticker := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer ticker.Stop()
	for i := range n {
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		now := time.Now()
		l.mu.Lock()
		l.enq[i] = now
		l.mu.Unlock()
		if err := enqueue(ctx, i+1); err != nil {
			return err
		}
	}
	return nil
}

// Started records that job seq started now; only its first start counts
// (a retried job keeps its first).
func (l *Latency) Started(seq int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := seq - 1; i >= 0 && i < len(l.start) && l.start[i].IsZero() {
		l.start[i] = now
	}
}

// Quantiles sets r's latency fields (p50, p99, max) and LatJobs and
// LatRate; a job that never started is an error.
func (l *Latency) Quantiles(r *Result, rate float64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	lat := make([]time.Duration, len(l.enq))
	for i := range l.enq {
		if l.start[i].IsZero() {
			return fmt.Errorf("claim-latency job %d never started", i+1)
		}
		lat[i] = l.start[i].Sub(l.enq[i])
	}
	if len(lat) == 0 {
		return fmt.Errorf("no claim-latency jobs")
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	r.LatJobs, r.LatRate = len(lat), rate
	r.LatP50US, r.LatP99US, r.LatMaxUS = pct(0.50), pct(0.99), pct(1)
	return nil
}
