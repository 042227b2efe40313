package httpedge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// ErrJSONTrailing is DecodeJSON's error for data holding more than one
// JSON value.
var ErrJSONTrailing = errors.New("expected one JSON value, found more data after it")

// UnknownFieldError is DecodeJSON's error for an object key that names no
// field of the value it decodes into. Field is the key's path from the
// document ("Title", "items[2].nme"); Known is the field the key
// names when its case is ignored, if one is.
type UnknownFieldError struct {
	Field string
	Known string
}

func (e *UnknownFieldError) Error() string { return e.Field + ": " + e.Message() }

// Message says what is wrong with the field, without its name.
func (e *UnknownFieldError) Message() string {
	if e.Known != "" {
		return "unknown field; did you mean " + strconv.Quote(e.Known) + "? Field names match exactly, as docs/api.md writes them"
	}
	return "unknown field; see docs/api.md for the fields this route takes"
}

// DecodeJSON decodes data, one JSON value, into v as an API route takes a
// body: a key that names no field is refused, and so is one that names a
// field only when its case is ignored (encoding/json took {"TITLE": …} for
// "title", so a client's misspelt case worked until a field with that
// spelling came). The error is then an *UnknownFieldError; a value of the
// wrong type is the decoder's (see JSONTypeError); more than one value is
// ErrJSONTrailing; no value at all is io.EOF.
//
// A byte order mark before the value is skipped (RFC 8259 lets a parser
// ignore one; Windows editors write it, and the decoder said "invalid
// character 'ï'"), and a syntax error says where it is: "… at line 3,
// column 11".
func DecodeJSON(data []byte, v any) error {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		line, col := textPosition(data[:min(max(se.Offset-1, 0), int64(len(data)))])
		return fmt.Errorf("%w at line %d, column %d", err, line, col)
	}
	if err == io.ErrUnexpectedEOF {
		return errors.New("the body ends before its JSON value does (unexpected EOF)")
	}
	if err != nil {
		// The decoder reads the whole value before it decodes it, so a
		// type error or an unknown field means the value is well-formed
		// JSON, and its keys are checked for the better error: the
		// decoder names a field of the wrong type by the name it took
		// it for, and an unknown field without its path.
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); !ok && !strings.HasPrefix(err.Error(), "json: unknown field ") {
			return err
		}
	} else if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return ErrJSONTrailing
	}
	c := nameChecker{data: data}
	if ue := c.value(reflect.TypeOf(v)); ue != nil && !c.bad {
		return ue
	}
	return err
}

// textPosition is the line and column (in runes, from 1) just after
// text.
func textPosition(text []byte) (line, col int) {
	line = 1 + bytes.Count(text, []byte("\n"))
	last := text[bytes.LastIndexByte(text, '\n')+1:]
	return line, 1 + utf8.RuneCount(last)
}

// nameChecker walks one well-formed JSON value along the Go type it
// decodes into, checking each object key against the fields of that type.
type nameChecker struct {
	data []byte
	i    int
	bad  bool // the data was not well-formed after all: give up
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func (c *nameChecker) ws() {
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value checks the value at c.i, decoded into t (nil: any value), and
// moves past it. An unknown field's path is relative to the value; the
// callers prefix it on the way out, so that a body without one costs no
// path.
func (c *nameChecker) value(t reflect.Type) *UnknownFieldError {
	c.ws()
	if c.i >= len(c.data) {
		c.bad = true
		return nil
	}
	for t != nil && t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			t = nil
			break
		}
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface) {
		t = nil // the type reads its own JSON (json.RawMessage, …)
	}
	switch c.data[c.i] {
	case '{':
		return c.object(t)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		c.i++
		for n := 0; !c.bad; n++ {
			c.ws()
			if c.i >= len(c.data) {
				c.bad = true
				return nil
			}
			if c.data[c.i] == ']' {
				c.i++
				return nil
			}
			if ue := c.value(elem); ue != nil {
				ue.Field = "[" + strconv.Itoa(n) + "]" + dotted(ue.Field)
				return ue
			}
			c.ws()
			if c.i < len(c.data) && c.data[c.i] == ',' {
				c.i++
			}
		}
		return nil
	case '"':
		c.str()
		return nil
	}
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return nil
		}
		c.i++
	}
	return nil
}

// object checks the object at c.i (decoded into t: a struct's keys are its
// fields' names, a map's are free).
func (c *nameChecker) object(t reflect.Type) *UnknownFieldError {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = jsonFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	c.i++
	for !c.bad {
		c.ws()
		if c.i >= len(c.data) {
			c.bad = true
			return nil
		}
		if c.data[c.i] == '}' {
			c.i++
			return nil
		}
		key := c.str()
		c.ws()
		if c.i >= len(c.data) || c.data[c.i] != ':' {
			c.bad = true
			return nil
		}
		c.i++
		vt := elem
		if fields != nil {
			ft, ok := fields[string(key)]
			if !ok {
				ue := &UnknownFieldError{Field: string(key)}
				for name := range fields {
					if strings.EqualFold(name, ue.Field) {
						ue.Known = name
					}
				}
				return ue
			}
			vt = ft
		}
		if ue := c.value(vt); ue != nil {
			ue.Field = string(key) + dotted(ue.Field)
			return ue
		}
		c.ws()
		if c.i < len(c.data) && c.data[c.i] == ',' {
			c.i++
		}
	}
	return nil
}

// dotted is the path of a field inside a value, as it follows the value's
// own: ".name", or "[2]…" for an element.
func dotted(inner string) string {
	if strings.HasPrefix(inner, "[") {
		return inner
	}
	return "." + inner
}

// str reads the string at c.i and returns it unquoted (data's own bytes
// when it has no escapes).
func (c *nameChecker) str() []byte {
	if c.i >= len(c.data) || c.data[c.i] != '"' {
		c.bad = true
		return nil
	}
	start := c.i
	escaped := false
	for c.i++; c.i < len(c.data); c.i++ {
		switch c.data[c.i] {
		case '\\':
			escaped = true
			c.i++
		case '"':
			c.i++
			if !escaped {
				return c.data[start+1 : c.i-1]
			}
			var s string
			if json.Unmarshal(c.data[start:c.i], &s) != nil {
				c.bad = true
			}
			return []byte(s)
		}
	}
	c.bad = true
	return nil
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields maps the JSON names of a struct's fields, as encoding/json
// reads them (tags, embedded structs' promoted fields), to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	addJSONFields(fields, t, 0)
	fieldCache.Store(t, fields)
	return fields
}

func addJSONFields(fields map[string]reflect.Type, t reflect.Type, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if depth < 16 {
					addJSONFields(fields, ft, depth+1)
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := fields[name]; !taken || depth == 0 {
			fields[name] = f.Type
		}
	}
}
