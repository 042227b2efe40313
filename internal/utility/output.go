package utility

import (
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/protocol"
)

// utf8Chunker turns a byte stream into valid UTF-8 text chunks without
// splitting a character between two chunks: an incomplete sequence at the
// end of one read is held back for the next. Invalid bytes become U+FFFD.
type utf8Chunker struct {
	pending [utf8.UTFMax]byte
	n       int
	buf     []byte
}

// chunk returns the text of the bytes read (after those held back), or ""
// when there is none yet.
func (c *utf8Chunker) chunk(data []byte) string {
	b := append(c.buf[:0], c.pending[:c.n]...)
	b = append(b, data...)
	c.n = 0
	// Hold back an incomplete sequence at the end.
	if tail := incompleteTail(b); tail > 0 {
		c.n = copy(c.pending[:], b[len(b)-tail:])
		b = b[:len(b)-tail]
	}
	c.buf = b
	return validText(b)
}

// flush returns what is held back (invalid on its own) at the end of the
// stream.
func (c *utf8Chunker) flush() string {
	if c.n == 0 {
		return ""
	}
	s := validText(c.pending[:c.n])
	c.n = 0
	return s
}

// incompleteTail returns the length of a UTF-8 sequence that starts
// within the last 3 bytes of b and is cut short by its end.
func incompleteTail(b []byte) int {
	for i := 1; i <= min(len(b), utf8.UTFMax-1); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0 // ASCII: nothing pending
		}
		if c >= 0xC0 { // a lead byte
			if utf8.FullRune(b[len(b)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}

// validText returns b as a string, each invalid byte replaced by U+FFFD.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return string(out)
}

// tailBuffer keeps the last protocol.MaxActiveCommandOutput characters of
// a command's output for snapshots.
type tailBuffer struct {
	b []byte
}

func (t *tailBuffer) add(s string) {
	t.b = append(t.b, s...)
	const maxChars = protocol.MaxActiveCommandOutput
	if len(t.b) <= maxChars {
		return // no more characters than bytes
	}
	// Walk back maxChars characters from the end.
	cut := len(t.b)
	for n := 0; n < maxChars && cut > 0; n++ {
		_, size := utf8.DecodeLastRune(t.b[:cut])
		cut -= size
	}
	if cut > 0 {
		t.b = append(t.b[:0], t.b[cut:]...)
	}
}

func (t *tailBuffer) String() string { return string(t.b) }
