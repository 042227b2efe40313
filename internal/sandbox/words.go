package sandbox

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// word is a shell word with what can be known about it before it runs.
type word struct {
	// static is set when the word's value is fixed by the source text
	// (literals and quotes only: no expansions, substitutions or braces).
	static bool
	// value is the word after quote removal, when static.
	value string
	// prefix is the static text before the first dynamic part.
	prefix string
	// node is the parsed word (nil for words split out of a string).
	node *syntax.Word
}

// literal makes a static word that did not come from the parser.
func literal(s string) word { return word{static: true, value: s, prefix: s} }

// newWords evaluates the static parts of parsed words.
func newWords(ws []*syntax.Word) []word {
	out := make([]word, len(ws))
	for i, w := range ws {
		out[i] = newWord(w)
	}
	return out
}

func newWord(w *syntax.Word) word {
	// Brace expansion happens before anything else; a word that has one is
	// not a single static value.
	braced := &syntax.Word{Parts: slices.Clone(w.Parts)}
	hasBraces := syntax.SplitBraces(braced)

	var b strings.Builder
	out := word{node: w, static: true}
	for _, part := range w.Parts {
		s, ok := staticPart(part)
		if !ok {
			out.static = false
			break
		}
		b.WriteString(s)
	}
	out.prefix = b.String()
	if hasBraces {
		out.static = false
		if i := strings.IndexByte(out.prefix, '{'); i >= 0 {
			out.prefix = out.prefix[:i]
		}
	}
	if out.static {
		out.value = out.prefix
	}
	return out
}

// staticPart returns the value of a word part after quote removal, if the
// part has no expansions.
func staticPart(part syntax.WordPart) (string, bool) {
	switch p := part.(type) {
	case *syntax.Lit:
		return unescape(p.Value, false), true
	case *syntax.SglQuoted:
		if p.Dollar {
			return ansiC(p.Value), true
		}
		return p.Value, true
	case *syntax.DblQuoted:
		if p.Dollar {
			return "", false // $"…" is locale translation
		}
		var b strings.Builder
		for _, inner := range p.Parts {
			lit, ok := inner.(*syntax.Lit)
			if !ok {
				return "", false
			}
			b.WriteString(unescape(lit.Value, true))
		}
		return b.String(), true
	}
	return "", false
}

// unescape removes backslash quoting as the shell does, outside quotes or
// (dq) inside double quotes, where a backslash quotes only $ ` " \ and
// newline.
func unescape(s string, dq bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch {
		case next == '\n':
			i++ // line continuation
		case !dq || strings.IndexByte("$`\"\\", next) >= 0:
			b.WriteByte(next)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ansiC decodes the body of a $'…' string.
func ansiC(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			maxDigits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			for j < len(s) && j-i-1 < maxDigits && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if e == 'x' {
				b.WriteByte(byte(n))
			} else {
				b.WriteRune(rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			b.WriteByte(byte(n))
			i = j - 1
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		default: // \\ \' \" \? and unknown escapes
			if strings.IndexByte(`\'"?`, e) < 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(e)
		}
	}
	if !utf8.ValidString(b.String()) {
		return strings.ToValidUTF8(b.String(), "\uFFFD")
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// source returns the source text of a word for messages.
func (w word) source() string {
	if w.node == nil {
		return w.value
	}
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, w.node); err != nil {
		return w.prefix + "…"
	}
	return b.String()
}

// isOption reports whether a static word looks like an option.
func (w word) isOption() bool {
	return w.static && len(w.value) > 1 && w.value[0] == '-'
}
