package yamlnode

import "strings"

// Suggest returns the candidate closest to s when it is a plausible typo,
// ignoring case: edit distance at most max(1, len(s)/3) (0 below 3 bytes,
// where any edit makes another word), or else one is a
// prefix of the other or s is a suffix of the candidate (both at least 4
// bytes, as "tools" for "allowed_tools"). It returns "" when nothing is
// close.
func Suggest(s string, candidates []string) string {
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
