package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/jsonesc"
)

// DecodeError is an input line that is not a valid protocol message. Its
// Message is the exact text a transport reports to the client, for example
// "Failed to parse command: Invalid headless command: /capabilities/foo
// Unexpected property"; ProtocolError turns it into an error message.
type DecodeError struct {
	// Message is the full text reported on the wire.
	Message string
	// Path is the JSON pointer of the offending value ("" for the whole
	// line, and for syntax errors).
	Path string
	// Offset is the byte offset at which the problem was detected.
	Offset int
	// Syntax is true when the line is not valid JSON.
	Syntax bool
}

func (e *DecodeError) Error() string { return e.Message }

// ProtocolError returns the non-fatal protocol error message a transport
// emits when a line fails to decode:
// {"type":"error","message":…,"fatal":false,"error_type":"protocol"}.
// A *DecodeError supplies the message verbatim; any other error is
// reported as "Failed to parse command: <err>".
func ProtocolError(err error) Error {
	msg := "Failed to parse command: "
	var de *DecodeError
	switch {
	case errors.As(err, &de):
		msg = de.Message
	case err != nil:
		msg += err.Error()
	default:
		msg += "no error"
	}
	return Error{Message: msg, Fatal: false, ErrorType: ErrorProtocol}
}

// DecodeClient strictly decodes one client → server line (wire contract §5,
// §8.3): unknown message types, unknown properties at any depth, missing
// required fields, wrong JSON types, enum violations and duplicate keys are
// all errors of type *DecodeError carrying the text the server reports.
// The returned Message is a value of one of the types listed by
// ClientMessages (for example Prompt, not *Prompt).
func DecodeClient(line []byte) (Message, error) {
	return decodeFamily(line, theCatalogue().client)
}

// DecodeServer strictly decodes one server → client line, like
// DecodeClient (errors read "Failed to parse message: …").
func DecodeServer(line []byte) (Message, error) {
	return decodeFamily(line, theCatalogue().server)
}

// DecodeEnvelope strictly decodes the JSON of one SSE data line: a
// SnapshotEnvelope, MessageEnvelope, HeartbeatEnvelope or ResetEnvelope.
func DecodeEnvelope(line []byte) (Message, error) {
	return decodeFamily(line, theCatalogue().envelope)
}

// DecodeSnapshot strictly decodes a runtime snapshot, as returned by the
// HTTP state endpoints.
func DecodeSnapshot(data []byte) (Snapshot, error) {
	c := theCatalogue()
	d := decoder{data: data, fam: &family{parse: "Failed to parse snapshot: ", invalid: "Invalid headless snapshot: "}}
	var s Snapshot
	d.ws()
	var err error
	if d.pos < len(d.data) && d.data[d.pos] != '{' {
		err = d.schemaError("Expected object")
	} else {
		err = d.decodeValue(c.snapshot, nil, reflect.ValueOf(&s).Elem())
	}
	if err = d.finish(err); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// UnmarshalJSON strictly decodes a message envelope (with its "type").
func (e *MessageEnvelope) UnmarshalJSON(data []byte) error {
	m, err := DecodeEnvelope(data)
	if err != nil {
		return err
	}
	me, ok := m.(MessageEnvelope)
	if !ok {
		return fmt.Errorf("decode message envelope: got a %s envelope", m.MessageType())
	}
	*e = me
	return nil
}

func decodeFamily(data []byte, fam *family) (Message, error) {
	d := decoder{data: data, fam: fam}
	m, err := d.message()
	if err = d.finish(err); err != nil {
		return nil, err
	}
	return m, nil
}

// message decodes a message of the decoder's family.
func (d *decoder) message() (Message, error) {
	d.ws()
	if d.pos >= len(d.data) {
		return nil, d.eof()
	}
	if d.data[d.pos] != '{' {
		return nil, d.plainError(d.fam.noType, "/type")
	}
	name, ok, err := d.peekType()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, d.plainError(d.fam.noType, "/type")
	}
	ts := d.fam.byType[string(name)]
	if ts == nil {
		return nil, d.plainError(d.fam.unknown, "/type")
	}
	p := reflect.New(ts.t)
	if err := d.decodeStruct(ts, p.Elem(), true); err != nil {
		return nil, err
	}
	return p.Elem().Interface().(Message), nil
}

