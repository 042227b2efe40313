package piece

import (
	"fmt"
	"strings"
)

// Error is one fault of a piece file.
type Error struct {
	// File is the name the caller gave the file (a path, or a label such
	// as "builtin:code.yaml").
	File string
	// Line and Col locate the fault, 1-based; zero when unknown.
	Line int
	Col  int
	// Field is the path of the offending field, for example
	// "movements[2].rules[0].next"; empty for faults of the whole file
	// (syntax errors, empty documents).
	Field string
	// Message says what was expected and what was found.
	Message string
}

// Error formats the fault as "file:line:col: field: message", leaving out
// the parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	e.write(&b)
	return b.String()
}

func (e *Error) write(b *strings.Builder) {
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(b, ":%d:%d", e.Line, e.Col)
	}
	if e.File != "" || e.Line > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
}

// Errors is every fault found in one piece file, ordered by position.
// [Parse] returns it (as error) whenever a file is not a valid piece; it is
// never empty.
type Errors struct {
	List []Error
}

// Error prints one fault per line.
func (e *Errors) Error() string {
	var b strings.Builder
	for i := range e.List {
		if i > 0 {
			b.WriteByte('\n')
		}
		e.List[i].write(&b)
	}
	return b.String()
}

// Unwrap exposes each fault to errors.Is and errors.As.
func (e *Errors) Unwrap() []error {
	out := make([]error, len(e.List))
	for i := range e.List {
		out[i] = &e.List[i]
	}
	return out
}
