package protocol

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Nullable is an optional field that may also be JSON null: it is absent
// (the zero value, omitted thanks to the `omitzero` tag option), null, or a
// value. Required nullable fields use a plain pointer instead.
type Nullable[T any] struct {
	value T
	state nullState
}

type nullState uint8

const (
	nullAbsent nullState = iota
	nullNull
	nullValue
)

// Null returns a present Nullable holding JSON null.
func Null[T any]() Nullable[T] { return Nullable[T]{state: nullNull} }

// Some returns a present Nullable holding v.
func Some[T any](v T) Nullable[T] { return Nullable[T]{value: v, state: nullValue} }

// Get returns the value and whether there is one (false when absent or null).
func (n Nullable[T]) Get() (T, bool) { return n.value, n.state == nullValue }

// IsNull reports whether the field is present and null.
func (n Nullable[T]) IsNull() bool { return n.state == nullNull }

// IsZero reports whether the field is absent; encoding/json's omitzero and
// Marshal use it to omit the field.
func (n Nullable[T]) IsZero() bool { return n.state == nullAbsent }

// String renders the field for debugging: <absent>, null, or the value.
func (n Nullable[T]) String() string {
	switch n.state {
	case nullNull:
		return "null"
	case nullValue:
		return fmt.Sprint(n.value)
	}
	return "<absent>"
}

// MarshalJSON encodes null or the value. An absent field encodes as null
// too; struct fields should carry `omitzero` so that absent ones are left out.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if n.state != nullValue {
		return []byte("null"), nil
	}
	return json.Marshal(n.value)
}

// UnmarshalJSON decodes null or a value.
func (n *Nullable[T]) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*n = Null[T]()
		return nil
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*n = Some(v)
	return nil
}

// Equal reports whether two Nullables are the same (used by go-cmp).
func (n Nullable[T]) Equal(o Nullable[T]) bool {
	if n.state != o.state {
		return false
	}
	return n.state != nullValue || reflect.DeepEqual(n.value, o.value)
}

// nullable is how the reflective codec reaches into a Nullable.
type nullable interface {
	nullableElem() reflect.Type
	nullableState() nullState
	nullableValue() reflect.Value
}

// nullableSetter is implemented by *Nullable.
type nullableSetter interface {
	setNull()
	// setPresent marks the field as holding a value and returns the
	// settable value to decode into.
	setPresent() reflect.Value
}

func (n Nullable[T]) nullableElem() reflect.Type   { return reflect.TypeFor[T]() }
func (n Nullable[T]) nullableState() nullState     { return n.state }
func (n Nullable[T]) nullableValue() reflect.Value { return reflect.ValueOf(n.value) }
func (n *Nullable[T]) setNull()                    { *n = Null[T]() }
func (n *Nullable[T]) setPresent() reflect.Value {
	n.state = nullValue
	return reflect.ValueOf(&n.value).Elem()
}