// maxDepth bounds the nesting of JSON values.
const maxDepth = 10000

type pathSeg struct {
	key   string
	index int // >= 0 for array elements
}

type decoder struct {
	data  []byte
	pos   int
	depth int
	fam   *family
	buf   []byte // scratch for unescaped strings
	// inRaw is set while skipping an any-JSON value that will be kept:
	// its numbers must then fit a float64, as for encoding/json and
	// JavaScript, so that the value can be re-encoded and re-read.
	inRaw bool
}

// schemaErr is a schema violation on its way up the decoder: each level
// adds its path segment (in reverse), and finish turns it into a
// *DecodeError. The success path thus pays nothing for paths.
type schemaErr struct {
	rev []pathSeg
	msg string
	off int
}

func (e *schemaErr) Error() string { return e.msg }

// atKey and atIndex add a path segment to a schema error.
func atKey(err error, key string) error {
	if se, ok := err.(*schemaErr); ok {
		se.rev = append(se.rev, pathSeg{key: key, index: -1})
	}
	return err
}

func atIndex(err error, i int) error {
	if se, ok := err.(*schemaErr); ok {
		se.rev = append(se.rev, pathSeg{index: i})
	}
	return err
}

func (e *schemaErr) pointer() string {
	var sb strings.Builder
	for i := len(e.rev) - 1; i >= 0; i-- {
		s := e.rev[i]
		sb.WriteByte('/')
		if s.index >= 0 {
			sb.WriteString(strconv.Itoa(s.index))
			continue
		}
		k := strings.ReplaceAll(s.key, "~", "~0")
		sb.WriteString(strings.ReplaceAll(k, "/", "~1"))
	}
	return sb.String()
}

// finish completes a decode that returned err: on success it requires the
// input to end; on a schema error it checks the syntax of the whole input,
// because syntax errors win wherever they are (a client sees the JSON parse
// error first, as from JSON.parse).
func (d *decoder) finish(err error) error {
	if err == nil {
		d.ws()
		if d.pos < len(d.data) {
			return d.syntaxError(fmt.Sprintf("Unexpected non-whitespace character after JSON at position %d", d.pos))
		}
		return nil
	}
	var de *DecodeError
	se, isSchema := err.(*schemaErr)
	if isSchema || errors.As(err, &de) && !de.Syntax {
		s := decoder{data: d.data, fam: d.fam}
		if serr := s.checkSyntax(); serr != nil {
			return serr
		}
	}
	if isSchema {
		p := se.pointer()
		text := d.fam.parse + d.fam.invalid
		if p != "" {
			text += p + " "
		}
		return &DecodeError{Message: text + se.msg, Path: p, Offset: se.off}
	}
	return err
}

func (d *decoder) checkSyntax() error {
	if err := d.skipValue(); err != nil {
		return err
	}
	d.ws()
	if d.pos < len(d.data) {
		return d.syntaxError(fmt.Sprintf("Unexpected non-whitespace character after JSON at position %d", d.pos))
	}
	return nil
}

// Errors.

func (d *decoder) syntaxError(msg string) error {
	return &DecodeError{Message: d.fam.parse + msg, Offset: d.pos, Syntax: true}
}

func (d *decoder) eof() error {
	return d.syntaxError("Unexpected end of JSON input")
}

func (d *decoder) unexpected() error {
	if d.pos >= len(d.data) {
		return d.eof()
	}
	c := d.data[d.pos]
	tok := strconv.QuoteRuneToASCII(rune(c))
	if c >= utf8.RuneSelf {
		r, _ := utf8.DecodeRune(d.data[d.pos:])
		tok = strconv.QuoteRuneToASCII(r)
	}
	return d.syntaxError(fmt.Sprintf("Unexpected token %s in JSON at position %d", tok, d.pos))
}

func (d *decoder) plainError(msg, path string) error {
	return &DecodeError{Message: d.fam.parse + msg, Path: path, Offset: d.pos}
}

// schemaError reports msg about the value being decoded; callers add the
// path on the way up.
func (d *decoder) schemaError(msg string) error {
	return &schemaErr{msg: msg, off: d.pos}
}

func (d *decoder) typeError(ts *typeSpec, nullable bool) error {
	msg := "Expected " + jsonTypeName(ts)
	if nullable {
		msg += " or null"
	}
	return d.schemaError(msg)
}

