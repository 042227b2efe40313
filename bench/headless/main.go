// Command headless measures `maestro headless` as an embedder sees it, each
// figure beside a baseline measured in the same run:
//
//   - spawn → ready: time from starting the process to reading its first
//     line (ready), median of N runs, against spawning /bin/true;
//   - hello → hello_ok: round trip over the pipes of one process, against
//     a line echoed by cat (the pipe floor);
//   - sustained response_chunk rate of a long replay answer to a fast and
//     to a slow reader, with the process's resident memory (VmRSS) at ready
//     and at its peak: with backpressure the slow reader slows the agent
//     down instead of growing memory.
//
// Run it from the repository root:
//
//	go run ./bench/headless -bin ./bin/maestro
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/bench/internal/benchproc"
	"github.com/maestro-run/maestro/internal/binpages"
	"github.com/maestro-run/maestro/internal/providers"
)

func main() {
	bin := flag.String("bin", "./bin/maestro", "the maestro binary")
	runs := flag.Int("n", 20, "spawn runs")
	hellos := flag.Int("hellos", 500, "hello round trips")
	chunks := flag.Int("chunks", 200_000, "response_chunk frames in the streaming scenario")
	base := flag.String("base", "", "a baseline maestro binary for the memory rows (measured in alternating rounds)")
	rounds := flag.Int("rounds", 3, "memory rounds per binary")
	memOnly := flag.Bool("memory", false, "print only the memory rows")
	flag.Parse()
	if err := run(*bin, *base, *runs, *hellos, *chunks, *rounds, *memOnly); err != nil {
		fmt.Fprintln(os.Stderr, "bench/headless:", err)
		os.Exit(1)
	}
}

func run(bin, base string, runs, hellos, chunks, rounds int, memOnly bool) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	bin = abs
	tmp, err := os.MkdirTemp("", "maestro-bench-headless-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// The workspace and Maestro's home are siblings: maestro refuses a
	// workspace that holds its home.
	env := providers.WithoutModel(os.Environ(), filepath.Join(tmp, "home"))
	ws := filepath.Join(tmp, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return err
	}
	if base != "" {
		if base, err = filepath.Abs(base); err != nil {
			return err
		}
	}
	if memOnly {
		return memory(bin, base, rounds, ws, env, tmp)
	}

	fmt.Println("### spawn → ready")
	fmt.Println()
	fmt.Println("| what | runs | median | p90 |")
	fmt.Println("|---|---|---|---|")
	// The three are interleaved so that load from other processes weighs
	// on each alike.
	var spawn, version, ready []time.Duration
	for range runs {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			return err
		}
		spawn = append(spawn, time.Since(start))
		start = time.Now()
		if err := exec.Command(bin, "version").Run(); err != nil {
			return err
		}
		version = append(version, time.Since(start))
		d, err := spawnToReady(bin, ws, env)
		if err != nil {
			return err
		}
		ready = append(ready, d)
	}
	row("baseline: `/bin/true` spawn and exit", spawn)
	row("reference: `maestro version` spawn and exit", version)
	row("`maestro headless`: spawn → `ready` line", ready)
	fmt.Println()
	fmt.Println("Target: median < 30 ms.")
	fmt.Println()

	fmt.Println("### hello → hello_ok round trip")
	fmt.Println()
	fmt.Println("| what | round trips | median | p90 | p99 |")
	fmt.Println("|---|---|---|---|---|")
	floor, err := roundTrips([]string{"cat"}, nil, hellos, "", `{"type":"hello"}`, `{"type":"hello"}`)
	if err != nil {
		return err
	}
	rt, err := roundTrips([]string{bin, "headless", "--workspace", ws}, env, hellos, `"type":"session_info"`,
		`{"type":"hello","protocol_version":"2026-04-02","client_info":{"name":"bench"},"opt_out_notifications":["connection_info"]}`,
		`{"type":"hello_ok"`)
	if err != nil {
		return err
	}
	row3("baseline: a line echoed by `cat` over pipes", floor)
	row3("`maestro headless`: hello → hello_ok", rt)
	fmt.Println()

	if err := memory(bin, base, rounds, ws, env, tmp); err != nil {
		return err
	}

	fmt.Println("### sustained response_chunk rate")
	fmt.Println()
	scen := filepath.Join(tmp, "stream.json")
	if err := writeScenario(scen, chunks); err != nil {
		return err
	}
	fmt.Printf("One replay answer of %d chunks (~%d bytes of frames), session log on disk, approval mode auto.\n\n", chunks, chunks*100)
	fmt.Println("| reader | chunks/s | VmRSS at ready | peak VmRSS |")
	fmt.Println("|---|---|---|---|")
	for _, slow := range []bool{false, true} {
		res, err := stream(bin, ws, env, scen, chunks, slow)
		if err != nil {
			return err
		}
		name := "fast (discards lines)"
		if slow {
			name = "slow (parses each line, pauses 10 ms every 1,000 lines)"
		}
		fmt.Printf("| %s | %.0f | %.1f MB | %.1f MB |\n", name, res.rate, res.readyRSS, res.peakRSS)
	}
	fmt.Println()
	return nil
}

