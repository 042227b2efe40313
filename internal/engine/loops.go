package engine

import (
	"fmt"
	"strings"
)

// loopCount says how many times in a row the run has come back to next,
// given the movements entered so far (history, oldest first):
//
//   - directly (next, next, … next): count is the number of trailing
//     entries equal to next, with "";
//   - through one other movement (next, x, next, x, … next, x): count is
//     the number of trailing (next, x) laps, with x — an A⇄B cycle.
//
// An empty history entry marks progress (a user's answer) and ends both
// kinds of run. Longer loops (A→B→C→A) are bounded by max_movements only.
func loopCount(history []string, next string) (count int, with string) {
	n := len(history)
	for i := n - 1; i >= 0 && history[i] == next; i-- {
		count++
	}
	if count > 0 {
		return count, ""
	}
	if n < 2 || history[n-2] != next || history[n-1] == "" || history[n-1] == next {
		return 0, ""
	}
	x := history[n-1]
	for i := n; i >= 2 && history[i-2] == next && history[i-1] == x; i -= 2 {
		count++
	}
	return count, x
}

// loopNote is the warning a revisited movement's model is given.
func loopNote(ev Pressure) string {
	if ev.Source == PressureCycle {
		if ev.Level == LevelPrompt {
			return fmt.Sprintf("Movements %s and %s have alternated %d times, the most this piece allows: going back to %s once more aborts the run. "+
				"Finish the work in this round; if the remaining problems cannot be solved, call complete with status aborted or needs_user_input and say what blocks you.",
				ev.Movement, ev.With, ev.Count, ev.Movement)
		}
		return fmt.Sprintf("Movements %s and %s have alternated %d times (the run is aborted after %d). "+
			"If the last round did not make progress, change the approach instead of repeating it; use the handoff and the lessons.",
			ev.Movement, ev.With, ev.Count, ev.Limit)
	}
	if ev.Level == LevelPrompt {
		return fmt.Sprintf("Movement %s has been entered %d times in a row, the most this piece allows: entering it once more aborts the run. "+
			"Finish now, or call complete with status aborted or needs_user_input and say what blocks you.", ev.Movement, ev.Count+1)
	}
	return fmt.Sprintf("Movement %s has been entered %d times in a row (the run is aborted after %d revisits). "+
		"Make this attempt different from the previous ones; use the handoff and the lessons.", ev.Movement, ev.Count+1, ev.Limit)
}

// lessonKey is the form under which two lessons count as the same.
func lessonKey(l string) string {
	return strings.ToLower(strings.Join(strings.Fields(l), " "))
}
