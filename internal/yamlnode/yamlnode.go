// Package yamlnode words the error messages of the YAML definition
// loaders (pieces, agent-CLI adapters): what a node is ("found …"), a
// quoted value, and the dotted path of a field.
package yamlnode

import (
	"strconv"

	"go.yaml.in/yaml/v4"
)

// Describe names what n is, for "expected …, found …" messages: "a
// mapping", "a list", "null", "boolean true", "integer 3", "number 1.5",
// `string "x"`, or the tag of another scalar.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch tag := n.ShortTag(); tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "boolean " + n.Value
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!str":
			return "string " + Quote(n.Value)
		default:
			return "a value tagged " + tag
		}
	}
	return "an unsupported YAML node"
}

// Quote quotes s for a message, shortening a long value (at a rune
// boundary) with "…".
func Quote(s string) string {
	const max = 60
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

// Path is the dotted path of field key under parent ("" at the top).
func Path(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