// spawnToReady starts maestro headless, times the first line, then closes
// stdin and waits for a clean exit.
func spawnToReady(bin, ws string, env []string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "headless", "--workspace", ws)
	cmd.Env = env
	start := time.Now()
	stdin, stdout, err := benchproc.StartPiped(cmd)
	if err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	d := time.Since(start)
	if err != nil || !strings.HasPrefix(line, `{"type":"ready"`) {
		return 0, fmt.Errorf("first line %q: %v", line, err)
	}
	stdin.Close()
	go io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("maestro headless exit: %w", err)
	}
	return d, nil
}

// roundTrips starts argv, waits for a line containing startMarker (if
// any), then sends line n times, each time reading until a line starting
// with want.
func roundTrips(argv, env []string, n int, startMarker, line, want string) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = env
	}
	stdin, stdout, err := benchproc.StartPiped(cmd)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(stdout)
	readUntil := func(marker string, prefix bool) error {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("%s: %w", argv[0], err)
			}
			if (prefix && strings.HasPrefix(l, marker)) || (!prefix && strings.Contains(l, marker)) {
				return nil
			}
		}
	}
	if startMarker != "" {
		if err := readUntil(startMarker, false); err != nil {
			return nil, err
		}
	}
	var out []time.Duration
	for range n {
		start := time.Now()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			return nil, err
		}
		if err := readUntil(want, true); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	stdin.Close()
	go io.Copy(io.Discard, br)
	return out, cmd.Wait()
}

// writeScenario writes a replay scenario whose only frame streams n chunks.
func writeScenario(path string, n int) error {
	words := make([]string, n)
	for i := range words {
		words[i] = "tok" + strconv.Itoa(i%10) + " "
	}
	s := map[string]any{
		"schemaVersion": "evalops.maestro.scripted-scenario.v1",
		"id":            "stream",
		"description":   "one long streamed answer",
		"metadata":      map[string]any{"recordedAt": "2026-01-01T00:00:00Z", "toolsExpected": []string{}},
		"frames": []any{map[string]any{"index": 0, "statements": []any{
			map[string]any{"kind": "text", "chunks": words},
			map[string]any{"kind": "end", "reason": "complete"},
		}}},
	}
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

type streamResult struct {
	rate              float64
	readyRSS, peakRSS float64
}

// stream plays the long scenario and reads it fast or slowly, sampling
// the process's VmRSS.
func stream(bin, ws string, env []string, scenario string, chunks int, slow bool) (streamResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "headless", "--workspace", ws, "--replay", scenario, "--approval-mode", "auto", "--sandbox", "off")
	cmd.Env = env
	stdin, stdout, err := benchproc.StartPiped(cmd)
	if err != nil {
		return streamResult{}, err
	}
	br := bufio.NewReaderSize(stdout, 64<<10)
	if _, err := br.ReadString('\n'); err != nil {
		return streamResult{}, err
	}
	var res streamResult
	res.readyRSS = rssMB(cmd.Process.Pid)
	stopPeak := samplePeak(cmd.Process.Pid, 20*time.Millisecond)
	if _, err := io.WriteString(stdin, `{"type":"prompt","content":"stream"}`+"\n"); err != nil {
		return res, err
	}
	start := time.Now()
	seen := 0
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return res, fmt.Errorf("read: %w", err)
		}
		if bytes.HasPrefix(line, []byte(`{"type":"response_chunk"`)) {
			seen++
		}
		if slow {
			var v map[string]any
			if err := json.Unmarshal(line, &v); err != nil {
				return res, err
			}
			if n%1000 == 999 {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if bytes.HasPrefix(line, []byte(`{"type":"response_end"`)) {
			break
		}
	}
	elapsed := time.Since(start)
	peak := stopPeak()
	stdin.Close()
	go io.Copy(io.Discard, br)
	if err := cmd.Wait(); err != nil {
		return res, fmt.Errorf("maestro headless exit: %w", err)
	}
	if seen != chunks {
		return res, errors.New("missing chunks: read " + strconv.Itoa(seen))
	}
	res.rate = float64(seen) / elapsed.Seconds()
	res.peakRSS = float64(peak) / (1 << 20)
	return res, nil
}

