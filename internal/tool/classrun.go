package tool

import (
	"regexp/syntax"
	"unicode/utf8"
)

// maxClassRun bounds the positions of a class-run prefilter.
const maxClassRun = 32

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(c byte)      { s[c>>6] |= 1 << (c & 63) }
func (s *byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }
func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.add(byte(c))
	}
}

// classRun is the prefilter of a pattern with no literal to look for:
// a run of single-byte classes every match contains at consecutive
// positions, such as the seven of [A-Z]{4}\d{3}. It is found with a
// Horspool skip loop: the byte under the window's last position decides
// how far the window may move, so that bytes in none of the classes (most
// of a source file, for such a pattern) are mostly jumped over. A line
// holding an occurrence is then checked by the regexp, so the results are
// the regexp's own.
type classRun struct {
	sets  []byteSet
	shift [256]uint8
}

func newClassRun(sets []byteSet) *classRun {
	r := &classRun{sets: sets}
	m := len(sets)
	for c := range 256 {
		r.shift[c] = uint8(m)
		for j := m - 2; j >= 0; j-- {
			if sets[j].has(byte(c)) {
				r.shift[c] = uint8(m - 1 - j)
				break
			}
		}
	}
	return r
}

// index returns the start of the first occurrence at or after pos, or -1.
func (r *classRun) index(data []byte, pos int) int {
	m := len(r.sets)
	last := &r.sets[m-1]
	for i := pos; i+m <= len(data); {
		c := data[i+m-1]
		if last.has(c) {
			j := m - 2
			for j >= 0 && r.sets[j].has(data[i+j]) {
				j--
			}
			if j < 0 {
				return i
			}
		}
		i += int(r.shift[c])
	}
	return -1
}

// requiredClassRun returns the longest run of single-byte classes that
// every match of re contains at consecutive positions, or nil. Newlines
// are left out of the classes: matches are looked for within lines.
func requiredClassRun(re *syntax.Regexp) *classRun {
	var best, cur []byteSet
	flush := func() {
		if len(cur) > len(best) {
			best = cur
		}
		cur = nil
	}
	var visit func(re *syntax.Regexp)
	visit = func(re *syntax.Regexp) {
		if sets, ok := fixedSets(re); ok {
			cur = append(cur, sets...)
			return
		}
		switch re.Op {
		case syntax.OpCapture:
			visit(re.Sub[0])
		case syntax.OpConcat:
			for _, sub := range re.Sub {
				visit(sub)
			}
		case syntax.OpPlus, syntax.OpRepeat:
			// At least min copies of a one-byte class start and end it.
			n := 1
			if re.Op == syntax.OpRepeat {
				n = re.Min
			}
			sets, ok := fixedSets(re.Sub[0])
			if !ok || len(sets) != 1 || n < 1 {
				flush()
				return
			}
			for range n {
				cur = append(cur, sets[0])
			}
			flush()
			for range n {
				cur = append(cur, sets[0])
			}
		default:
			flush()
		}
	}
	visit(re)
	flush()
	if len(best) == 0 {
		return nil
	}
	return newClassRun(best[:min(len(best), maxClassRun)])
}

// fixedSets returns the byte classes of a pattern piece that always
// matches the same number of single-byte characters (zero-width
// assertions match none); ok is false for anything else, including
// classes that admit characters beyond ASCII.
func fixedSets(re *syntax.Regexp) (sets []byteSet, ok bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf || (re.Flags&syntax.FoldCase != 0 && !asciiFoldSafe(r)) {
				return nil, false
			}
			var s byteSet
			s.add(byte(r))
			if re.Flags&syntax.FoldCase != 0 {
				if 'a' <= r && r <= 'z' {
					s.add(byte(r - 'a' + 'A'))
				} else if 'A' <= r && r <= 'Z' {
					s.add(byte(r - 'A' + 'a'))
				}
			}
			sets = append(sets, s)
		}
		return sets, true
	case syntax.OpCharClass:
		var s byteSet
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= utf8.RuneSelf {
				return nil, false
			}
			s.addRange(byte(lo), byte(hi))
		}
		s[0] &^= 1 << '\n'
		return []byteSet{s}, true
	case syntax.OpCapture:
		return fixedSets(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min != re.Max {
			return nil, false
		}
		sub, ok := fixedSets(re.Sub[0])
		if !ok {
			return nil, false
		}
		for range re.Min {
			sets = append(sets, sub...)
		}
		return sets, true
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			s, ok := fixedSets(sub)
			if !ok {
				return nil, false
			}
			sets = append(sets, s...)
		}
		return sets, true
	}
	return nil, false
}
