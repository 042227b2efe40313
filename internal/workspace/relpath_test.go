package workspace

import "testing"

func TestCheckSlashPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, clean, broken string }{
		{"report.pdf", "report.pdf", ""},
		{"a/b/../c.txt", "", "without .. segments"},
		{"a//b/./c.txt", "a/b/c.txt", ""},
		{"dir/", "dir", ""},
		{"", "", "not empty"},
		{".", "", "naming a file"},
		{"./", "", "naming a file"},
		{"..", "", "without .. segments"},
		{"../x", "", "without .. segments"},
		{"/etc/passwd", "", "not an absolute path"},
		{`a\..\x`, "", "without NUL or backslash"},
		{"a\x00b", "", "without NUL or backslash"},
		{"..x/y", "..x/y", ""},
	} {
		clean, broken := CheckSlashPath(tc.in)
		if clean != tc.clean || broken != tc.broken {
			t.Errorf("CheckSlashPath(%q) = %q, %q; want %q, %q", tc.in, clean, broken, tc.clean, tc.broken)
		}
	}
}
