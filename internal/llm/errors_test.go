package llm

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfterHeader: retry-after-ms wins over Retry-After when it
// parses; either may be absent (the cases of the Anthropic and OpenAI
// providers, which both read their retry hint through it).
func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"4"}}, 4 * time.Second},
		{http.Header{"Retry-After": {now.Add(5 * time.Second).Format(http.TimeFormat)}}, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := RetryAfterHeader(tt.header, now); got != tt.want {
			t.Errorf("RetryAfterHeader(%v) = %v, want %v", tt.header, got, tt.want)
		}
	}
}
