// Package oneline shortens text to fit one line of a log record, a status
// or a terminal. It imports nothing of Maestro's, so every layer may use it.
package oneline

import "strings"

// Cut folds s's runs of white space (newlines included) into one space and
// shortens the result to at most n runes (n ≥ 1), marking a cut with an
// ellipsis.
func Cut(s string, n int) string {
	return Truncate(strings.Join(strings.Fields(s), " "), n)
}

// Truncate shortens s to at most n runes (n ≥ 1), the last an ellipsis
// when it was cut.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
