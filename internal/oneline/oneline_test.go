package oneline

import "testing"

func TestCut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"", 5, ""},
		{"  a \n\t b  ", 5, "a b"},
		{"abcde", 5, "abcde"},
		{"abcdef", 5, "abcd…"},
		{"héllo\nwörld", 8, "héllo w…"},
		{"ééé", 1, "…"},
	}
	for _, tt := range tests {
		if got := Cut(tt.in, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
	if got := Truncate("a  b\nc", 10); got != "a  b\nc" {
		t.Errorf("Truncate keeps white space: got %q", got)
	}
	if got := Truncate("a  b\nc", 4); got != "a  …" {
		t.Errorf("Truncate(…, 4) = %q", got)
	}
}
