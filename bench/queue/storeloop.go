package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// storeLoop is the bare floor under queue.Pool: workers goroutines, each
// claiming one job at a time, starting it, running it and completing it,
// and waiting for a TopicJobs wake-up (or a 1 s poll) when nothing is
// queued. No heartbeats, no task lookup, no metrics.
func storeLoop(ctx context.Context, st store.Store, runner queue.Runner, workers int) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for w := range workers {
		wg.Go(func() {
			if err := storeWorker(ctx, st, runner, fmt.Sprintf("bench/%d", w)); err != nil && ctx.Err() == nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}

func storeWorker(ctx context.Context, st store.Store, runner queue.Runner, name string) error {
	sub, err := st.Subscribe(ctx, store.TopicJobs)
	if err != nil {
		return err
	}
	defer sub.Close()
	poll := time.NewTimer(time.Second)
	defer poll.Stop()
	for {
		got, err := st.Claim(ctx, store.ClaimParams{Worker: name, Limit: 1, LeaseFor: time.Minute})
		if err != nil {
			return err
		}
		if len(got) == 0 {
			poll.Reset(time.Second)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-sub.C():
			case <-poll.C:
			}
			continue
		}
		j, err := st.Start(ctx, got[0].Lease())
		if err != nil {
			return err
		}
		res := runner.Run(ctx, &queue.Job{Job: j})
		if res.State != store.StateSucceeded {
			return fmt.Errorf("job %d: runner returned %q", j.ID, res.State)
		}
		if _, err := st.Complete(ctx, j.Lease(), res.Result); err != nil {
			return err
		}
	}
}