// rssMB reads VmRSS of a process, in MiB.
func rssMB(pid int) float64 { return procStatus(pid)["VmRSS"] }

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := len(s) * p / 100
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func row(name string, d []time.Duration) {
	fmt.Printf("| %s | %d | %s | %s |\n", name, len(d), ms(pct(d, 50)), ms(pct(d, 90)))
}

func row3(name string, d []time.Duration) {
	fmt.Printf("| %s | %d | %s | %s | %s |\n", name, len(d), ms(pct(d, 50)), ms(pct(d, 90)), ms(pct(d, 99)))
}

// memory prints the resident memory of `maestro headless` (issue 22's
// rows) for this binary and, when base is set, a baseline binary, in
// alternating rounds: idle after hello → hello_ok once start-up has
// settled, and after four short prompts of a replay scenario, each split
// into anonymous memory (heap, stacks), the binary's text and its rodata
// + pclntab (internal/binpages.ProcessUsage); the highest VmRSS sampled
// from hello_ok to the fourth response_end; VmHWM, the most ever resident
// (start-up included); spawn → ready; and the CPU time and minor faults of
// the four prompts.
func memory(bin, base string, rounds int, ws string, env []string, tmp string) error {
	scen := filepath.Join(tmp, "four.json")
	frames := make([]any, 4)
	for i := range frames {
		frames[i] = map[string]any{"index": i, "statements": []any{
			map[string]any{"kind": "text", "chunks": []string{"short ", "answer ", strconv.Itoa(i)}},
			map[string]any{"kind": "end", "reason": "complete"},
		}}
	}
	data, err := json.Marshal(map[string]any{
		"schemaVersion": "evalops.maestro.scripted-scenario.v1", "id": "four", "description": "four short answers",
		"metadata": map[string]any{"recordedAt": "2026-01-01T00:00:00Z", "toolsExpected": []string{}},
		"frames":   frames,
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(scen, data, 0o644); err != nil {
		return err
	}
	type named struct{ label, bin string }
	bins := []named{{"this binary", bin}}
	if base != "" {
		bins = []named{{"baseline `" + filepath.Base(base) + "`", base}, {"this binary", bin}}
	}
	results := make([][]memRun, len(bins))
	for range rounds {
		for i, b := range bins {
			r, err := memoryRun(b.bin, ws, env, scen)
			if err != nil {
				return err
			}
			results[i] = append(results[i], r)
		}
	}
	fmt.Printf("### resident memory (MiB), median of %d round(s)\n\n", rounds)
	fmt.Println("| binary | when | VmRSS | anonymous (heap, stacks) | binary text | binary rodata + pclntab |")
	fmt.Println("|---|---|---:|---:|---:|---:|")
	for i, b := range bins {
		for _, when := range []struct {
			name string
			get  func(memRun) binpages.Usage
		}{{"idle after hello", func(r memRun) binpages.Usage { return r.idle }}, {"after four short prompts", func(r memRun) binpages.Usage { return r.after }}} {
			med := func(f func(binpages.Usage) int64) string {
				return mib(median(results[i], func(r memRun) int64 { return f(when.get(r)) }))
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", b.label, when.name,
				med(func(u binpages.Usage) int64 { return u.VmRSS }), med(func(u binpages.Usage) int64 { return u.Anon }),
				med(func(u binpages.Usage) int64 { return u.Text }), med(func(u binpages.Usage) int64 { return u.ReadOnly }))
		}
	}
	fmt.Println()
	fmt.Println("| binary | peak VmRSS, hello → fourth answer | VmHWM (start-up included) | spawn → ready | CPU, spawn → idle | CPU of the four prompts | minor faults of the four prompts |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for i, b := range bins {
		fmt.Printf("| %s | %s MiB | %s MiB | %s | %s | %s | %d |\n", b.label,
			mib(median(results[i], func(r memRun) int64 { return r.peak })),
			mib(median(results[i], func(r memRun) int64 { return r.after.VmHWM })),
			ms(time.Duration(median(results[i], func(r memRun) int64 { return int64(r.ready) }))),
			ms(time.Duration(median(results[i], func(r memRun) int64 { return int64(r.startCPU) }))),
			ms(time.Duration(median(results[i], func(r memRun) int64 { return int64(r.cpu) }))),
			median(results[i], func(r memRun) int64 { return r.minflt }))
	}
	fmt.Println()
	fmt.Println("Targets (issue 22): idle <= 16 MiB, peak after four prompts <= 24 MiB.")
	fmt.Println()
	return nil
}

// memRun is one process's figures in memory.
type memRun struct {
	ready       time.Duration
	idle, after binpages.Usage
	peak        int64         // highest VmRSS sampled from hello_ok to the last answer
	startCPU    time.Duration // CPU from spawn to idle (the release included)
	cpu         time.Duration // CPU of the four prompts
	minflt      int64
}

func memoryRun(bin, ws string, env []string, scen string) (memRun, error) {
	var r memRun
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "headless", "--workspace", ws, "--replay", scen, "--approval-mode", "auto", "--sandbox", "off")
	cmd.Env = env
	start := time.Now()
	stdin, stdout, err := benchproc.StartPiped(cmd)
	if err != nil {
		return r, err
	}
	br := bufio.NewReader(stdout)
	until := func(prefix string) error {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("maestro headless: waiting for %s: %w", prefix, err)
			}
			if r.ready == 0 {
				r.ready = time.Since(start)
			}
			if strings.HasPrefix(l, prefix) {
				return nil
			}
		}
	}
	send := func(line string) error {
		_, err := io.WriteString(stdin, line+"\n")
		return err
	}
	pid := cmd.Process.Pid
	if err := send(`{"type":"hello","protocol_version":"2026-04-02","client_info":{"name":"bench"}}`); err != nil {
		return r, err
	}
	if err := until(`{"type":"hello_ok"`); err != nil {
		return r, err
	}
	// Idle: at least 2 s after hello_ok and once VmRSS has not moved for
	// 1 s (the start-up work after ready, such as the sandbox probe and
	// the release of start-up pages, is over); at most 15 s.
	helloOK := time.Now()
	last, stable := int64(-1), time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	for ; time.Since(helloOK) < 15*time.Second; <-tick.C {
		u, err := binpages.ProcessUsage(pid)
		if err != nil {
			return r, err
		}
		if u.VmRSS != last {
			last, stable = u.VmRSS, time.Now()
		}
		if time.Since(helloOK) >= 2*time.Second && time.Since(stable) >= time.Second {
			break
		}
	}
	tick.Stop()
	if r.idle, err = binpages.ProcessUsage(pid); err != nil {
		return r, err
	}
	cpu0, flt0 := procCPU(pid)
	r.startCPU = cpu0
	stopPeak := samplePeak(pid, 5*time.Millisecond)
	for i := range 4 {
		if err := send(`{"type":"prompt","content":"question ` + strconv.Itoa(i) + `"}`); err != nil {
			return r, err
		}
		if err := until(`{"type":"response_end"`); err != nil {
			return r, err
		}
	}
	peak := stopPeak()
	cpu1, flt1 := procCPU(pid)
	r.cpu, r.minflt = cpu1-cpu0, flt1-flt0
	if r.after, err = binpages.ProcessUsage(pid); err != nil {
		return r, err
	}
	r.peak = max(peak, r.idle.VmRSS, r.after.VmRSS)
	stdin.Close()
	go io.Copy(io.Discard, br)
	if err := cmd.Wait(); err != nil {
		return r, fmt.Errorf("maestro headless exit: %w", err)
	}
	return r, nil
}

