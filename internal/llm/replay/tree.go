package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/yamlnode"
)

// The file is first read into a small position-carrying tree (from JSON or
// YAML alike) so that one validator can check every field, report every
// problem with its line and column, and never stop at the first one.

// nodeKind is the JSON type of a node.
type nodeKind int

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindObject
	kindArray
)

func (k nodeKind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindObject:
		return "an object"
	default:
		return "an array"
	}
}

// pos is a 1-based line and column (in characters); 0 when unknown.
type pos struct{ line, col int }

// node is one value of the document.
type node struct {
	kind nodeKind
	pos  pos
	// str is a string's value or a number's literal (valid JSON).
	str    string
	b      bool
	fields []field // objects, in document order, duplicates kept
	items  []*node // arrays
}

// field is one member of an object.
type field struct {
	key string
	pos pos // of the key
	val *node
}

// format is the syntax of a scenario file.
type format int

const (
	formatJSON format = iota
	formatYAML
)

// lineIndex converts byte offsets to line:column.
type lineIndex struct {
	data   []byte
	starts []int // byte offset of each line's start
}

func newLineIndex(data []byte) *lineIndex {
	li := &lineIndex{data: data, starts: []int{0}}
	for i, c := range data {
		if c == '\n' {
			li.starts = append(li.starts, i+1)
		}
	}
	return li
}

func (li *lineIndex) pos(off int) pos {
	off = min(max(off, 0), len(li.data))
	// The last line start <= off.
	lo, hi := 0, len(li.starts)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if li.starts[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return pos{line: lo + 1, col: utf8.RuneCount(li.data[li.starts[lo]:off]) + 1}
}

// jsonReader builds a tree from JSON with json.Decoder tokens, recording
// where each token starts.
type jsonReader struct {
	data  []byte
	dec   *json.Decoder
	lines *lineIndex
}

// parseJSONTree reads one JSON value. A syntax error is returned as a
// problem carrying its position.
func parseJSONTree(data []byte) (*node, *Problem) {
	r := &jsonReader{data: data, dec: json.NewDecoder(bytes.NewReader(data)), lines: newLineIndex(data)}
	r.dec.UseNumber()
	root, err := r.value()
	if err != nil {
		return nil, r.syntaxProblem(err)
	}
	start := r.tokenStart()
	if _, err := r.dec.Token(); err != io.EOF {
		if err != nil {
			return nil, r.syntaxProblem(err)
		}
		p := r.lines.pos(start)
		return nil, &Problem{Line: p.line, Column: p.col, Message: "unexpected data after the top-level value"}
	}
	return root, nil
}

// tokenStart is the offset where the next token begins: the decoder's
// offset past any whitespace and separators.
func (r *jsonReader) tokenStart() int {
	off := int(r.dec.InputOffset())
	for off < len(r.data) {
		switch r.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (r *jsonReader) syntaxProblem(err error) *Problem {
	off, msg := r.tokenStart(), err.Error()
	// A Decoder's offsets are relative to its buffer; a whole-input
	// Unmarshal reports the same error with an absolute offset.
	var v any
	if uerr := json.Unmarshal(r.data, &v); uerr != nil {
		if se, ok := errors.AsType[*json.SyntaxError](uerr); ok {
			off, msg = int(se.Offset)-1, se.Error() // Offset counts the offending byte.
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.HasPrefix(msg, "unexpected end of JSON input") {
		off, msg = len(r.data), "unexpected end of input"
	}
	p := r.lines.pos(off)
	return &Problem{Line: p.line, Column: p.col, Message: "invalid JSON: " + msg}
}

func (r *jsonReader) value() (*node, error) {
	p := r.lines.pos(r.tokenStart())
	tok, err := r.dec.Token()
	if err != nil {
		return nil, err
	}
	n := &node{pos: p}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = kindObject
			for r.dec.More() {
				kp := r.lines.pos(r.tokenStart())
				kt, err := r.dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				v, err := r.value()
				if err != nil {
					return nil, err
				}
				n.fields = append(n.fields, field{key: key, pos: kp, val: v})
			}
		case '[':
			n.kind = kindArray
			for r.dec.More() {
				v, err := r.value()
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
		default:
			return nil, fmt.Errorf("unexpected %q", rune(t))
		}
		if _, err := r.dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
	case string:
		n.kind, n.str = kindString, t
	case json.Number:
		n.kind, n.str = kindNumber, t.String()
	case bool:
		n.kind, n.b = kindBool, t
	case nil:
		n.kind = kindNull
	}
	return n, nil
}

// parseYAMLTree reads one YAML document. Problems that are not syntax
// errors (unsupported tags, non-scalar keys, NaN) are all returned.
func parseYAMLTree(data []byte) (*node, []Problem) {
	var docs []yaml.Node
	if err := yaml.Load(data, &docs, yaml.WithAllDocuments()); err != nil {
		p := Problem{Message: "invalid YAML: " + err.Error()}
		if le, ok := errors.AsType[*yaml.LoadError](err); ok {
			p.Line, p.Column, p.Message = le.Mark.Line, le.Mark.Column, "invalid YAML: "+le.Message
		} else if les, ok := errors.AsType[*yaml.LoadErrors](err); ok && len(les.Errors) > 0 {
			le := les.Errors[0]
			p.Line, p.Column, p.Message = le.Mark.Line, le.Mark.Column, "invalid YAML: "+le.Message
		}
		return nil, []Problem{p}
	}
	switch {
	case len(docs) == 0:
		return nil, []Problem{{Line: 1, Column: 1, Message: "the YAML document is empty"}}
	case len(docs) > 1:
		return nil, []Problem{{Line: docs[1].Line, Column: docs[1].Column, Message: "a scenario file holds one YAML document; found a second one here"}}
	}
	root := &docs[0]
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) != 1 {
			return nil, []Problem{{Line: 1, Column: 1, Message: "the YAML document is empty"}}
		}
		root = root.Content[0]
	}
	var y yamlReader
	n := y.convert(root, "", 0)
	return n, y.problems
}

// yamlReader converts yaml.Nodes, collecting problems.
type yamlReader struct {
	problems []Problem
}

// maxYAMLDepth bounds nesting (and alias chains).
const maxYAMLDepth = 200

func (y *yamlReader) fail(n *yaml.Node, path, format string, args ...any) *node {
	y.problems = append(y.problems, Problem{Line: n.Line, Column: n.Column, Path: path, Message: fmt.Sprintf(format, args...)})
	return &node{kind: kindNull, pos: pos{n.Line, n.Column}}
}

func (y *yamlReader) convert(n *yaml.Node, path string, depth int) *node {
	if depth > maxYAMLDepth {
		return y.fail(n, path, "nested too deeply")
	}
	p := pos{n.Line, n.Column}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return y.fail(n, path, "unresolved alias")
		}
		out := y.convert(n.Alias, path, depth+1)
		out.pos = p
		return out
	case yaml.MappingNode:
		out := &node{kind: kindObject, pos: p}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				y.fail(k, path, "field names must be plain strings")
				continue
			}
			out.fields = append(out.fields, field{key: k.Value, pos: pos{k.Line, k.Column}, val: y.convert(v, yamlnode.Path(path, k.Value), depth+1)})
		}
		return out
	case yaml.SequenceNode:
		out := &node{kind: kindArray, pos: p}
		for i, c := range n.Content {
			out.items = append(out.items, y.convert(c, fmt.Sprintf("%s[%d]", path, i), depth+1))
		}
		return out
	case yaml.ScalarNode:
		return y.scalar(n, path)
	default:
		return y.fail(n, path, "unsupported YAML node")
	}
}

