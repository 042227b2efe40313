package gitignore

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Glob is a compiled wildcard pattern for slash-separated relative paths,
// in the syntax of .gitignore patterns:
//
//   - `*` matches any run of characters except `/`;
//   - `?` matches one character except `/`;
//   - `[a-z]`, `[!a-z]` (or `[^a-z]`) and POSIX classes such as
//     `[[:digit:]]` match one character from (or not from) a set;
//   - `\` makes the next character literal;
//   - a whole path segment `**` matches zero or more segments, so `**/x`
//     matches x at any depth, `a/**/b` matches a/b, a/x/b, a/x/y/b, and a
//     trailing `/**` matches everything inside a directory but not the
//     directory itself. Elsewhere `**` is the same as `*`.
//
// A Glob is immutable and safe for concurrent use.
type Glob struct {
	segs []segment
}

// ErrBadPattern reports a pattern that cannot be compiled.
var ErrBadPattern = errors.New("syntax error in pattern")

// CompileGlob compiles pattern. Leading, trailing and doubled slashes are
// not significant: the pattern is split into segments at each `/`.
func CompileGlob(pattern string) (*Glob, error) {
	var segs []segment
	for _, raw := range splitPattern(pattern) {
		if raw == "" {
			continue
		}
		seg, err := compileSegment(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadPattern, pattern, err)
		}
		segs = append(segs, seg)
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("%w: %q is empty", ErrBadPattern, pattern)
	}
	if segs[len(segs)-1].kind == segStarStar && len(segs) > 1 {
		// "dir/**" matches what is inside dir, not dir itself: at least
		// one more segment.
		segs = append(segs, segment{kind: segStar})
	}
	// Collapse runs of "**".
	out := segs[:1]
	for _, s := range segs[1:] {
		if s.kind == segStarStar && out[len(out)-1].kind == segStarStar {
			continue
		}
		out = append(out, s)
	}
	return &Glob{segs: out}, nil
}

// splitPattern splits at unescaped slashes (a backslash never escapes a
// slash in practice, but the split keeps `\/` together for safety).
func splitPattern(p string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '/':
			parts = append(parts, p[start:i])
			start = i + 1
		}
	}
	return append(parts, p[start:])
}

// Match reports whether path (slash-separated, relative, clean) matches
// the whole pattern.
func (g *Glob) Match(path string) bool {
	// Split without allocating for the common shallow case.
	var buf [16]string
	names := splitSlash(path, buf[:0])
	return matchSegments(g.segs, names)
}

// CouldMatchInside reports whether some path strictly inside directory dir
// could match the pattern; walkers use it to skip directories.
func (g *Glob) CouldMatchInside(dir string) bool {
	if dir == "" || dir == "." {
		return true
	}
	var buf [16]string
	names := splitSlash(dir, buf[:0])
	segs := g.segs
	for _, n := range names {
		if len(segs) == 0 {
			return false
		}
		if segs[0].kind == segStarStar {
			return true
		}
		if !segs[0].match(n) {
			return false
		}
		segs = segs[1:]
	}
	return len(segs) > 0
}

// Literal returns the pattern's path when it has no wildcards at all.
func (g *Glob) Literal() (string, bool) {
	names := make([]string, len(g.segs))
	for i, s := range g.segs {
		if s.kind != segLiteral {
			return "", false
		}
		names[i] = s.lit
	}
	return strings.Join(names, "/"), true
}

func splitSlash(p string, dst []string) []string {
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return append(dst, p)
		}
		dst = append(dst, p[:i])
		p = p[i+1:]
	}
}

// matchSegments matches path segments against pattern segments, `**`
// standing for any run of segments. It backtracks only to the last `**`,
// which is enough because `**` matches any run.
func matchSegments(segs []segment, names []string) bool {
	si, ni := 0, 0
	star, starNi := -1, 0
	for ni < len(names) {
		if si < len(segs) {
			if segs[si].kind == segStarStar {
				star, starNi = si, ni
				si++
				continue
			}
			if segs[si].match(names[ni]) {
				si++
				ni++
				continue
			}
		}
		if star >= 0 {
			starNi++
			ni = starNi
			si = star + 1
			continue
		}
		return false
	}
	for si < len(segs) && segs[si].kind == segStarStar {
		si++
	}
	return si == len(segs)
}

type segKind uint8

const (
	segLiteral  segKind = iota // exact name
	segStar                    // "*": any name
	segSuffix                  // "*lit": name ends with lit
	segGeneral                 // anything else
	segStarStar                // "**": any run of names
)

type segment struct {
	kind segKind
	lit  string
	toks []token
}

func (s *segment) match(name string) bool {
	switch s.kind {
	case segLiteral:
		return name == s.lit
	case segStar:
		return true
	case segSuffix:
		return strings.HasSuffix(name, s.lit)
	default:
		return matchTokens(s.toks, name)
	}
}

type tokKind uint8

const (
	tokLit tokKind = iota
	tokAny
	tokStar
	tokClass
)

type token struct {
	kind  tokKind
	r     rune
	class *charClass
}

type charClass struct {
	negate bool
	ranges []runeRange
	named  []func(rune) bool
}

type runeRange struct{ lo, hi rune }

func (c *charClass) match(r rune) bool {
	in := false
	for _, rg := range c.ranges {
		if rg.lo <= r && r <= rg.hi {
			in = true
			break
		}
	}
	if !in {
		for _, f := range c.named {
			if f(r) {
				in = true
				break
			}
		}
	}
	return in != c.negate
}

