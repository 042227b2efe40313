package protocol

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
)

// Message is any protocol message, in either direction.
type Message interface {
	// MessageType returns the value of the message's "type" field.
	MessageType() string
}

// Marshal encodes m as one JSON object with its "type" field first.
//
// Messages of this package are encoded by the protocol codec: fields in
// declaration order, required nil lists as [], absent optional fields
// left out, nullable fields as null, no HTML escaping, and no newline
// anywhere in the output, so the result is one NDJSON line. Any other
// Message is encoded with encoding/json and the "type" field prepended.
func Marshal(m Message) ([]byte, error) {
	return AppendMarshal(make([]byte, 0, 256), m)
}

// AppendMarshal is Marshal appending to dst.
func AppendMarshal(dst []byte, m Message) ([]byte, error) {
	if m == nil {
		return dst, fmt.Errorf("encode message: nil Message")
	}
	v := reflect.ValueOf(m)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return dst, fmt.Errorf("encode %T message: nil pointer", m)
		}
		v = v.Elem()
	}
	if ts := theCatalogue().specOf(v.Type()); ts != nil && ts.msgType != "" {
		out, err := appendStruct(dst, ts, v)
		if err != nil {
			return dst, fmt.Errorf("encode %s message: %w", ts.msgType, err)
		}
		return out, nil
	}
	return appendForeign(dst, m)
}

// appendForeign encodes a Message type that is not one of this package's.
func appendForeign(dst []byte, m Message) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return dst, fmt.Errorf("encode %s message: %w", m.MessageType(), err)
	}
	if len(body) < 2 || body[0] != '{' {
		return dst, fmt.Errorf("encode %s message: not a JSON object", m.MessageType())
	}
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, m.MessageType())
	if len(body) > 2 {
		dst = append(dst, ',')
	}
	return append(dst, body[1:]...), nil
}

// Encode writes m to w as one line: Marshal's output and "\n".
func Encode(w io.Writer, m Message) error {
	buf, err := AppendMarshal(make([]byte, 0, 256), m)
	if err != nil {
		return err
	}
	buf = append(buf, '\n')
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write %s message: %w", m.MessageType(), err)
	}
	return nil
}

// marshalJSON implements the MarshalJSON methods of this package's types,
// so that encoding/json produces exactly what Marshal does (messages
// included, with their "type").
func marshalJSON(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	ts := theCatalogue().specOf(rv.Type())
	if ts == nil {
		return nil, fmt.Errorf("encode %T: not a protocol type", v)
	}
	out, err := appendValue(make([]byte, 0, 128), ts, rv)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return out, nil
}
