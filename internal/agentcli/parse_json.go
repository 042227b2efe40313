package agentcli

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/jsonesc"
)

// The parsers read every stdout line once with jsonReader, a strict
// single-pass reader that validates the whole line and fills the parser's
// line struct in the same pass (no reflection, no re-validation, no
// re-decoding of nested json.RawMessage). It only vouches for input whose
// meaning is plain: whenever a line holds something where encoding/json's
// rules are subtle (a field of the wrong type, a key that differs from a
// field name only by case, a duplicated field, an escaped or non-ASCII key,
// invalid UTF-8 or a lone surrogate in a decoded string, a number that does
// not fit, deep nesting, trailing data, invalid JSON), it gives up ("bad")
// and the line is decoded again with encoding/json exactly as before, so the
// events and counters never depend on which path ran.

// lineResult is what a lineParser made of one line.
type lineResult int

const (
	lineOK      lineResult = iota
	lineUnknown            // a JSON object of an unknown event type (or with a field of the wrong type)
	lineNonJSON            // not a JSON object whose "type" is a string
)

// decodeLine fills *l from one line: the fast reader when it can, else
// encoding/json (slowDecode) from a zero value.
func decodeLine[L any, P interface {
	*L
	read(*jsonReader)
}](r *jsonReader, raw []byte, l P) lineResult {
	r.reset(raw)
	if l.read(r); r.end() {
		return lineOK
	}
	var zero L
	*l = zero
	return slowDecode(raw, l)
}

// slowDecode is the encoding/json path: raw must be an object whose "type"
// decodes as a string (else the line is not JSON to us), and it must decode
// into l (else the line is of an unknown shape).
func slowDecode(raw []byte, l any) lineResult {
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return lineNonJSON
	}
	if json.Unmarshal(raw, l) != nil {
		return lineUnknown
	}
	return lineOK
}

// maxFastDepth bounds nesting on the fast path (encoding/json allows more;
// deeper input falls back to it).
const maxFastDepth = 200

// jsonReader reads one JSON text. Once bad is set it stops consuming
// input and what it filled in is to be discarded.
type jsonReader struct {
	b     []byte
	i     int
	bad   bool
	depth int
	// scratch holds unescaped string bytes.
	scratch []byte
}

func (r *jsonReader) reset(b []byte) {
	r.b, r.i, r.bad, r.depth = b, 0, false, 0
}

func (r *jsonReader) fail() { r.bad = true }

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (r *jsonReader) peek() byte {
	r.ws()
	if r.bad || r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// end reports whether the whole input was one valid value the reader
// vouches for.
func (r *jsonReader) end() bool {
	r.ws()
	return !r.bad && r.i == len(r.b)
}

// null consumes a null literal if one is next.
func (r *jsonReader) null() bool {
	if r.peek() == 'n' {
		r.literal("null")
		return !r.bad
	}
	return false
}

func (r *jsonReader) literal(lit string) {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		r.fail()
		return
	}
	r.i += len(lit)
}

// obj starts reading an object: it consumes '{' and reports whether one was
// next (false, without failing, on anything else).
func (r *jsonReader) obj() bool { return r.open('{') }

// open consumes c, an object's or an array's opening byte, counting the
// nesting depth; it reports whether c was next (false, without failing, on
// anything else).
func (r *jsonReader) open(c byte) bool {
	if r.peek() != c {
		return false
	}
	r.depth++
	if r.depth > maxFastDepth {
		r.fail()
		return false
	}
	r.i++
	return true
}

// member reads the next member's key and colon, or the closing brace
// (then it returns false). first is true for the first call per object.
func (r *jsonReader) member(first bool) ([]byte, bool) { return r.memberOf(first, true) }

