package httpedge

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// JSONTypeError says a JSON decoder's type error in JSON's words, never
// Go's: field is the value's dotted path ("" for the whole document) and
// msg is, for example, "expected an integer, found JSON string". ok is
// false when err is no type error.
func JSONTypeError(err error) (field, msg string, ok bool) {
	te, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if !ok {
		return "", "", false
	}
	return te.Field, fmt.Sprintf("expected %s, found JSON %s", JSONTypeName(te.Type), te.Value), true
}

// JSONTypeText is JSONTypeError as one text, "field: msg" (msg alone for
// the whole document), for errors that name no field otherwise.
func JSONTypeText(err error) (string, bool) {
	field, msg, ok := JSONTypeError(err)
	if ok && field != "" {
		msg = field + ": " + msg
	}
	return msg, ok
}

// JSONTypeName says what JSON value decodes into a value of type t ("an
// integer", "true or false", "a JSON object").
func JSONTypeName(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	}
	return "a JSON value"
}
