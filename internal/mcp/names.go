package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest tool name the model APIs accept: Anthropic's
// and OpenAI's tool names are ^[a-zA-Z0-9_-]{1,64}$. A request offering
// any other name is refused whole, so every model call of the session
// would fail.
const MaxNameLen = 64

// hashLen is how many hex digits of a hash end a shortened name.
const hashLen = 8

// ValidName reports whether name is one the model APIs accept: 1 to 64
// ASCII letters, digits, _ or -.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// usableName reports whether a server's tool name can be offered at all:
// not empty, valid UTF-8, no control characters, at most 1 KiB (the MCP
// specification asks for 1–128 of A-Z a-z 0-9 _ . -, which real servers
// do not all follow).
func usableName(name string) bool {
	if name == "" || len(name) > 1024 || !utf8.ValidString(name) {
		return false
	}
	return strings.IndexFunc(name, unicode.IsControl) < 0
}

// sanitize replaces each character of s that a model API refuses in a
// tool name with _.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf && nameByte(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ModelNames returns the name the model sees of each of a server's
// tools (distinct names, as the server lists them), each one the model
// APIs accept (ValidName) and all different:
//
//   - mcp__<server>__<tool> when that is valid (every name so far keeps
//     it);
//   - else with each character other than A-Z a-z 0-9 _ - replaced by _
//     (files.read → mcp__<server>__files_read), when that fits in 64
//     characters and is no other tool's name, valid or replaced;
//   - else cut to 55 characters and ended by _ and 8 hex digits of a
//     SHA-256 of the server and the tool's own name.
//
// The names depend only on the server's slug and its list of tools, not
// on their order: the same list gives the same names in every session.
// A call of a tool goes to the server under the server's own name.
func ModelNames(server string, tools []string) []string {
	out := make([]string, len(tools))
	taken := make(map[string]bool, len(tools))
	for i, t := range tools {
		if n := Name(server, t); ValidName(n) {
			out[i] = n
			taken[n] = true
		}
	}
	// A replaced name is given only when no other tool wants it, so
	// which tool gets it never depends on the listing's order.
	wanted := map[string]int{}
	for i, t := range tools {
		if out[i] == "" {
			wanted[Name(server, sanitize(t))]++
		}
	}
	for i, t := range tools {
		if n := Name(server, sanitize(t)); out[i] == "" && len(n) <= MaxNameLen && wanted[n] == 1 && !taken[n] {
			out[i] = n
			taken[n] = true
		}
	}
	for i, t := range tools {
		if out[i] != "" {
			continue
		}
		base := Name(server, sanitize(t))
		if max := MaxNameLen - 1 - hashLen; len(base) > max {
			base = base[:max]
		}
		// A hash another tool's name already is (a chance of one in
		// 2^32) is hashed again with a counter.
		for salt := 0; ; salt++ {
			key := server + "\x00" + t
			if salt > 0 {
				key += "\x00" + strconv.Itoa(salt)
			}
			sum := sha256.Sum256([]byte(key))
			n := base + "_" + hex.EncodeToString(sum[:])[:hashLen]
			if !taken[n] {
				out[i] = n
				taken[n] = true
				break
			}
		}
	}
	return out
}
