package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrintReport(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"system":"river","backend":"postgres","workers":4,"jobs":100,"jobs_per_s":1000,"lat_jobs":10,"lat_rate":50,"lat_p50_us":2000,"lat_p99_us":10000,"fetch_cooldown_us":1000}`,
		`{"system":"maestro","backend":"sqlite","workers":4,"jobs":100,"jobs_per_s":500,"lat_jobs":10,"lat_rate":50,"lat_p50_us":1000,"lat_p99_us":30000}`,
		// Three PostgreSQL repeats: the medians are 250 jobs/s, 4 ms, 20 ms.
		`{"system":"maestro","backend":"postgres","workers":4,"jobs":100,"jobs_per_s":250,"lat_jobs":10,"lat_rate":50,"lat_p50_us":9000,"lat_p99_us":20000}`,
		`{"system":"maestro","backend":"postgres","workers":4,"jobs":100,"jobs_per_s":100,"lat_jobs":10,"lat_rate":50,"lat_p50_us":4000,"lat_p99_us":10000}`,
		`{"system":"maestro","backend":"postgres","workers":4,"jobs":100,"jobs_per_s":9000,"lat_jobs":10,"lat_rate":50,"lat_p50_us":1000,"lat_p99_us":90000}`,
		`{"system":"maestro","backend":"sqlite","workers":1,"jobs":100,"jobs_per_s":12345,"lat_jobs":10,"lat_rate":50,"lat_p50_us":150000,"lat_p99_us":150000}`,
		// A baseline revision (run.sh BASELINE) sorts between River and the pool.
		`{"system":"maestro@70a1f4e","backend":"postgres","workers":4,"jobs":100,"jobs_per_s":100,"lat_jobs":10,"lat_rate":50,"lat_p50_us":8000,"lat_p99_us":40000}`,
	}
	got := report(t, lines, "15.18")
	for _, want := range []string{
		"Median of 3 runs.",
		"PostgreSQL 15.18 cluster",
		// Sorted by workers, then PostgreSQL before SQLite, River first.
		"| 1 | Maestro queue.Pool (SQLite) | 12,345 | — | 150 ms | — | 150 ms | — |\n" +
			"| 4 | River v0.51.1, FetchCooldown 1ms (PostgreSQL) | 1,000 | 1.00× | 2.00 ms | 1.00× | 10.0 ms | 1.00× |\n" +
			"| 4 | Maestro queue.Pool at 70a1f4e (PostgreSQL) | 100 | 0.10× | 8.00 ms | 4.00× | 40.0 ms | 4.00× |\n" +
			"| 4 | Maestro queue.Pool (PostgreSQL) | 250 | 0.25× | 4.00 ms | 2.00× | 20.0 ms | 2.00× |\n" +
			"| 4 | Maestro queue.Pool (SQLite) | 500 | 0.50× | 1.00 ms | 0.50× | 30.0 ms | 3.00× |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; got:\n%s", want, got)
		}
	}
}

func TestPrintReportRejectsBadLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	if err := os.WriteFile(path, []byte("{\"system\":\"river\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := printReport(&bytes.Buffer{}, path, "")
	if err == nil || !strings.Contains(err.Error(), "results.jsonl:2:") {
		t.Fatalf("expected an error naming line 2, got %v", err)
	}
}

func TestRatioString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r    float64
		want string
	}{{15.2, "15×"}, {1, "1.00×"}, {0.25, "0.25×"}, {0.0812, "0.081×"}} {
		if got := ratioString(tc.r); got != tc.want {
			t.Errorf("ratioString(%v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}

// TestPrintCPU: rows that measured CPU time get a second table with their
// ratios to River; rows that did not (SQLite, a baseline revision) are left
// out of it, and a row without the server's figure shows no total.
func TestPrintCPU(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"system":"river","backend":"postgres","workers":16,"jobs":100,"jobs_per_s":1000,"client_cpu_us_per_job":100,"server_cpu_us_per_job":200}`,
		`{"system":"maestro","backend":"postgres","workers":16,"jobs":100,"jobs_per_s":500,"client_cpu_us_per_job":150,"server_cpu_us_per_job":450}`,
		`{"system":"maestro","backend":"sqlite","workers":16,"jobs":100,"jobs_per_s":500,"client_cpu_us_per_job":80}`,
		`{"system":"maestro@70a1f4e","backend":"postgres","workers":16,"jobs":100,"jobs_per_s":100}`,
	}
	got := report(t, lines, "")
	_, cpu, ok := strings.Cut(got, "| workers | queue | client CPU/job |")
	if !ok {
		t.Fatalf("report lacks the CPU table; got:\n%s", got)
	}
	want := " × River | server CPU/job | × River | total | × River |\n" +
		"|---:|---|---:|---:|---:|---:|---:|---:|\n" +
		"| 16 | River v0.51.1 (PostgreSQL) | 100 µs | 1.00× | 200 µs | 1.00× | 300 µs | 1.00× |\n" +
		"| 16 | Maestro queue.Pool (PostgreSQL) | 150 µs | 1.50× | 450 µs | 2.25× | 600 µs | 2.00× |\n" +
		"| 16 | Maestro queue.Pool (SQLite) | 80 µs | 0.80× | — | — | — | — |\n"
	if cpu != want {
		t.Errorf("CPU table:\n%s\nwant:\n%s", cpu, want)
	}
}

// report prints the report of the JSON result lines.
func report(t *testing.T, lines []string, pgVersion string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printReport(&out, path, pgVersion); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