func jsonTypeName(ts *typeSpec) string {
	switch ts.kind {
	case kindString:
		return "string"
	case kindBool:
		return "boolean"
	case kindInt:
		return "integer"
	case kindFloat:
		return "number"
	case kindSlice:
		return "array"
	case kindPtr, kindNullable:
		return jsonTypeName(ts.elem)
	}
	return "object"
}

func enumMessage(values []string) string {
	var sb strings.Builder
	sb.WriteString("Expected one of ")
	for i, v := range values {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Quote(v))
	}
	return sb.String()
}

// Lexing.

func (d *decoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// expect consumes byte c after optional whitespace.
func (d *decoder) expect(c byte) error {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return nil
	}
	return d.unexpected()
}

func (d *decoder) literal(lit string) error {
	for i := range len(lit) {
		if d.pos >= len(d.data) || d.data[d.pos] != lit[i] {
			return d.unexpected()
		}
		d.pos++
	}
	return nil
}

// readString reads the string at d.pos (which holds '"') and returns its
// unescaped bytes. The result aliases the input or the decoder's scratch
// buffer: use it before the next readString. Invalid UTF-8 becomes U+FFFD,
// as with encoding/json.
func (d *decoder) readString() ([]byte, error) {
	start := d.pos + 1
	for i := start; i < len(d.data); i++ {
		c := d.data[i]
		if c == '"' {
			d.pos = i + 1
			return d.data[start:i], nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return d.readStringSlow(start, i)
		}
	}
	d.pos = len(d.data)
	return nil, d.syntaxError(fmt.Sprintf("Unterminated string in JSON at position %d", len(d.data)))
}

func (d *decoder) readStringSlow(start, i int) ([]byte, error) {
	b := append(d.buf[:0], d.data[start:i]...)
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.buf = b
			return b, nil
		case c == '\\':
			if i+1 >= len(d.data) {
				i++
				continue
			}
			e := d.data[i+1]
			if u, ok := jsonesc.Simple(e); ok {
				b = append(b, u)
				i += 2
				continue
			}
			if e != 'u' {
				d.pos = i
				return nil, d.syntaxError(fmt.Sprintf("Bad escaped character in JSON at position %d", i+1))
			}
			r, ok := jsonesc.Hex4(d.data[i+2:])
			if !ok {
				d.pos = i
				return nil, d.syntaxError(fmt.Sprintf("Bad Unicode escape in JSON at position %d", i))
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if i+1 < len(d.data) && d.data[i] == '\\' && d.data[i+1] == 'u' {
					r2, ok = jsonesc.Hex4(d.data[i+2:])
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		case c < 0x20:
			d.pos = i
			return nil, d.syntaxError(fmt.Sprintf("Bad control character in string literal in JSON at position %d", i))
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(d.data[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, d.data[i:i+size]...)
			}
			i += size
		}
	}
	d.pos = len(d.data)
	d.buf = b
	return nil, d.syntaxError(fmt.Sprintf("Unterminated string in JSON at position %d", len(d.data)))
}

// readNumber reads a number per the JSON grammar and returns its text.
func (d *decoder) readNumber() ([]byte, error) {
	start := d.pos
	digits := func() bool {
		n := d.pos
		for d.pos < len(d.data) && '0' <= d.data[d.pos] && d.data[d.pos] <= '9' {
			d.pos++
		}
		return d.pos > n
	}
	if d.pos < len(d.data) && d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos >= len(d.data):
		return nil, d.eof()
	case d.data[d.pos] == '0':
		d.pos++
	case '1' <= d.data[d.pos] && d.data[d.pos] <= '9':
		digits()
	default:
		return nil, d.syntaxError(fmt.Sprintf("No number after minus sign in JSON at position %d", d.pos))
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if !digits() {
			return nil, d.unterminatedNumber()
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if !digits() {
			return nil, d.unterminatedNumber()
		}
	}
	return d.data[start:d.pos], nil
}

func (d *decoder) unterminatedNumber() error {
	if d.pos >= len(d.data) {
		return d.eof()
	}
	return d.syntaxError(fmt.Sprintf("Unterminated fractional number in JSON at position %d", d.pos))
}

