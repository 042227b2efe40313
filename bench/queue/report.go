package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

type cellKey struct {
	system, backend string
	workers         int
}

// printReport prints one markdown table from the JSON lines at path: one
// row per queue and worker count (the median of repeated runs), each figure
// with its ratio to River at the same worker count.
func printReport(w io.Writer, path, pgVersion string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runs := map[cellKey][]result{}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s:%d: expected a JSON result line: %w", path, line, err)
		}
		k := cellKey{r.System, r.Backend, r.Workers}
		runs[k] = append(runs[k], r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("%s: no results", path)
	}
	cells := map[cellKey]result{}
	var keys []cellKey
	repeats := 0
	var sample result
	for k, rs := range runs {
		cells[k] = median(rs)
		keys = append(keys, k)
		repeats = max(repeats, len(rs))
		sample = rs[0]
	}
	// River, then a baseline revision of the pool (run.sh BASELINE), then
	// the pool, then the bare store loop.
	order := func(system string) int {
		switch {
		case system == "river":
			return 0
		case strings.HasPrefix(system, "maestro@"):
			return 1
		case system == "maestro":
			return 2
		}
		return 3
	}
	border := map[string]int{"postgres": 0, "sqlite": 1}
	slices.SortFunc(keys, func(a, b cellKey) int {
		return cmp.Or(cmp.Compare(a.workers, b.workers), cmp.Compare(border[a.backend], border[b.backend]),
			cmp.Compare(order(a.system), order(b.system)))
	})

	fmt.Fprintf(w, "%d no-op jobs per throughput run (enqueued first, then drained); claim latency = enqueue → runner start of %d jobs enqueued one by one at %.0f/s into an idle queue. ",
		sample.Jobs, sample.LatJobs, sample.LatRate)
	if repeats > 1 {
		fmt.Fprintf(w, "Median of %d runs. ", repeats)
	}
	pg := "PostgreSQL"
	if pgVersion != "" {
		pg += " " + pgVersion
	}
	fmt.Fprintf(w, "One throwaway %s cluster (fsync=off, synchronous_commit=off) serves River and Maestro in the same run; SQLite is WAL with synchronous=NORMAL. "+
		"× River = this row ÷ River with the same workers (throughput: higher is better; latency: lower is better).\n\n", pg)
	fmt.Fprintln(w, "| workers | queue | jobs/s | × River | claim p50 | × River | claim p99 | × River |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		c := cells[k]
		river, ratio := toRiver(cells, k.workers)
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", k.workers, label(k, c),
			thousands(c.JobsPerS), ratio(c.JobsPerS, river.JobsPerS),
			ms(c.LatP50US), ratio(c.LatP50US, river.LatP50US),
			ms(c.LatP99US), ratio(c.LatP99US, river.LatP99US))
	}
	printCPU(w, keys, cells)
	return nil
}

// printCPU prints the CPU time per job of the throughput phase of the
// rows that measured it (run.sh passes -pg-pidfile): on a loaded machine
// it moves far less than jobs/s.
func printCPU(w io.Writer, keys []cellKey, cells map[cellKey]result) {
	var rows []cellKey
	for _, k := range keys {
		if cells[k].ClientCPUUSPerJob > 0 {
			rows = append(rows, k)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nCPU time per job of the throughput phase (client: the bench process; server: every PostgreSQL process). Lower is better.")
	fmt.Fprintln(w, "\n| workers | queue | client CPU/job | × River | server CPU/job | × River | total | × River |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, k := range rows {
		c := cells[k]
		river, ratio := toRiver(cells, k.workers)
		us := func(v float64) string {
			if v == 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f µs", v)
		}
		server, riverServer := c.ServerCPUUSPerJob, river.ServerCPUUSPerJob
		total, riverTotal := c.ClientCPUUSPerJob+server, river.ClientCPUUSPerJob+riverServer
		if server == 0 {
			total = 0
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", k.workers, label(k, c),
			us(c.ClientCPUUSPerJob), ratio(c.ClientCPUUSPerJob, river.ClientCPUUSPerJob),
			us(server), ratio(server, riverServer), us(total), ratio(total, riverTotal))
	}
}

// toRiver returns River's cell at workers and a function printing a
// figure's ratio to River's ("—" without River or a figure).
func toRiver(cells map[cellKey]result, workers int) (result, func(a, b float64) string) {
	river, ok := cells[cellKey{"river", "postgres", workers}]
	return river, func(a, b float64) string {
		if !ok || a == 0 || b == 0 {
			return "—"
		}
		return ratioString(a / b)
	}
}

func label(k cellKey, c result) string {
	switch {
	case k.system == "river" && c.FetchCooldownUS > 0:
		return fmt.Sprintf("River v0.51.1, FetchCooldown %s (PostgreSQL)", time.Duration(c.FetchCooldownUS)*time.Microsecond)
	case k.system == "river":
		return "River v0.51.1 (PostgreSQL)"
	case k.system == "maestro" && k.backend == "postgres":
		return "Maestro queue.Pool (PostgreSQL)"
	case k.system == "maestro" && k.backend == "sqlite":
		return "Maestro queue.Pool (SQLite)"
	case strings.HasPrefix(k.system, "maestro@") && k.backend == "postgres":
		return "Maestro queue.Pool at " + strings.TrimPrefix(k.system, "maestro@") + " (PostgreSQL)"
	case strings.HasPrefix(k.system, "maestro@"):
		return "Maestro queue.Pool at " + strings.TrimPrefix(k.system, "maestro@") + " (SQLite)"
	case k.backend == "postgres":
		return "Maestro bare store loop (PostgreSQL)"
	default:
		return "Maestro bare store loop (SQLite)"
	}
}

// median takes each figure's median over repeated runs independently.
func median(rs []result) result {
	pick := func(get func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m := rs[0]
	m.JobsPerS = pick(func(r result) float64 { return r.JobsPerS })
	m.LatP50US = pick(func(r result) float64 { return r.LatP50US })
	m.LatP99US = pick(func(r result) float64 { return r.LatP99US })
	m.LatMaxUS = pick(func(r result) float64 { return r.LatMaxUS })
	m.ClientCPUUSPerJob = pick(func(r result) float64 { return r.ClientCPUUSPerJob })
	m.ServerCPUUSPerJob = pick(func(r result) float64 { return r.ServerCPUUSPerJob })
	return m
}

func ratioString(r float64) string {
	switch {
	case r >= 10:
		return fmt.Sprintf("%.0f×", r)
	case r >= 0.1:
		return fmt.Sprintf("%.2f×", r)
	}
	return fmt.Sprintf("%.2g×", r)
}

func ms(us float64) string {
	switch {
	case us < 10_000:
		return fmt.Sprintf("%.2f ms", us/1000)
	case us < 100_000:
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return fmt.Sprintf("%.0f ms", us/1000)
}

func thousands(v float64) string {
	n := int64(v + 0.5)
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
