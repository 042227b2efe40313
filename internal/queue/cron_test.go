package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/queue"
)

// TestNextRunErrorsInWords checks that a refused expression is said in the
// expression's own terms. The parser's words reached the user as they were:
// the fields as a Go list ('expected exactly 5 fields, found 8: [0 9 * * 1
// * * *]'), strconv's errors, and a wrong field guessed by substring ("0 9
// 1-40 * *" blamed the minute "0"); "CRON_TZ=UTC" alone panicked in the
// parser, and serve answered 500 "internal error".
func TestNextRunErrorsInWords(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 12, 7, 30, 0, time.UTC)
	const kinds = " (expected %s, a range such as 1-5, a list such as 1,15 or a step such as */5)"
	tests := []struct{ expr, want string }{
		{"0 9 * * 1 * * *", `cron expression "0 9 * * 1 * * *": 8 fields where 5 are expected (minute hour day-of-month month day-of-week): the last 3, "* * *", are extra (there is no seconds or year field)`},
		{"0 9 * * 1 *", `cron expression "0 9 * * 1 *": 6 fields where 5 are expected (minute hour day-of-month month day-of-week): the last, "*", is extra (there is no seconds or year field)`},
		{"0 9 *", `cron expression "0 9 *": 3 fields where 5 are expected (minute hour day-of-month month day-of-week): month and day of week are missing`},
		{"0", `cron expression "0": 1 field where 5 are expected (minute hour day-of-month month day-of-week): hour, day of month, month and day of week are missing`},
		{"0 9 * *", `cron expression "0 9 * *": 4 fields where 5 are expected (minute hour day-of-month month day-of-week): day of week is missing`},
		{"0 25 * * *", `cron expression "0 25 * * *": field 2 (hour) "25": out of range` + fmt.Sprintf(kinds, "0-23")},
		{"0 9 1-40 * *", `cron expression "0 9 1-40 * *": field 3 (day of month) "1-40": out of range` + fmt.Sprintf(kinds, "1-31")},
		{"0 9 * JANX *", `cron expression "0 9 * JANX *": field 4 (month) "JANX": "JANX" is not a number or a name` + fmt.Sprintf(kinds, "1-12 or JAN-DEC")},
		{"5-1 * * * *", `cron expression "5-1 * * * *": field 1 (minute) "5-1": the range starts after it ends` + fmt.Sprintf(kinds, "0-59")},
		{"*/0 * * * *", `cron expression "*/0 * * * *": field 1 (minute) "*/0": the step after "/" must be 1 or more` + fmt.Sprintf(kinds, "0-59")},
		{"-1 * * * *", `cron expression "-1 * * * *": field 1 (minute) "-1": a number is missing` + fmt.Sprintf(kinds, "0-59")},
		{"0 9 * * 8", `cron expression "0 9 * * 8": field 5 (day of week) "8": out of range` + fmt.Sprintf(kinds, "0-6 or SUN-SAT")},
		{"@sometimes", `cron expression "@sometimes": unknown descriptor "@sometimes": expected @yearly, @monthly, @weekly, @daily, @hourly or @every and a duration such as 5m`},
		{"@every soon", `cron expression "@every soon": "@every soon": expected @every and a duration such as 5m or 1h30m`},
		// The parser makes any duration under a second (negative, zero) one
		// second, and drops a fraction: "@every -1h" created a task every
		// second.
		{"@every -1h", `cron expression "@every -1h": "@every -1h": expected a duration of whole seconds, at least 1s (such as 5m or 1h30m)`},
		{"@every 0s", `cron expression "@every 0s": "@every 0s": expected a duration of whole seconds, at least 1s (such as 5m or 1h30m)`},
		{"CRON_TZ=UTC @every 1.5s", `cron expression "CRON_TZ=UTC @every 1.5s": "@every 1.5s": expected a duration of whole seconds, at least 1s (such as 5m or 1h30m)`},
		{"CRON_TZ=Mars/Olympus 0 9 * * *", `cron expression "CRON_TZ=Mars/Olympus 0 9 * * *": unknown time zone "Mars/Olympus" (expected an IANA name such as Europe/Paris)`},
		{"CRON_TZ=UTC", `cron expression "CRON_TZ=UTC": expected the schedule after the zone and a space, such as "CRON_TZ=Europe/Paris 0 9 * * 1-5"`},
		{"TZ=UTC", `cron expression "TZ=UTC": expected the schedule after the zone and a space, such as "CRON_TZ=Europe/Paris 0 9 * * 1-5"`},
		{"CRON_TZ=UTC ", `cron expression "CRON_TZ=UTC ": nothing to schedule: expected five fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily`},
		{"0 9 31 2 *", `cron expression "0 9 31 2 *" never fires`},
	}
	for _, tt := range tests {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("NextRun(%q) panicked: %v", tt.expr, p)
				}
			}()
			_, err = queue.NextRun(tt.expr, at)
		}()
		if err == nil || err.Error() != tt.want {
			t.Errorf("NextRun(%q) error\n got: %v\nwant: %s", tt.expr, err, tt.want)
		}
	}
}
