package queue

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
)

// claimBuckets are the upper bounds (seconds) of the claim latency
// histogram.
var claimBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Metrics counts what pools do, for the Prometheus /metrics endpoint. It is
// safe for concurrent use; one Metrics may be shared by several pools.
type Metrics struct {
	mu          sync.Mutex
	claims      int64
	claimErrors int64
	buckets     []int64 // per claimBuckets, not cumulative
	latencySum  float64
	outcomes    map[string]int64
	usage       llm.Usage
	cost        float64
}

// NewMetrics returns an empty set of metrics.
func NewMetrics() *Metrics {
	return &Metrics{buckets: make([]int64, len(claimBuckets)+1), outcomes: map[string]int64{}}
}

func (m *Metrics) claimed(latency time.Duration) {
	s := latency.Seconds()
	i, _ := slices.BinarySearch(claimBuckets, s)
	m.mu.Lock()
	m.claims++
	m.buckets[i]++
	m.latencySum += s
	m.mu.Unlock()
}

func (m *Metrics) claimError() {
	m.mu.Lock()
	m.claimErrors++
	m.mu.Unlock()
}

func (m *Metrics) outcome(o string) {
	m.mu.Lock()
	m.outcomes[o]++
	m.mu.Unlock()
}

func (m *Metrics) addUsage(u llm.Usage, cost float64) {
	m.mu.Lock()
	m.usage.InputTokens += u.InputTokens
	m.usage.OutputTokens += u.OutputTokens
	m.usage.CacheReadTokens += u.CacheReadTokens
	m.usage.CacheWriteTokens += u.CacheWriteTokens
	m.cost += cost
	m.mu.Unlock()
}

// Snapshot is a copy of the metrics at one moment.
type Snapshot struct {
	// Claimed counts claimed jobs; ClaimErrors failed claim calls.
	Claimed, ClaimErrors int64
	// Outcomes counts finished attempts by what happened: succeeded,
	// failed, retried, requeued (given back without counting the attempt:
	// the artifact store was unreachable), aborted, waiting_human,
	// waiting_subtasks, released (graceful shutdown), lost (cancelled or
	// lease lost while running), error (the outcome could not be
	// recorded).
	Outcomes map[string]int64
	Usage    llm.Usage
	CostUSD  float64
}

// Snapshot returns the current values.
func (m *Metrics) Snapshot() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := make(map[string]int64, len(m.outcomes))
	for k, v := range m.outcomes {
		o[k] = v
	}
	return Snapshot{Claimed: m.claims, ClaimErrors: m.claimErrors, Outcomes: o, Usage: m.usage, CostUSD: m.cost}
}

// outcomeNames fixes the order of the outcome series.
var outcomeNames = []string{"succeeded", "failed", "retried", "requeued", "aborted", "waiting_human", "waiting_subtasks", "released", "lost", "error"}

// WritePrometheus writes the metrics in the Prometheus text exposition
// format (version 0.0.4): maestro_queue_claim_latency_seconds (histogram
// of the time from a job becoming due to its claim),
// maestro_queue_jobs_claimed_total, maestro_queue_claim_errors_total,
// maestro_queue_attempts_total{outcome}, maestro_queue_tokens_total{kind}
// and maestro_queue_cost_usd_total.
func (m *Metrics) WritePrometheus(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintln(w, "# HELP maestro_queue_claim_latency_seconds Time from a job becoming due to a worker claiming it.")
	fmt.Fprintln(w, "# TYPE maestro_queue_claim_latency_seconds histogram")
	var cum int64
	for i, b := range claimBuckets {
		cum += m.buckets[i]
		fmt.Fprintf(w, "maestro_queue_claim_latency_seconds_bucket{le=\"%g\"} %d\n", b, cum)
	}
	cum += m.buckets[len(claimBuckets)]
	fmt.Fprintf(w, "maestro_queue_claim_latency_seconds_bucket{le=\"+Inf\"} %d\n", cum)
	fmt.Fprintf(w, "maestro_queue_claim_latency_seconds_sum %g\n", m.latencySum)
	fmt.Fprintf(w, "maestro_queue_claim_latency_seconds_count %d\n", m.claims)
	fmt.Fprintln(w, "# HELP maestro_queue_jobs_claimed_total Jobs claimed by this process's workers.")
	fmt.Fprintln(w, "# TYPE maestro_queue_jobs_claimed_total counter")
	fmt.Fprintf(w, "maestro_queue_jobs_claimed_total %d\n", m.claims)
	fmt.Fprintln(w, "# HELP maestro_queue_claim_errors_total Claim calls that failed.")
	fmt.Fprintln(w, "# TYPE maestro_queue_claim_errors_total counter")
	fmt.Fprintf(w, "maestro_queue_claim_errors_total %d\n", m.claimErrors)
	fmt.Fprintln(w, "# HELP maestro_queue_attempts_total Finished job attempts by outcome.")
	fmt.Fprintln(w, "# TYPE maestro_queue_attempts_total counter")
	for _, o := range outcomeNames {
		fmt.Fprintf(w, "maestro_queue_attempts_total{outcome=%q} %d\n", o, m.outcomes[o])
	}
	fmt.Fprintln(w, "# HELP maestro_queue_tokens_total Model tokens used by jobs, by kind.")
	fmt.Fprintln(w, "# TYPE maestro_queue_tokens_total counter")
	fmt.Fprintf(w, "maestro_queue_tokens_total{kind=\"input\"} %d\n", m.usage.InputTokens)
	fmt.Fprintf(w, "maestro_queue_tokens_total{kind=\"output\"} %d\n", m.usage.OutputTokens)
	fmt.Fprintf(w, "maestro_queue_tokens_total{kind=\"cache_read\"} %d\n", m.usage.CacheReadTokens)
	fmt.Fprintf(w, "maestro_queue_tokens_total{kind=\"cache_write\"} %d\n", m.usage.CacheWriteTokens)
	fmt.Fprintln(w, "# HELP maestro_queue_cost_usd_total Model cost of jobs in US dollars (where known).")
	fmt.Fprintln(w, "# TYPE maestro_queue_cost_usd_total counter")
	fmt.Fprintf(w, "maestro_queue_cost_usd_total %g\n", m.cost)
}