func (d *decoder) enter() error {
	d.depth++
	if d.depth > maxDepth {
		return d.syntaxError(fmt.Sprintf("JSON nested too deeply at position %d", d.pos))
	}
	return nil
}

// skipValue consumes and checks one JSON value of any kind.
func (d *decoder) skipValue() error {
	d.ws()
	if d.pos >= len(d.data) {
		return d.eof()
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(func([]byte) error { return d.skipValue() })
	case c == '[':
		return d.array(func(int) error { return d.skipValue() })
	case c == '"':
		_, err := d.readString()
		return err
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		num, err := d.readNumber()
		if err == nil && d.inRaw && (len(num) > 300 || bytes.IndexAny(num, "eE") >= 0) {
			if _, perr := strconv.ParseFloat(string(num), 64); perr != nil {
				return d.schemaError("Number out of range")
			}
		}
		return err
	}
	return d.unexpected()
}

// object reads the object at d.pos (which holds '{'), calling member for
// each key with d.pos at the member's value, which member must consume.
// The key aliases the input or scratch buffer, as from readString. It is
// the one loop over members that skipping, peeking and typed decoding share.
func (d *decoder) object(member func(key []byte) error) error {
	empty, err := d.open('}')
	for more := !empty; err == nil && more; {
		d.ws()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return d.unexpected()
		}
		var key []byte
		if key, err = d.readString(); err != nil {
			return err
		}
		if err = d.expect(':'); err != nil {
			return err
		}
		if err = member(key); err != nil {
			return err
		}
		more, err = d.next('}')
	}
	return err
}

// array reads the array at d.pos (which holds '['), calling elem for each
// element (i counts from 0) with d.pos at the element, which elem must
// consume.
func (d *decoder) array(elem func(i int) error) error {
	empty, err := d.open(']')
	for i, more := 0, !empty; err == nil && more; i++ {
		if err = elem(i); err != nil {
			return err
		}
		more, err = d.next(']')
	}
	return err
}

// open enters the object or array at d.pos and reports whether it is
// empty, in which case it is consumed whole.
func (d *decoder) open(closer byte) (empty bool, err error) {
	if err := d.enter(); err != nil {
		return false, err
	}
	d.pos++
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == closer {
		d.pos++
		d.depth--
		return true, nil
	}
	return false, nil
}

// next consumes the ',' after a member or element and reports true, or the
// closing byte (leaving the value) and reports false.
func (d *decoder) next(closer byte) (more bool, err error) {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == ',' {
		d.pos++
		return true, nil
	}
	if err := d.expect(closer); err != nil {
		return false, err
	}
	d.depth--
	return false, nil
}

// peekType finds the string value of the "type" key of the object at d.pos
// without consuming anything. ok is false when there is no such key or its
// value is not a string. The name aliases the input or scratch buffer.
func (d *decoder) peekType() (name []byte, ok bool, err error) {
	save, saveDepth := d.pos, d.depth
	defer func() { d.pos, d.depth = save, saveDepth }()
	err = d.object(func(key []byte) error {
		if string(key) != "type" {
			return d.skipValue()
		}
		d.ws()
		if d.pos < len(d.data) && d.data[d.pos] == '"' {
			var err error
			name, err = d.readString()
			ok = err == nil
			if err != nil {
				return err
			}
		}
		return errTypeFound
	})
	if err == errTypeFound {
		err = nil
	}
	return name, ok, err
}

// errTypeFound ends peekType's walk over the object at its "type" key.
var errTypeFound = errors.New("protocol: type key found")

// Typed decoding.

