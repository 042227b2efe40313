package llm

import (
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how failed model calls are retried. Only failures that
// happen before the stream yields anything are retried: once output has
// been shown, a broken stream is reported (KindStream), never replayed.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, including the first.
	// Default 5.
	MaxAttempts int
	// BaseDelay is the first backoff delay, doubled per attempt with jitter.
	// Default 1s.
	BaseDelay time.Duration
	// MaxDelay caps any single wait, including a server's Retry-After.
	// Default 60s.
	MaxDelay time.Duration
	// OnRetry, when set, is told about each retry before its wait.
	OnRetry func(attempt int, wait time.Duration, err *Error)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = time.Second
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 60 * time.Second
	}
	return p
}

// Delay returns the wait before attempt n+1 after failure err (n counts
// from 1). A server's Retry-After wins over the computed backoff.
func (p RetryPolicy) Delay(n int, err *Error) time.Duration {
	p = p.withDefaults()
	if err != nil && err.RetryAfter > 0 {
		return min(err.RetryAfter, p.MaxDelay)
	}
	d := p.BaseDelay << (n - 1)
	if d <= 0 || d > p.MaxDelay {
		d = p.MaxDelay
	}
	// Full jitter in [d/2, d).
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// WithRetry wraps p so that retryable failures (429, 5xx, overloaded,
// network) are retried per policy.
func WithRetry(p Provider, policy RetryPolicy) Provider {
	return &retrying{Provider: p, policy: policy.withDefaults()}
}

type retrying struct {
	Provider
	policy RetryPolicy
}

// Unwrap returns the wrapped provider.
func (r *retrying) Unwrap() Provider { return r.Provider }

func (r *retrying) ListModels(ctx context.Context) ([]string, error) {
	if l, ok := r.Provider.(ModelLister); ok {
		return l.ListModels(ctx)
	}
	return nil, errors.New("provider cannot list models")
}

// ContextWindow is the wrapped provider's window (see ContextWindowOf).
func (r *retrying) ContextWindow(ctx context.Context) Window {
	return ContextWindowOf(ctx, r.Provider)
}

func (r *retrying) Stream(ctx context.Context, req *Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for attempt := 1; ; attempt++ {
			yielded := false
			var failure error
			for ev, err := range r.Provider.Stream(ctx, req) {
				if err != nil {
					failure = err
					break
				}
				yielded = true
				if !yield(ev, nil) {
					return
				}
			}
			if failure == nil {
				return
			}
			e, ok := errors.AsType[*Error](failure)
			if yielded || !ok || !e.Retryable() || attempt >= r.policy.MaxAttempts || ctx.Err() != nil {
				yield(Event{}, failure)
				return
			}
			wait := r.policy.Delay(attempt, e)
			if r.policy.OnRetry != nil {
				r.policy.OnRetry(attempt, wait, e)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				yield(Event{}, &Error{Kind: KindCancelled, Provider: r.Name(), Message: "cancelled while waiting to retry", Err: ctx.Err()})
				return
			case <-t.C:
			}
		}
	}
}