// memberOf is member; keys are only validated (and nil is returned for
// them) when !decode.
func (r *jsonReader) memberOf(first, decode bool) ([]byte, bool) {
	c := r.peek()
	if r.bad {
		return nil, false
	}
	if c == '}' && first {
		r.i++
		r.depth--
		return nil, false
	}
	if !first {
		switch c {
		case '}':
			r.i++
			r.depth--
			return nil, false
		case ',':
			r.i++
			c = r.peek()
		default:
			r.fail()
			return nil, false
		}
	}
	if c != '"' {
		r.fail()
		return nil, false
	}
	if !decode {
		r.skipString()
		if r.peek() != ':' {
			r.fail()
			return nil, false
		}
		r.i++
		return nil, true
	}
	// Keys are matched as raw bytes: escaped or non-ASCII keys are left to
	// encoding/json (its case folding covers a few non-ASCII runes).
	start := r.i + 1
	j := start
	for j < len(r.b) && r.b[j] != '"' {
		if c := r.b[j]; c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			r.fail()
			return nil, false
		}
		j++
	}
	if j >= len(r.b) {
		r.fail()
		return nil, false
	}
	key := r.b[start:j]
	r.i = j + 1
	if r.peek() != ':' {
		r.fail()
		return nil, false
	}
	r.i++
	return key, true
}

// arr starts reading an array, like obj.
func (r *jsonReader) arr() bool { return r.open('[') }

// elem moves to the next array element, or consumes the closing bracket
// (then it returns false).
func (r *jsonReader) elem(first bool) bool {
	c := r.peek()
	if r.bad {
		return false
	}
	if c == ']' {
		r.i++
		r.depth--
		return false
	}
	if !first {
		if c != ',' {
			r.fail()
			return false
		}
		r.i++
	}
	if r.peek() == 0 {
		r.fail()
		return false
	}
	return true
}

// fields lists the json names of a struct that object reads; a field's
// index in names is its case in the struct's read and its bit in the
// duplicate check (so at most 64).
type fields struct {
	names []string
	// lens has bit n set when a name is n bytes long (n < 64); longer
	// keys are always compared.
	lens uint64
}

func newFields(names ...string) *fields {
	if len(names) > 64 {
		panic("agentcli: more than 64 fields")
	}
	f := &fields{names: names}
	for _, n := range names {
		if len(n) < 64 {
			f.lens |= 1 << len(n)
		}
	}
	return f
}

// object reads an object into a struct with fields f: for each member whose
// key is one of f's names, field is called with its index to read the
// value. Other members are skipped, unless the key could match a name
// under encoding/json's case-insensitive rules (then the reader gives up,
// as on a duplicated field). Anything but an object fails.
func (r *jsonReader) object(f *fields, field func(i int)) {
	if !r.obj() {
		r.fail()
		return
	}
	names := f.names
	var set uint64
	next := 0
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			return
		}
		// Members mostly come in the order of names: the one after the
		// last match is tried first.
		i := next
		if i >= len(names) || string(key) != names[i] {
			i = len(names)
			if len(key) >= 64 || f.lens&(1<<len(key)) != 0 {
				fold := false
				for i = 0; i < len(names); i++ {
					if n := names[i]; len(n) == len(key) {
						if string(key) == n {
							break
						}
						fold = fold || asciiFoldEqual(key, n)
					}
				}
				if fold && i == len(names) {
					r.fail()
					return
				}
			}
			if i == len(names) {
				r.skip()
				continue
			}
		}
		if set&(1<<i) != 0 {
			r.fail()
			return
		}
		set |= 1 << i
		next = i + 1
		field(i)
	}
}

// asciiFoldEqual is bytes.EqualFold for ASCII key and name (member leaves
// other keys to encoding/json, so its folding of a few non-ASCII runes
// onto ASCII letters does not arise here); len(key) == len(name).
func asciiFoldEqual(key []byte, name string) bool {
	for i := range len(key) {
		a, b := key[i], name[i]
		if a == b {
			continue
		}
		if a|0x20 != b|0x20 || a|0x20 < 'a' || a|0x20 > 'z' {
			return false
		}
	}
	return true
}

