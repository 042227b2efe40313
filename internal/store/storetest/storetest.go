// Package storetest is the conformance suite every store.Store backend
// passes: the same tests, run against SQLite and PostgreSQL, pin down one
// set of semantics (claims, leases, fencing, retries, event logs, schedules,
// wake-ups, input validation).
//
// A backend's test calls Run with a Factory that opens a fresh, empty,
// migrated store on the given clock. Every subtest runs in parallel on its
// own store and its own fake clock, so no test sleeps: time moves only when a
// test advances its clock.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// Factory opens a fresh, empty, migrated store whose clock is now. The
// factory registers the store's Close with tb.Cleanup.
type Factory func(tb testing.TB, now func() time.Time) store.Store

// Clock is a fake clock safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at 2026-03-01T09:00:00Z.
func NewClock() *Clock { return NewClockAt(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)) }

// NewClockAt returns a clock at t.
func NewClockAt(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Run runs the whole suite against the backend newStore opens.
func Run(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b *bundle)
	}{
		{"Migrate", testMigrate},
		{"TaskCreateGetList", testTasks},
		{"TaskRejectsBadInput", testTaskBadInput},
		{"Comments", testComments},
		{"TaskFilter", testTaskFilter},
		{"TaskUsage", testTaskUsage},
		{"JobUsage", testJobUsage},
		{"Enqueue", testEnqueue},
		{"EnqueueRejectsBadInput", testEnqueueBadInput},
		{"ClaimOrder", testClaimOrder},
		{"ClaimFilters", testClaimFilters},
		{"ClaimConcurrentExactlyOnce", testClaimConcurrent},
		{"ClaimBatchOwners", testClaimBatchOwners},
		{"ClaimBatchConcurrent", testClaimBatchConcurrent},
		{"StartMany", testStartMany},
		{"ClaimStart", testClaimStart},
		{"CompleteMany", testCompleteMany},
		{"CompleteManyErrs", testCompleteManyErrs},
		{"Lifecycle", testLifecycle},
		{"SetPiece", testSetPiece},
		{"LeaseExpiryAndReclaim", testLeaseExpiry},
		{"FencingRejectsStaleLease", testFencing},
		{"RetryBackoff", testRetryBackoff},
		{"FailFinalAndAbort", testFailFinal},
		{"Retry", testRetry},
		{"WaitHumanAndComment", testWaitHuman},
		{"AttemptsAddUp", testAttemptsAddUp},
		{"WaitSubtasks", testWaitSubtasks},
		{"WaitSubtasksAlreadyDone", testWaitSubtasksDone},
		{"Cancel", testCancel},
		{"CancelCascadesToSubtasks", testCancelCascades},
		{"RunState", testRunState},
		{"Release", testRelease},
		{"FailNotCounted", testFailNotCounted},
		{"InvalidTransitionsChangeNothing", testInvalidTransitions},
		{"EventsConcurrentAppendsGapFree", testEventsConcurrent},
		{"EventsReadPaging", testEventsPaging},
		{"EventsRejectBadInput", testEventsBadInput},
		{"SystemEvents", testSystemEvents},
		{"CountJobs", testCountJobs},
		{"Pieces", testPieces},
		{"PiecesRejectBadInput", testPiecesBadInput},
		{"PieceVersions", testPieceVersions},
		{"Schedules", testSchedules},
		{"ScheduleFiresOncePerTick", testScheduleFireOnce},
		{"Audit", testAudit},
		{"Sessions", testSessions},
		{"LiveSessions", testLiveSessions},
		{"Settings", testSettings},
		{"Processes", testProcesses},
		{"JobEventCursors", testJobEventCursors},
		{"Leaders", testLeaders},
		{"MCPServers", testMCPServers},
		{"SSHConnections", testSSHConnections},
		{"Skills", testSkills},
		{"RegistryRejectsBadInput", testRegistryBadInput},
		{"Notifications", testNotifications},
		{"SubscriptionEndsWithContext", testSubscriptionContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock()
			b := &bundle{s: newStore(t, clock.Now), clock: clock, ctx: t.Context()}
			tc.fn(t, b)
		})
	}
}

// bundle is what each test gets.
type bundle struct {
	s     store.Store
	clock *Clock
	ctx   context.Context
}

// waitTimeout bounds every wait for a notification.
const waitTimeout = 10 * time.Second
