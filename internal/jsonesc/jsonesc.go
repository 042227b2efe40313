// Package jsonesc holds the pieces of JSON string unescaping that Maestro's
// hand-written JSON readers (the protocol decoder, the agent-CLI line
// reader) share.
package jsonesc

// Simple returns the byte the one-character escape \e stands for ("\n" →
// '\n'); false for 'u' and for characters JSON does not allow after '\'.
func Simple(e byte) (byte, bool) {
	switch e {
	case '"', '\\', '/':
		return e, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// Hex4 reads the four hexadecimal digits at the start of b (the XXXX of
// \uXXXX); false when b is shorter or holds another character.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