func (y *yamlReader) scalar(n *yaml.Node, path string) *node {
	p := pos{n.Line, n.Column}
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp":
		// Timestamps stay text (recordedAt is a string field).
		return &node{kind: kindString, pos: p, str: n.Value}
	case "!!null":
		return &node{kind: kindNull, pos: p}
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return y.fail(n, path, "invalid boolean %q", n.Value)
		}
		return &node{kind: kindBool, pos: p, b: b}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return &node{kind: kindNumber, pos: p, str: strconv.FormatInt(i, 10)}
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			return y.fail(n, path, "invalid number %q", n.Value)
		}
		return &node{kind: kindNumber, pos: p, str: strconv.FormatFloat(f, 'g', -1, 64)}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return y.fail(n, path, "invalid number %q", n.Value)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return y.fail(n, path, "%s is not a finite number (JSON cannot represent it)", n.Value)
		}
		return &node{kind: kindNumber, pos: p, str: strconv.FormatFloat(f, 'g', -1, 64)}
	default:
		return y.fail(n, path, "unsupported YAML tag %s (quote the value to make it a string)", tag)
	}
}

// toJSON encodes a node as compact JSON, keeping object member order.
func (n *node) toJSON(b *bytes.Buffer) {
	switch n.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool:
		b.WriteString(strconv.FormatBool(n.b))
	case kindNumber:
		b.WriteString(n.str)
	case kindString:
		writeJSONString(b, n.str)
	case kindObject:
		b.WriteByte('{')
		for i, f := range n.fields {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, f.key)
			b.WriteByte(':')
			f.val.toJSON(b)
		}
		b.WriteByte('}')
	case kindArray:
		b.WriteByte('[')
		for i, it := range n.items {
			if i > 0 {
				b.WriteByte(',')
			}
			it.toJSON(b)
		}
		b.WriteByte(']')
	}
}

// writeJSONString writes s as a JSON string without HTML escaping (so a
// shell command's && stays readable).
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}