// decodeValue decodes the value at d.pos into v, described by ts; f is the
// field holding it (nil for array elements and map values).
func (d *decoder) decodeValue(ts *typeSpec, f *fieldSpec, v reflect.Value) error {
	d.ws()
	if d.pos >= len(d.data) {
		return d.eof()
	}
	c := d.data[d.pos]
	if c == 'n' && ts.kind != kindRaw {
		if f == nil || !f.nullable {
			return d.typeError(ts, false)
		}
		if err := d.literal("null"); err != nil {
			return err
		}
		if ts.kind == kindNullable {
			v.Addr().Interface().(nullableSetter).setNull()
		} else {
			v.SetZero()
		}
		return nil
	}
	nullable := f != nil && f.nullable
	switch ts.kind {
	case kindString:
		if c != '"' {
			return d.typeError(ts, nullable)
		}
		s, err := d.readString()
		if err != nil {
			return err
		}
		if ts.enum != nil && !containsBytes(ts.enum, s) {
			return d.schemaError(enumMessage(ts.enum))
		}
		if f != nil && f.constVal != "" && string(s) != f.constVal {
			return d.schemaError("Expected " + strconv.Quote(f.constVal))
		}
		v.SetString(string(s))
	case kindBool:
		switch c {
		case 't':
			if err := d.literal("true"); err != nil {
				return err
			}
			v.SetBool(true)
		case 'f':
			if err := d.literal("false"); err != nil {
				return err
			}
			v.SetBool(false)
		default:
			return d.typeError(ts, nullable)
		}
	case kindInt:
		if c != '-' && (c < '0' || c > '9') {
			return d.typeError(ts, nullable)
		}
		num, err := d.readNumber()
		if err != nil {
			return err
		}
		n, ok := parseInt(num)
		if !ok {
			return d.typeError(ts, nullable)
		}
		if f != nil && f.min != nil && n < *f.min {
			return d.schemaError(fmt.Sprintf("Expected integer to be greater or equal to %d", *f.min))
		}
		v.SetInt(n)
	case kindFloat:
		if c != '-' && (c < '0' || c > '9') {
			return d.typeError(ts, nullable)
		}
		num, err := d.readNumber()
		if err != nil {
			return err
		}
		x, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			return d.typeError(ts, nullable)
		}
		v.SetFloat(x)
	case kindRaw:
		start := d.pos
		d.inRaw = true
		err := d.skipValue()
		d.inRaw = false
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, d.data[start:d.pos]); err != nil {
			return d.syntaxError(err.Error())
		}
		v.SetBytes(buf.Bytes())
	case kindStruct, kindUnion:
		if c != '{' {
			return d.typeError(ts, nullable)
		}
		return d.decodeStruct(ts, v, false)
	case kindSlice:
		if c != '[' {
			return d.typeError(ts, nullable)
		}
		return d.decodeSlice(ts, f, v)
	case kindMap:
		if c != '{' {
			return d.typeError(ts, nullable)
		}
		return d.decodeMap(ts, v)
	case kindPtr:
		p := reflect.New(ts.elem.t)
		if err := d.decodeValue(ts.elem, f, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
	case kindNullable:
		return d.decodeValue(ts.elem, f, v.Addr().Interface().(nullableSetter).setPresent())
	case kindMessage:
		if c != '{' {
			return d.typeError(ts, nullable)
		}
		name, ok, err := d.peekType()
		if err != nil {
			return err
		}
		if !ok {
			return atKey(d.schemaError("Expected known headless "+ts.family.name+" type"), "type")
		}
		mts := ts.family.byType[string(name)]
		if mts == nil {
			return atKey(d.schemaError(ts.family.unknown), "type")
		}
		m := reflect.New(mts.t).Elem()
		if err := d.decodeStruct(mts, m, true); err != nil {
			return err
		}
		v.Set(m)
	default:
		return d.schemaError("Unsupported value")
	}
	return nil
}

