package piece

import "strings"

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

// suggest returns the candidate closest to s when it is a plausible typo,
// ignoring case: edit distance at most max(1, len(s)/3) (0 below 3 bytes,
// where any edit makes another word), or else one is a
// prefix of the other or s is a suffix of the candidate (both at least 4
// bytes, as "tools" for "allowed_tools"). It returns "" when nothing is
// close.
func suggest(s string, candidates []string) string {
	best, bestDist := "", len(s)/3
	if bestDist < 1 && len(s) >= 3 {
		bestDist = 1 // below 3 bytes, only a difference of case
	}
	bestDist++ // accept distances strictly below this
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := editDistance(ls, strings.ToLower(c))
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return best
	}
	if len(ls) >= 4 {
		for _, c := range candidates {
			lc := strings.ToLower(c)
			if len(lc) >= 4 && (strings.HasPrefix(lc, ls) || strings.HasSuffix(lc, ls) || strings.HasPrefix(ls, lc)) {
				return c
			}
		}
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, counting an
// adjacent transposition as one edit (optimal string alignment).
func editDistance(a, b string) int {
	if a == b {
		return 0
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
