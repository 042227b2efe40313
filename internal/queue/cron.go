package queue

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronFields names the five fields and the values each takes, for error
// messages.
var cronFields = []struct{ name, values string }{
	{"minute", "0-59"},
	{"hour", "0-23"},
	{"day of month", "1-31"},
	{"month", "1-12 or JAN-DEC"},
	{"day of week", "0-6 or SUN-SAT"},
}

// cronForm is the form of an expression, said after a wrong field count.
const cronForm = "minute hour day-of-month month day-of-week"

// NextRun returns the first tick of cronExpr after after, in UTC
// (robfig/cron v3 syntax: five fields minute hour day-of-month month
// day-of-week, descriptors such as @hourly and "@every 5m", and a
// CRON_TZ=Zone prefix). Without CRON_TZ the expression is read in UTC,
// whatever the zone of the machine or of after: every process sharing a
// store computes the same ticks, and the web UI's preview shows them. The
// error says what is wrong in the expression's terms: which field, its
// text and the values it takes, or how many fields are extra or missing.
func NextRun(cronExpr string, after time.Time) (time.Time, error) {
	if (strings.HasPrefix(cronExpr, "CRON_TZ=") || strings.HasPrefix(cronExpr, "TZ=")) && !strings.Contains(cronExpr, " ") {
		// The parser reads the zone up to the first space, and panics
		// without one (serve answered "internal error").
		return time.Time{}, fmt.Errorf("cron expression %q: expected the schedule after the zone and a space, such as \"CRON_TZ=Europe/Paris 0 9 * * 1-5\"", cronExpr)
	}
	s, err := cronParser.Parse(cronExpr)
	if err != nil {
		return time.Time{}, fmt.Errorf("cron expression %q: %s", cronExpr, cronProblem(cronExpr, err))
	}
	if every := everyDuration(cronExpr); every != "" {
		// The parser takes any duration under a second (negative, zero)
		// as one second and drops a fraction: "@every -1h" fired every
		// second.
		if d, err := time.ParseDuration(every); err == nil && (d < time.Second || d%time.Second != 0) {
			return time.Time{}, fmt.Errorf("cron expression %q: \"@every %s\": expected a duration of whole seconds, at least 1s (such as 5m or 1h30m)", cronExpr, every)
		}
	}
	next := s.Next(after.UTC())
	if next.IsZero() {
		return time.Time{}, fmt.Errorf("cron expression %q never fires", cronExpr)
	}
	return next.UTC(), nil
}

// everyDuration is the duration of an "@every" expression (after its
// zone), or "".
func everyDuration(expr string) string {
	fields := strings.Fields(expr)
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "CRON_TZ=") || strings.HasPrefix(fields[0], "TZ=")) {
		fields = fields[1:]
	}
	if len(fields) == 2 && fields[0] == "@every" {
		return fields[1]
	}
	return ""
}

// cronProblem says what is wrong with expr, which the parser refused with
// err; the parser's own words (a Go list of the fields, strconv's errors)
// are the last resort.
func cronProblem(expr string, err error) string {
	fields := strings.Fields(expr)
	if len(fields) > 0 {
		if zone, ok := strings.CutPrefix(fields[0], "CRON_TZ="); ok || strings.HasPrefix(fields[0], "TZ=") {
			if !ok {
				zone = strings.TrimPrefix(fields[0], "TZ=")
			}
			if _, zerr := time.LoadLocation(zone); zerr != nil {
				return fmt.Sprintf("unknown time zone %q (expected an IANA name such as Europe/Paris)", zone)
			}
			fields = fields[1:]
		}
	}
	switch {
	case len(fields) == 0:
		return "nothing to schedule: expected five fields (" + cronForm + ") or a descriptor such as @daily"
	case strings.HasPrefix(fields[0], "@every"):
		return fmt.Sprintf("%q: expected @every and a duration such as 5m or 1h30m", strings.Join(fields, " "))
	case strings.HasPrefix(fields[0], "@"):
		return fmt.Sprintf("unknown descriptor %q: expected @yearly, @monthly, @weekly, @daily, @hourly or @every and a duration such as 5m", fields[0])
	case len(fields) > 5:
		extra := len(fields) - 5
		what := fmt.Sprintf("the last %d, %q, are extra", extra, strings.Join(fields[5:], " "))
		if extra == 1 {
			what = fmt.Sprintf("the last, %q, is extra", fields[5])
		}
		return fmt.Sprintf("%d fields where 5 are expected (%s): %s (there is no seconds or year field)", len(fields), cronForm, what)
	case len(fields) < 5:
		var missing []string
		for _, f := range cronFields[len(fields):] {
			missing = append(missing, f.name)
		}
		have, verb := fmt.Sprintf("%d fields", len(fields)), "are"
		if len(fields) == 1 {
			have = "1 field"
		}
		if len(missing) == 1 {
			verb = "is"
		}
		return fmt.Sprintf("%s where 5 are expected (%s): %s %s missing", have, cronForm, andList(missing), verb)
	}
	// Five fields: the wrong one is the first that fails alone, the others
	// made "*".
	for i, f := range fields {
		alone := []string{"*", "*", "*", "*", "*"}
		alone[i] = f
		_, ferr := cronParser.Parse(strings.Join(alone, " "))
		if ferr == nil {
			continue
		}
		return fmt.Sprintf("field %d (%s) %q: %s (expected %s, a range such as 1-5, a list such as 1,15 or a step such as */5)",
			i+1, cronFields[i].name, f, fieldProblem(ferr.Error()), cronFields[i].values)
	}
	return err.Error()
}

// fieldProblem says in words the parser's refusal of one field.
func fieldProblem(msg string) string {
	switch {
	case strings.Contains(msg, "above maximum"), strings.Contains(msg, "below minimum"):
		return "out of range"
	case strings.Contains(msg, "beyond end of range"):
		return "the range starts after it ends"
	case strings.Contains(msg, "step of range"):
		return `the step after "/" must be 1 or more`
	case strings.Contains(msg, "too many hyphens"):
		return `more than one "-"`
	case strings.Contains(msg, "too many slashes"):
		return `more than one "/"`
	case strings.Contains(msg, "negative number"):
		return "a negative number"
	case strings.HasPrefix(msg, "failed to parse int from "):
		v, _, _ := strings.Cut(strings.TrimPrefix(msg, "failed to parse int from "), ":")
		if v == "" {
			return "a number is missing"
		}
		return fmt.Sprintf("%q is not a number or a name", v)
	}
	return msg
}

// andList joins words as "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
