package cli

import (
	"testing"
	"time"
)

// TestScheduleNextRunHook: without MAESTRO_TEST_SCHEDULE_DUE_NOW=1 a new
// schedule's first tick is the expression's next one; with it, the
// request's time; an invalid expression is refused either way.
func TestScheduleNextRunHook(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 10, 30, 0, time.UTC)
	nextMinute := time.Date(2026, 11, 27, 0, 11, 0, 0, time.UTC)
	for _, c := range []struct {
		name, env, expr string
		want            time.Time
		wantErr         bool
	}{
		{"unset", "", "* * * * *", nextMinute, false},
		{"other value", "yes", "* * * * *", nextMinute, false},
		{"due now", "1", "* * * * *", now, false},
		{"due now, nightly", "1", "0 3 * * *", now, false},
		{"invalid", "", "61 * * * *", time.Time{}, true},
		{"invalid, due now", "1", "61 * * * *", time.Time{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == scheduleDueNowEnv {
					return c.env
				}
				return ""
			}
			got, err := scheduleNextRun(getenv)(c.expr, now)
			if (err != nil) != c.wantErr || !got.Equal(c.want) {
				t.Errorf("first tick of %q = %v, %v; want %v (error %v)", c.expr, got, err, c.want, c.wantErr)
			}
		})
	}
}
