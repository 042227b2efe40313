package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// benchBatch is how many jobs each benchmark iteration claims and completes.
const benchBatch = 256

// BenchClaimComplete measures queue throughput: jobs claimed (one per Claim
// call, as a worker slot does) and completed per second by 1, 4 and 16
// concurrent claimers, with claim latency percentiles. Enqueueing is not
// timed. Each sub-benchmark gets a fresh store from newStore.
func BenchClaimComplete(b *testing.B, newStore Factory) {
	for _, claimers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("claimers=%d", claimers), func(b *testing.B) {
			s := newStore(b, nil)
			ctx := b.Context()
			var (
				mu        sync.Mutex
				latencies []time.Duration
				jobs      int
			)
			for b.Loop() {
				b.StopTimer()
				for range benchBatch {
					if _, err := s.Enqueue(ctx, store.NewJob{Piece: "noop"}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				err := ClaimAll(ctx, claimers, 1, func(int) store.Jobs { return s }, func(_ string, _ store.Job, took time.Duration) error {
					mu.Lock()
					latencies = append(latencies, took)
					mu.Unlock()
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				jobs += benchBatch
			}
			if len(latencies) != jobs {
				b.Fatalf("%d successful claims for %d jobs", len(latencies), jobs)
			}
			slices.Sort(latencies)
			pct := func(p float64) float64 {
				return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds())
			}
			b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
			b.ReportMetric(pct(0.50), "claim-p50-µs")
			b.ReportMetric(pct(0.99), "claim-p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// ClaimAll drains the due jobs with workers concurrent claimers, worker i
// named "w<i>" and claiming from jobs(i), limit jobs a Claim call, until a
// call returns none. Each job claimed is passed to claimed with its
// worker's name and the duration of the Claim call that returned it, then
// completed. The first error (of a call, or returned by claimed) stops
// that worker and is returned once all have stopped.
func ClaimAll(ctx context.Context, workers, limit int, jobs func(i int) store.Jobs, claimed func(worker string, j store.Job, took time.Duration) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		s, name := jobs(i), fmt.Sprintf("w%d", i)
		wg.Go(func() {
			if err := claimUntilEmpty(ctx, s, name, limit, claimed); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func claimUntilEmpty(ctx context.Context, s store.Jobs, name string, limit int, claimed func(string, store.Job, time.Duration) error) error {
	for {
		start := time.Now()
		got, err := s.Claim(ctx, store.ClaimParams{Worker: name, Limit: limit, LeaseFor: time.Minute})
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return nil
		}
		took := time.Since(start)
		for _, j := range got {
			if err := claimed(name, j, took); err != nil {
				return err
			}
			if _, err := s.Complete(ctx, j.Lease(), ""); err != nil {
				return err
			}
		}
	}
}