// skip validates and skips one value.
func (r *jsonReader) skip() {
	switch c := r.peek(); {
	case r.bad:
	case c == '{':
		r.obj()
		for first := true; ; first = false {
			if _, ok := r.memberOf(first, false); !ok {
				break
			}
			r.skip()
		}
	case c == '[':
		r.arr()
		for first := true; r.elem(first); first = false {
			r.skip()
		}
	case c == '"':
		r.skipString()
	case c == '-' || c >= '0' && c <= '9':
		r.number()
	case c == 't':
		r.literal("true")
	case c == 'f':
		r.literal("false")
	case c == 'n':
		r.literal("null")
	default:
		r.fail()
	}
}

// raw skips one value and returns its bytes (a json.RawMessage as
// encoding/json would store it, sharing r's input).
func (r *jsonReader) raw() []byte {
	r.ws()
	start := r.i
	r.skip()
	if r.bad {
		return nil
	}
	return r.b[start:r.i:r.i]
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// skipString validates a string (escapes and control characters, not
// UTF-8, like encoding/json) at r.i.
func (r *jsonReader) skipString() {
	b := r.b
	for j := r.i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			r.i = j + 1
			return
		case c < 0x20:
			r.fail()
			return
		case c == '\\':
			j++
			if j >= len(b) {
				r.fail()
				return
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					r.fail()
					return
				}
				j += 4
			default:
				r.fail()
				return
			}
		}
	}
	r.fail()
}

// number validates a number at r.i and returns its text.
func (r *jsonReader) number() []byte {
	b, j := r.b, r.i
	digits := func() bool {
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j > k
	}
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case !digits():
		r.fail()
		return nil
	}
	if j < len(b) && b[j] == '.' {
		j++
		if !digits() {
			r.fail()
			return nil
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if !digits() {
			r.fail()
			return nil
		}
	}
	s := b[r.i:j]
	r.i = j
	return s
}

// str decodes a string value into *dst (null leaves it as is; any other
// type fails).
func (r *jsonReader) str(dst *string) {
	if r.null() || r.bad {
		return
	}
	if r.peek() != '"' {
		r.fail()
		return
	}
	b := r.b
	start := r.i + 1
	j := start
	for j < len(b) {
		c := b[j]
		if c == '"' {
			*dst = string(b[start:j])
			r.i = j + 1
			return
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		j++
	}
	r.slowString(dst, start, j)
}

// slowString decodes a string with escapes or non-ASCII text; plain is
// the prefix [start, j) already checked.
func (r *jsonReader) slowString(dst *string, start, j int) {
	b := r.b
	out := append(r.scratch[:0], b[start:j]...)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			*dst = string(out)
			r.scratch = out
			r.i = j + 1
			return
		case c < 0x20:
			r.fail()
			return
		case c >= utf8.RuneSelf:
			ru, n := utf8.DecodeRune(b[j:])
			if ru == utf8.RuneError && n == 1 {
				r.fail() // encoding/json substitutes U+FFFD: leave it to it
				return
			}
			out = append(out, b[j:j+n]...)
			j += n
			continue
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(b) {
			r.fail()
			return
		}
		e := b[j+1]
		if u, ok := jsonesc.Simple(e); ok {
			out = append(out, u)
			j += 2
			continue
		}
		if e != 'u' {
			r.fail()
			return
		}
		ru, ok := jsonesc.Hex4(b[j+2:])
		if !ok {
			r.fail()
			return
		}
		j += 6
		if ru >= 0xD800 && ru < 0xE000 {
			// Only a well-formed pair is decoded here.
			lo, ok := rune(0), false
			if ru < 0xDC00 && j+1 < len(b) && b[j] == '\\' && b[j+1] == 'u' {
				lo, ok = jsonesc.Hex4(b[j+2:])
			}
			if !ok || lo < 0xDC00 || lo >= 0xE000 {
				r.fail()
				return
			}
			ru = 0x10000 + (ru-0xD800)<<10 + (lo - 0xDC00)
			j += 6
		}
		out = utf8.AppendRune(out, ru)
	}
	r.fail()
}

