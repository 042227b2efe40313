package jsonesc

import "testing"

func TestSimple(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   byte
		want byte
		ok   bool
	}{
		{'"', '"', true}, {'\\', '\\', true}, {'/', '/', true}, {'b', '\b', true}, {'f', '\f', true},
		{'n', '\n', true}, {'r', '\r', true}, {'t', '\t', true}, {'u', 0, false}, {'x', 0, false}, {'\'', 0, false},
	} {
		if got, ok := Simple(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("Simple(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHex4(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want rune
		ok   bool
	}{
		{"00e9", 0xe9, true}, {"D83Dxyz", 0xd83d, true}, {"ffFF", 0xffff, true},
		{"12g4", 0, false}, {"123", 0, false}, {"", 0, false},
	} {
		if got, ok := Hex4([]byte(tc.in)); got != tc.want || ok != tc.ok {
			t.Errorf("Hex4(%q) = %x, %v; want %x, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
