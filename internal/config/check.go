package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/yamlnode"
)

// checkKeys walks the YAML node n against the Go type t it decodes into
// and reports, for each key the type does not have, its line, its dotted
// path, a close known key and the known keys; for each value of the wrong
// shape, its line, path and what was expected. The words are the file's
// (keys, "an integer"), never Go's type names. The known keys come from
// the yaml tags, so a key added to Config is known here at once.
func checkKeys(n *yaml.Node, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // an empty value leaves the default
	}
	want := expected(t)
	if want == "" {
		return nil
	}
	bad := func() []error {
		return []error{fmt.Errorf("line %d: %s: expected %s, found %s", n.Line, orTop(path), want, yamlnode.Describe(n))}
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return bad()
		}
		fields := yamlFields(t)
		known := make([]string, 0, len(fields))
		for k := range fields {
			known = append(known, k)
		}
		slices.Sort(known)
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				msg := fmt.Sprintf("line %d: %s: unknown key", k.Line, yamlnode.Path(path, k.Value))
				if hint := yamlnode.Suggest(k.Value, known); hint != "" {
					msg += fmt.Sprintf("; did you mean %q?", hint)
				}
				where := "known keys"
				if path != "" {
					where = "known keys of " + path
				}
				errs = append(errs, fmt.Errorf("%s (%s: %s)", msg, where, strings.Join(known, ", ")))
				continue
			}
			errs = append(errs, checkKeys(v, f.Type, yamlnode.Path(path, k.Value))...)
		}
		return errs
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return bad()
		}
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, checkKeys(n.Content[i+1], t.Elem(), yamlnode.Path(path, n.Content[i].Value))...)
		}
		return errs
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return bad()
		}
		var errs []error
		for i, item := range n.Content {
			errs = append(errs, checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	}
	if n.Kind != yaml.ScalarNode {
		return bad()
	}
	switch tag := n.ShortTag(); t.Kind() {
	case reflect.Bool:
		if tag != "!!bool" {
			return bad()
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if tag != "!!int" {
			return bad()
		}
	case reflect.Float32, reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			return bad()
		}
	}
	return nil
}

// expected says what a value of type t is in the file's words; "" for a
// type decoded its own way (left to the YAML decoder).
func expected(t reflect.Type) string {
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return ""
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return ""
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// yamlFields maps the yaml keys of struct t to its fields (inline
// structs' keys included; "-" fields left out).
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			for k, v := range yamlFields(f.Type) {
				fields[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f
	}
	return fields
}

func orTop(path string) string {
	if path == "" {
		return "the configuration"
	}
	return path
}

// checkDocument parses data and checks it against Config; nil when the
// YAML itself does not parse (the decoder reports that).
func checkDocument(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	return errors.Join(checkKeys(doc.Content[0], reflect.TypeFor[Config](), "")...)
}

// invalidValue is the error for a decoded value that fails a check: the
// line of its key (when data has it), the dotted key path and what is
// wrong, in the words of the unknown-key and wrong-type errors.
func invalidValue(data []byte, path []string, format string, args ...any) error {
	where := strings.Join(path, ".")
	if line := keyLine(data, path); line > 0 {
		where = fmt.Sprintf("line %d: %s", line, where)
	}
	return fmt.Errorf("invalid configuration: %s: "+format, append([]any{where}, args...)...)
}

// keyLine is the line of the key at path (mapping keys from the top of
// the document) in data; 0 when data has none there.
func keyLine(data []byte, path []string) int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	n, line := doc.Content[0], 0
	for _, key := range path {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		if n.Kind != yaml.MappingNode {
			return 0
		}
		i := 0
		for i < len(n.Content) && n.Content[i].Value != key {
			i += 2 // keys only
		}
		if i+1 >= len(n.Content) {
			return 0
		}
		n, line = n.Content[i+1], n.Content[i].Line
	}
	return line
}