func compileSegment(raw string) (segment, error) {
	if raw == "**" {
		return segment{kind: segStarStar}, nil
	}
	toks, err := tokenize(raw)
	if err != nil {
		return segment{}, err
	}
	// Fast paths.
	lit, isLit := literalOf(toks)
	switch {
	case isLit:
		return segment{kind: segLiteral, lit: lit}, nil
	case len(toks) == 1 && toks[0].kind == tokStar:
		return segment{kind: segStar}, nil
	case toks[0].kind == tokStar:
		if lit, ok := literalOf(toks[1:]); ok {
			return segment{kind: segSuffix, lit: lit}, nil
		}
	}
	return segment{kind: segGeneral, toks: toks}, nil
}

func literalOf(toks []token) (string, bool) {
	var b strings.Builder
	for _, t := range toks {
		if t.kind != tokLit {
			return "", false
		}
		b.WriteRune(t.r)
	}
	return b.String(), true
}

// tokenize turns one segment (no slashes) into tokens; runs of stars
// collapse into one.
func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '*':
			if len(toks) == 0 || toks[len(toks)-1].kind != tokStar {
				toks = append(toks, token{kind: tokStar})
			}
			i++
		case '?':
			toks = append(toks, token{kind: tokAny})
			i++
		case '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			r, n := utf8.DecodeRuneInString(s[i+1:])
			toks = append(toks, token{kind: tokLit, r: r})
			i += 1 + n
		case '[':
			cls, n, err := parseClass(s[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokClass, class: cls})
			i += n
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			toks = append(toks, token{kind: tokLit, r: r})
			i += n
		}
	}
	return toks, nil
}

// posixClass returns the test for a POSIX class name such as "alpha".
func posixClass(name string) (func(rune) bool, bool) {
	switch name {
	case "alnum":
		return func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }, true
	case "alpha":
		return unicode.IsLetter, true
	case "blank":
		return func(r rune) bool { return r == ' ' || r == '\t' }, true
	case "cntrl":
		return unicode.IsControl, true
	case "digit":
		return unicode.IsDigit, true
	case "graph":
		return func(r rune) bool { return unicode.IsGraphic(r) && !unicode.IsSpace(r) }, true
	case "lower":
		return unicode.IsLower, true
	case "print":
		return unicode.IsPrint, true
	case "punct":
		return unicode.IsPunct, true
	case "space":
		return unicode.IsSpace, true
	case "upper":
		return unicode.IsUpper, true
	case "xdigit":
		return func(r rune) bool { return strings.ContainsRune("0123456789abcdefABCDEF", r) }, true
	}
	return nil, false
}

// parseClass parses a bracket expression at the start of s and returns it
// with the number of bytes it spans.
func parseClass(s string) (*charClass, int, error) {
	cls := &charClass{}
	i := 1
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		cls.negate = true
		i++
	}
	first := true
	for {
		if i >= len(s) {
			return nil, 0, errors.New("unterminated character class")
		}
		c := s[i]
		if c == ']' && !first {
			return cls, i + 1, nil
		}
		first = false
		if c == '[' && i+1 < len(s) && s[i+1] == ':' {
			end := strings.Index(s[i+2:], ":]")
			if end < 0 {
				return nil, 0, errors.New("unterminated character class name")
			}
			name := s[i+2 : i+2+end]
			f, ok := posixClass(name)
			if !ok {
				return nil, 0, fmt.Errorf("unknown character class [:%s:]", name)
			}
			cls.named = append(cls.named, f)
			i += 2 + end + 2
			continue
		}
		lo, n, err := classRune(s[i:])
		if err != nil {
			return nil, 0, err
		}
		i += n
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			hi, n, err = classRune(s[i+1:])
			if err != nil {
				return nil, 0, err
			}
			i += 1 + n
			if hi < lo {
				return nil, 0, fmt.Errorf("bad range %c-%c", lo, hi)
			}
		}
		cls.ranges = append(cls.ranges, runeRange{lo, hi})
	}
}

func classRune(s string) (rune, int, error) {
	if s[0] == '\\' {
		if len(s) < 2 {
			return 0, 0, errors.New("unterminated character class")
		}
		r, n := utf8.DecodeRuneInString(s[1:])
		return r, 1 + n, nil
	}
	r, n := utf8.DecodeRuneInString(s)
	return r, n, nil
}

// matchTokens matches one name against a segment's tokens, backtracking
// to the last star only (sufficient since a star matches any run).
func matchTokens(toks []token, s string) bool {
	ti, si := 0, 0
	star, starSi := -1, 0
	for si < len(s) {
		if ti < len(toks) {
			t := &toks[ti]
			if t.kind == tokStar {
				star, starSi = ti, si
				ti++
				continue
			}
			r, n := utf8.DecodeRuneInString(s[si:])
			if t.matches(r) {
				ti++
				si += n
				continue
			}
		}
		if star >= 0 {
			_, n := utf8.DecodeRuneInString(s[starSi:])
			starSi += n
			si = starSi
			ti = star + 1
			continue
		}
		return false
	}
	for ti < len(toks) && toks[ti].kind == tokStar {
		ti++
	}
	return ti == len(toks)
}

func (t *token) matches(r rune) bool {
	switch t.kind {
	case tokLit:
		return r == t.r
	case tokAny:
		return r != '/'
	case tokClass:
		return r != '/' && t.class.match(r)
	}
	return false
}