// integer reads an integer number into *dst (null leaves it; fractions,
// exponents, overflow and other types fail).
func (r *jsonReader) integer(dst *int64, bits int) {
	if r.null() || r.bad {
		return
	}
	c := r.peek()
	if c != '-' && (c < '0' || c > '9') {
		r.fail()
		return
	}
	s := r.number()
	if r.bad {
		return
	}
	neg := s[0] == '-'
	d := s
	if neg {
		d = s[1:]
	}
	if len(d) > 18 {
		r.fail()
		return
	}
	var v int64
	for _, c := range d {
		if c < '0' || c > '9' {
			r.fail() // a fraction or an exponent
			return
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	if bits < 64 && (v > 1<<(bits-1)-1 || v < -1<<(bits-1)) {
		r.fail()
		return
	}
	*dst = v
}

func (r *jsonReader) int64(dst *int64) { r.integer(dst, 64) }

func (r *jsonReader) int(dst *int) {
	v := int64(*dst)
	r.integer(&v, strconv.IntSize)
	*dst = int(v)
}

// intPtr reads an integer into a new *int (null sets nil).
func (r *jsonReader) intPtr(dst **int) {
	if r.null() {
		*dst = nil
		return
	}
	var v int
	r.int(&v)
	if !r.bad {
		*dst = &v
	}
}

func (r *jsonReader) float(dst *float64) {
	if r.null() || r.bad {
		return
	}
	c := r.peek()
	if c != '-' && (c < '0' || c > '9') {
		r.fail()
		return
	}
	s := r.number()
	if r.bad {
		return
	}
	v, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		r.fail()
		return
	}
	*dst = v
}

func (r *jsonReader) bool(dst *bool) {
	switch r.peek() {
	case 't':
		r.literal("true")
		*dst = true
	case 'f':
		r.literal("false")
		*dst = false
	case 'n':
		r.literal("null")
	default:
		r.fail()
	}
}

// rawMsg stores the next value's bytes in *dst (null included, as
// json.RawMessage does).
func (r *jsonReader) rawMsg(dst *json.RawMessage) {
	if v := r.raw(); !r.bad {
		*dst = v
	}
}

// structStart begins a struct-typed field: false (nothing to read) for
// null; the struct's read (object) fails on a non-object.
func (r *jsonReader) structStart() bool {
	return !r.null() && !r.bad
}

// ptrStart begins a pointer-to-struct field: null sets the pointer to nil
// (and nil is returned); before an object, a new value is stored and
// returned for the caller to read into; anything else fails.
func ptrStart[T any](r *jsonReader, dst **T) *T {
	if r.null() {
		*dst = nil
		return nil
	}
	if r.bad {
		return nil
	}
	if r.peek() != '{' {
		r.fail()
		return nil
	}
	v := new(T)
	*dst = v
	return v
}

// fastText decodes a textOf value: ok is false when the fast reader cannot
// vouch for it.
func fastText(r *jsonReader, raw []byte) (string, bool) {
	r.reset(raw)
	switch r.peek() {
	case '"':
		var s string
		r.str(&s)
		return s, r.end()
	case 'n':
		r.literal("null")
		return "", r.end()
	case '[':
		var out []byte
		var s string
		r.arr()
		for first := true; r.elem(first); first = false {
			if r.null() {
				continue
			}
			r.object(textBlockNames, func(i int) {
				switch i {
				case 0:
					var t string
					r.str(&t)
				case 1:
					s = ""
					r.str(&s)
					out = append(out, s...)
				}
			})
		}
		return string(out), r.end()
	}
	return "", false
}

var textBlockNames = newFields("type", "text")

// countArray counts the elements of an array value (ok false if raw is
// not one the reader vouches for).
func countArray(r *jsonReader, raw []byte) (n int, ok bool) {
	r.reset(raw)
	if r.null() {
		return 0, r.end()
	}
	if !r.arr() {
		return 0, false
	}
	for first := true; r.elem(first); first = false {
		r.skip()
		n++
	}
	return n, r.end()
}
