package storetest

import (
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
				var wg sync.WaitGroup
				errs := make(chan error, claimers)
				for w := range claimers {
					name := fmt.Sprintf("w%d", w)
					wg.Go(func() {
						var mine []time.Duration
						defer func() {
							mu.Lock()
							latencies = append(latencies, mine...)
							mu.Unlock()
						}()
						for {
							start := time.Now()
							got, err := s.Claim(ctx, store.ClaimParams{Worker: name, Limit: 1, LeaseFor: time.Minute})
							if err != nil {
								errs <- err
								return
							}
							if len(got) == 0 {
								return
							}
							mine = append(mine, time.Since(start))
							if _, err := s.Complete(ctx, got[0].Lease(), ""); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
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