// decodeStruct decodes the object at d.pos into the struct v. typeChecked
// says the caller already read and checked the object's "type" (messages
// decoded through their family).
func (d *decoder) decodeStruct(ts *typeSpec, v reflect.Value, typeChecked bool) error {
	var seen uint64
	typeSeen := false
	err := d.object(func(key []byte) error {
		if f := ts.byName[string(key)]; f != nil {
			if seen&f.bit != 0 {
				return atKey(d.schemaError("Duplicate property"), f.name)
			}
			seen |= f.bit
			if err := d.decodeValue(f.ts, f, v.Field(f.index)); err != nil {
				return atKey(err, f.name)
			}
			return nil
		}
		if ts.msgType == "" || string(key) != "type" {
			return atKey(d.schemaError("Unexpected property"), string(key))
		}
		if typeSeen {
			return atKey(d.schemaError("Duplicate property"), "type")
		}
		typeSeen = true
		if typeChecked {
			return d.skipValue()
		}
		if err := d.expectConst(ts.msgType); err != nil {
			return atKey(err, "type")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if ts.msgType != "" && !typeChecked && !typeSeen {
		return d.missing("type")
	}
	if ts.kind == kindUnion {
		return d.checkVariant(ts, v, seen)
	}
	for _, f := range ts.fields {
		if f.required && seen&f.bit == 0 {
			return d.missing(f.name)
		}
	}
	return nil
}

func (d *decoder) missing(name string) error {
	return atKey(d.schemaError("Expected required property"), name)
}

func (d *decoder) expectConst(want string) error {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == '"' {
		s, err := d.readString()
		if err != nil {
			return err
		}
		if string(s) == want {
			return nil
		}
	}
	return d.schemaError("Expected " + strconv.Quote(want))
}

// checkVariant enforces a union's variant: the discriminator is required,
// the variant's fields are required, no other field is allowed.
func (d *decoder) checkVariant(ts *typeSpec, v reflect.Value, seen uint64) error {
	if seen&ts.tagField.bit == 0 {
		return d.missing(ts.tagField.name)
	}
	tag := v.Field(ts.tagField.index).String()
	var allowed []string
	for _, vr := range ts.variants {
		if vr.tag == tag {
			allowed = vr.fields
		}
	}
	for _, f := range ts.fields {
		if f != ts.tagField && seen&f.bit != 0 && !slices.Contains(allowed, f.name) {
			return atKey(d.schemaError("Unexpected property"), f.name)
		}
	}
	for _, f := range ts.fields {
		if f != ts.tagField && seen&f.bit == 0 && slices.Contains(allowed, f.name) {
			return d.missing(f.name)
		}
	}
	return nil
}

func (d *decoder) decodeSlice(ts *typeSpec, f *fieldSpec, v reflect.Value) error {
	// Decode in place into the (addressable) destination.
	v.SetLen(0)
	err := d.array(func(i int) error {
		if i == v.Cap() {
			v.Grow(max(4, i))
		}
		v.SetLen(i + 1)
		if err := d.decodeValue(ts.elem, nil, v.Index(i)); err != nil {
			return atIndex(err, i)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if v.IsNil() {
		v.Set(reflect.MakeSlice(ts.t, 0, 0))
	}
	if f != nil && f.unique && !uniqueItems(v) {
		return d.schemaError("Expected array items to be unique")
	}
	return nil
}

func (d *decoder) decodeMap(ts *typeSpec, v reflect.Value) error {
	m := reflect.MakeMap(ts.t)
	err := d.object(func(kb []byte) error {
		key := reflect.ValueOf(string(kb)).Convert(ts.t.Key())
		if m.MapIndex(key).IsValid() {
			return atKey(d.schemaError("Duplicate property"), key.String())
		}
		ev := reflect.New(ts.elem.t).Elem()
		if err := d.decodeValue(ts.elem, nil, ev); err != nil {
			return atKey(err, key.String())
		}
		m.SetMapIndex(key, ev)
		return nil
	})
	if err != nil {
		return err
	}
	v.Set(m)
	return nil
}

// parseInt parses a JSON number that must be an integer within int64;
// integral values written with a fraction or exponent (1.0, 1e3) are
// accepted, as JavaScript does not distinguish them.
func parseInt(num []byte) (int64, bool) {
	if bytes.IndexAny(num, ".eE") < 0 {
		n, err := strconv.ParseInt(string(num), 10, 64)
		return n, err == nil
	}
	x, err := strconv.ParseFloat(string(num), 64)
	if err != nil || x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 {
		return 0, false
	}
	return int64(x), true
}

func containsBytes(list []string, b []byte) bool {
	for _, s := range list {
		if s == string(b) {
			return true
		}
	}
	return false
}

// uniqueItems reports whether the elements of the slice s are distinct.
// Unique arrays hold strings.
func uniqueItems(s reflect.Value) bool {
	n := s.Len()
	if n < 2 {
		return true
	}
	if s.Type().Elem().Kind() == reflect.String {
		seen := make(map[string]struct{}, n)
		for i := range n {
			k := s.Index(i).String()
			if _, dup := seen[k]; dup {
				return false
			}
			seen[k] = struct{}{}
		}
		return true
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if reflect.DeepEqual(s.Index(i).Interface(), s.Index(j).Interface()) {
				return false
			}
		}
	}
	return true
}