// samplePeak samples the VmRSS of process pid every interval until the
// returned stop is called, which returns the highest value, in bytes.
func samplePeak(pid int, every time.Duration) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if u, err := binpages.ProcessUsage(pid); err == nil && u.VmRSS > peak.Load() {
				peak.Store(u.VmRSS)
			}
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	}()
	return func() int64 {
		close(done)
		<-sampled
		return peak.Load()
	}
}

// procCPU reads the CPU time all threads of a process have run
// (/proc/PID/task/*/schedstat, nanoseconds; a thread that has exited is
// no longer counted) and its minor faults (/proc/PID/stat).
func procCPU(pid int) (time.Duration, int64) {
	var cpu time.Duration
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		if data, err := os.ReadFile(t); err == nil {
			if f := strings.Fields(string(data)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				cpu += time.Duration(ns)
			}
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpu, 0
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if len(f) < 8 {
		return cpu, 0
	}
	// The fields after the command: state is f[0], minflt f[7].
	minflt, _ := strconv.ParseInt(f[7], 10, 64)
	return cpu, minflt
}

func median(rs []memRun, f func(memRun) int64) int64 {
	v := make([]int64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// procStatus reads the memory lines of /proc/PID/status, in MiB.
func procStatus(pid int) map[string]float64 {
	out := map[string]float64{}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || !strings.HasSuffix(v, " kB") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, " kB")), 64)
		if err == nil {
			out[k] = kb / 1024
		}
	}
	return out
}
