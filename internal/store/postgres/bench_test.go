package postgres_test

import (
	"testing"

	"github.com/maestro-run/maestro/internal/store/storetest"
)

// BenchmarkClaimComplete: jobs/s claimed and completed on PostgreSQL by 1,
// 4 and 16 concurrent claimers (see storetest.BenchClaimComplete).
func BenchmarkClaimComplete(b *testing.B) { storetest.BenchClaimComplete(b, open) }
