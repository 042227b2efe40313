package sqlite_test

import (
	"testing"

	"github.com/maestro-run/maestro/internal/store/storetest"
)

// BenchmarkClaimComplete: jobs/s claimed and completed on SQLite by 1, 4
// and 16 concurrent claimers (see storetest.BenchClaimComplete).
func BenchmarkClaimComplete(b *testing.B) { storetest.BenchClaimComplete(b, open) }

// BenchmarkTaskListFiltered: one filtered page of the task list over
// 10,000 tasks on SQLite (see storetest.BenchTaskListFiltered).
func BenchmarkTaskListFiltered(b *testing.B) { storetest.BenchTaskListFiltered(b, open) }
