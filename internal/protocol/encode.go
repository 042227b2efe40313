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
	"unicode/utf8"
)

// The encoder walks a typeSpec; it never calls the MarshalJSON methods of
// this package's types (which call it), so each value is encoded once.

func appendValue(b []byte, ts *typeSpec, v reflect.Value) ([]byte, error) {
	switch ts.kind {
	case kindString:
		return appendString(b, v.String()), nil
	case kindBool:
		return strconv.AppendBool(b, v.Bool()), nil
	case kindInt:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case kindFloat:
		return appendFloat(b, v.Float())
	case kindRaw:
		raw := v.Bytes()
		if len(raw) == 0 {
			return append(b, "null"...), nil
		}
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, raw); err != nil {
			return b, fmt.Errorf("invalid raw JSON value: %w", err)
		}
		return buf.Bytes(), nil
	case kindStruct:
		return appendStruct(b, ts, v)
	case kindUnion:
		return appendUnion(b, ts, v)
	case kindSlice:
		b = append(b, '[')
		for i := range v.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, ts.elem, v.Index(i)); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case kindMap:
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, ts.elem, v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key()))); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case kindPtr:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendValue(b, ts.elem, v.Elem())
	case kindNullable:
		n := v.Interface().(nullable)
		if n.nullableState() != nullValue {
			return append(b, "null"...), nil
		}
		return appendValue(b, ts.elem, n.nullableValue())
	case kindMessage:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return AppendMarshal(b, v.Interface().(Message))
	}
	return b, fmt.Errorf("cannot encode %v", ts.t)
}

func appendStruct(b []byte, ts *typeSpec, v reflect.Value) ([]byte, error) {
	b = append(b, '{')
	first := true
	if ts.msgType != "" {
		b = append(b, `"type":`...)
		b = appendString(b, ts.msgType)
		first = false
	}
	for _, f := range ts.fields {
		fv := v.Field(f.index)
		if !f.required && !f.always && isEmpty(f.ts, fv) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.key...)
		if f.constVal != "" && fv.Len() == 0 {
			b = appendString(b, f.constVal)
			continue
		}
		var err error
		if b, err = appendValue(b, f.ts, fv); err != nil {
			return b, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return append(b, '}'), nil
}

// appendUnion writes the discriminator and then exactly the fields of its
// variant, empty or not. A value with an unknown discriminator is written
// like a plain struct (and will fail validation).
func appendUnion(b []byte, ts *typeSpec, v reflect.Value) ([]byte, error) {
	tag := v.Field(ts.tagField.index).String()
	var fields []string
	found := false
	for _, vr := range ts.variants {
		if vr.tag == tag {
			fields, found = vr.fields, true
			break
		}
	}
	if !found {
		return appendStruct(b, ts, v)
	}
	b = append(b, '{')
	b = append(b, ts.tagField.key...)
	b = appendString(b, tag)
	for _, f := range ts.fields {
		if f == ts.tagField || !slices.Contains(fields, f.name) {
			continue
		}
		b = append(b, ',')
		b = append(b, f.key...)
		var err error
		if b, err = appendValue(b, f.ts, v.Field(f.index)); err != nil {
			return b, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return append(b, '}'), nil
}

// isEmpty reports whether an optional field is left out: the omitempty
// rule, and absence for Nullable.
func isEmpty(ts *typeSpec, v reflect.Value) bool {
	switch ts.kind {
	case kindString:
		return v.Len() == 0
	case kindBool:
		return !v.Bool()
	case kindInt:
		return v.Int() == 0
	case kindFloat:
		return v.Float() == 0
	case kindRaw, kindSlice, kindMap:
		return v.Len() == 0
	case kindPtr, kindMessage:
		return v.IsNil()
	case kindNullable:
		return v.Interface().(nullable).nullableState() == nullAbsent
	}
	return false
}

// appendFloat formats like encoding/json (and JavaScript): shortest
// representation, exponent form only for very small or large magnitudes.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, errors.New("unsupported number " + strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Turn e-09 into e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string as this package's encoder
// writes strings (appendString), for other hand-written encoders (the
// event bus's CloudEvents).
func AppendJSONString(b []byte, s string) []byte { return appendString(b, s) }

// appendString writes s as a JSON string. Unlike encoding/json it does not
// escape <, > and &; like it, it escapes U+2028 and U+2029 and replaces
// invalid UTF-8 with U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
