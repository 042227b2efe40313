package yamlnode

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{"{a: 1}", "a mapping"},
		{"[1, 2]", "a list"},
		{"null", "null"},
		{"true", "boolean true"},
		{"3", "integer 3"},
		{"1.5", "number 1.5"},
		{"abc", `string "abc"`},
		{"!!binary aGk=", "a value tagged !!binary"},
	}
	for _, tt := range tests {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(tt.src), &doc); err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		if got := Describe(doc.Content[0]); got != tt.want {
			t.Errorf("Describe(%s) = %q, want %q", tt.src, got, tt.want)
		}
	}
	alias := &yaml.Node{Kind: yaml.AliasNode}
	if got := Describe(alias); got != "an alias" {
		t.Errorf("Describe(alias) = %q", got)
	}
}

func TestQuoteAndPath(t *testing.T) {
	t.Parallel()
	if got := Quote(`a"b`); got != `"a\"b"` {
		t.Errorf("Quote = %s", got)
	}
	// 59 ASCII bytes then a two-byte rune straddling the 60-byte cut.
	long := strings.Repeat("x", 59) + "é" + "tail"
	if got, want := Quote(long), `"`+strings.Repeat("x", 59)+`"…`; got != want {
		t.Errorf("Quote(long) = %s, want %s", got, want)
	}
	for _, tt := range []struct{ parent, key, want string }{
		{"", "name", "name"},
		{"movements[0]", "rules", "movements[0].rules"},
	} {
		if got := Path(tt.parent, tt.key); got != tt.want {
			t.Errorf("Path(%q, %q) = %q, want %q", tt.parent, tt.key, got, tt.want)
		}
	}
}
