package piece

import "github.com/maestro-run/maestro/internal/yamlnode"

// isSlug reports whether s is 1..max bytes of [a-z0-9-], plus '_' when
// underscore is set.
func isSlug(s string, max int, underscore bool) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || underscore && c == '_' {
			continue
		}
		return false
	}
	return true
}

// isConnectionID reports whether s is a lowercase hex/hyphen id of at least
// 8 characters: the seed schema's loose match for randomUUID() output.
func isConnectionID(s string) bool {
	return len(s) >= 8 && allBytes(s, func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-'
	})
}

// isCommandName reports whether s can be the first word of a command:
// 1–64 of [A-Za-z0-9._+-], not starting with '-'.
func isCommandName(s string) bool {
	return s != "" && len(s) <= 64 && s[0] != '-' && allBytes(s, func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '+' || c == '-'
	})
}

func allBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// suggest returns the candidate closest to s when it is a plausible typo
// (yamlnode.Suggest), "" when nothing is close.
func suggest(s string, candidates []string) string { return yamlnode.Suggest(s, candidates) }
