package workspace

import (
	"strconv"
	"unicode/utf8"
)

// MaxEcho is how many bytes of a caller's input (a path, a pattern) an
// error message repeats; the rest is summarised by its length.
const MaxEcho = 256

// Excerpt returns s for an error message: whole when it is at most
// MaxEcho bytes, else its first MaxEcho bytes (cut at a character
// boundary) followed by "… (N bytes)" giving the whole length. Every
// error that repeats a path or pattern from a model or a client goes
// through it, so that a 10 MB path yields a short message.
func Excerpt(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	end := MaxEcho
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
