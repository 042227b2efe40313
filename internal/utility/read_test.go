package utility

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/protocol"
)

func TestLineWindow(t *testing.T) {
	t.Parallel()
	type window struct {
		Content           string
		Start, End, Total int
		Truncated, IsErr  bool
		ErrText           string
	}
	tests := []struct {
		name          string
		data          string
		offset, limit int
		want          window
	}{
		{"contract example", "alpha\nbeta\ngamma\n", 1, 2, window{Content: "alpha\nbeta", Start: 1, End: 2, Total: 3, Truncated: true}},
		{"all lines", "alpha\nbeta\ngamma\n", 1, 400, window{Content: "alpha\nbeta\ngamma", Start: 1, End: 3, Total: 3}},
		{"offset", "alpha\nbeta\ngamma\n", 2, 400, window{Content: "beta\ngamma", Start: 2, End: 3, Total: 3}},
		{"last line", "alpha\nbeta\ngamma", 3, 1, window{Content: "gamma", Start: 3, End: 3, Total: 3}},
		{"middle", "a\nb\nc\nd\n", 2, 2, window{Content: "b\nc", Start: 2, End: 3, Total: 4, Truncated: true}},
		{"no final newline", "a\nb", 1, 400, window{Content: "a\nb", Start: 1, End: 2, Total: 2}},
		{"crlf", "a\r\nb\r\nc\r\n", 1, 2, window{Content: "a\nb", Start: 1, End: 2, Total: 3, Truncated: true}},
		{"crlf window end", "a\r\nb\r\n", 1, 1, window{Content: "a", Start: 1, End: 1, Total: 2, Truncated: true}},
		{"lone cr kept", "a\rb\nc", 1, 400, window{Content: "a\rb\nc", Start: 1, End: 2, Total: 2}},
		{"empty lines", "\n\n", 1, 400, window{Content: "\n", Start: 1, End: 2, Total: 2}},
		{"single newline is empty", "\n", 1, 400, window{}},
		{"empty file", "", 1, 400, window{}},
		{"offset past end", "a\nb\n", 3, 400, window{IsErr: true, ErrText: "Offset 3 is beyond end of file (2 lines total)"}},
		{"offset past empty", "", 2, 400, window{IsErr: true, ErrText: "Offset 2 is beyond end of file (0 lines total)"}},
		{"invalid utf-8", "a\xffb\n", 1, 400, window{Content: "a\uFFFDb", Start: 1, End: 1, Total: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			content, start, end, total, e := lineWindow([]byte(tc.data), tc.offset, tc.limit)
			got := window{Content: content, Start: start, End: end, Total: total, Truncated: end < total}
			if e != nil {
				got = window{IsErr: true, ErrText: e.Message}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lineWindow(%q, %d, %d) mismatch (-want +got):\n%s", tc.data, tc.offset, tc.limit, diff)
			}
		})
	}
}

func TestFileRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	write(t, f.dir, "notes.md", "alpha\nbeta\ngamma\n")
	write(t, f.dir, "sub/deep.txt", "one\ntwo\n")
	write(t, f.dir, "empty.txt", "")
	write(t, f.dir, "bin.dat", "abc\x00def")
	write(t, f.dir, "big.txt", strings.Repeat("x", MaxReadBytes+1))
	var many strings.Builder
	for i := 1; i <= 3000; i++ {
		many.WriteString("line\n")
	}
	write(t, f.dir, "many.txt", many.String())
	secret := write(t, f.out, "secret.txt", "secret\n")
	if err := os.Symlink(secret, filepath.Join(f.dir, "abs-link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/secret.txt", filepath.Join(f.dir, "rel-link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/deep.txt", filepath.Join(f.dir, "inside-link.txt")); err != nil {
		t.Fatal(err)
	}

	notes := filepath.Join(f.dir, "notes.md")
	deep := filepath.Join(f.dir, "sub", "deep.txt")
	tests := []struct {
		name    string
		req     protocol.UtilityFileRead
		want    protocol.UtilityFileReadResult
		errCode int
		errText string
	}{
		{
			name: "contract example",
			req:  protocol.UtilityFileRead{ReadID: "r1", Path: "notes.md", Limit: ptr(2)},
			want: protocol.UtilityFileReadResult{ReadID: "r1", Path: notes, RelativePath: "notes.md", Cwd: f.dir,
				Content: "alpha\nbeta", StartLine: 1, EndLine: 2, TotalLines: 3, Truncated: true},
		},
		{
			name: "offset below 1 reads from 1",
			req:  protocol.UtilityFileRead{ReadID: "r", Path: "notes.md", Offset: ptr(0), Limit: ptr(0)},
			want: protocol.UtilityFileReadResult{ReadID: "r", Path: notes, RelativePath: "notes.md", Cwd: f.dir,
				Content: "alpha", StartLine: 1, EndLine: 1, TotalLines: 3, Truncated: true},
		},
		{
			name: "relative to cwd",
			req:  protocol.UtilityFileRead{ReadID: "r", Path: "deep.txt", Cwd: "sub", Offset: ptr(2)},
			want: protocol.UtilityFileReadResult{ReadID: "r", Path: deep, RelativePath: "deep.txt", Cwd: filepath.Join(f.dir, "sub"),
				Content: "two", StartLine: 2, EndLine: 2, TotalLines: 2},
		},
		{
			name: "up from cwd stays inside",
			req:  protocol.UtilityFileRead{ReadID: "r", Path: "../notes.md", Cwd: "sub", Limit: ptr(1)},
			want: protocol.UtilityFileReadResult{ReadID: "r", Path: notes, RelativePath: filepath.Join("..", "notes.md"), Cwd: filepath.Join(f.dir, "sub"),
				Content: "alpha", StartLine: 1, EndLine: 1, TotalLines: 3, Truncated: true},
		},
		{
			name: "absolute inside",
			req:  protocol.UtilityFileRead{ReadID: "r", Path: deep},
			want: protocol.UtilityFileReadResult{ReadID: "r", Path: deep, RelativePath: filepath.Join("sub", "deep.txt"), Cwd: f.dir,
				Content: "one\ntwo", StartLine: 1, EndLine: 2, TotalLines: 2},
		},
		{
			name: "symbolic link inside reports the real path",
			req:  protocol.UtilityFileRead{ReadID: "r", Path: "inside-link.txt"},
			want: protocol.UtilityFileReadResult{ReadID: "r", Path: deep, RelativePath: filepath.Join("sub", "deep.txt"), Cwd: f.dir,
				Content: "one\ntwo", StartLine: 1, EndLine: 2, TotalLines: 2},
		},
		{
			name: "empty file",
			req:  protocol.UtilityFileRead{ReadID: "r", Path: "empty.txt"},
			want: protocol.UtilityFileReadResult{ReadID: "r", Path: filepath.Join(f.dir, "empty.txt"), RelativePath: "empty.txt", Cwd: f.dir},
		},
		{
			name: "limit capped at 2000",
			req:  protocol.UtilityFileRead{ReadID: "r", Path: "many.txt", Offset: ptr(2), Limit: ptr(5000)},
			want: protocol.UtilityFileReadResult{ReadID: "r", Path: filepath.Join(f.dir, "many.txt"), RelativePath: "many.txt", Cwd: f.dir,
				Content: strings.TrimSuffix(strings.Repeat("line\n", 2000), "\n"), StartLine: 2, EndLine: 2001, TotalLines: 3000, Truncated: true},
		},
		{name: "dot-dot outside", req: protocol.UtilityFileRead{ReadID: "r", Path: "../outside/secret.txt"},
			errCode: 403, errText: "Path is outside workspace root: " + secret},
		{name: "absolute outside", req: protocol.UtilityFileRead{ReadID: "r", Path: secret},
			errCode: 403, errText: "Path is outside workspace root: " + secret},
		{name: "absolute symlink out", req: protocol.UtilityFileRead{ReadID: "r", Path: "abs-link.txt"},
			errCode: 403, errText: "Path is outside workspace root: " + secret},
		{name: "relative symlink out", req: protocol.UtilityFileRead{ReadID: "r", Path: "rel-link.txt"},
			errCode: 403, errText: "Path is outside workspace root: " + secret},
		{name: "cwd outside", req: protocol.UtilityFileRead{ReadID: "r", Path: "secret.txt", Cwd: "../outside"},
			errCode: 403, errText: "Path is outside workspace root: " + f.out},
		{name: "missing", req: protocol.UtilityFileRead{ReadID: "r", Path: "nope.txt"},
			errCode: 404, errText: "File not found: nope.txt"},
		{name: "missing cwd", req: protocol.UtilityFileRead{ReadID: "r", Path: "x", Cwd: "nodir"},
			errCode: 404, errText: "Working directory not found: nodir"},
		{name: "directory", req: protocol.UtilityFileRead{ReadID: "r", Path: "sub"},
			errCode: 400, errText: "Path is a directory, not a file: sub"},
		{name: "binary", req: protocol.UtilityFileRead{ReadID: "r", Path: "bin.dat"},
			errCode: 400, errText: "utility_file_read only supports text files: bin.dat"},
		{name: "too large", req: protocol.UtilityFileRead{ReadID: "r", Path: "big.txt"},
			errCode: 400, errText: "File too large: big.txt (2097153 bytes, max: 2097152 bytes)"},
		{name: "offset past end", req: protocol.UtilityFileRead{ReadID: "r", Path: "notes.md", Offset: ptr(4)},
			errCode: 400, errText: "Offset 4 is beyond end of file (3 lines total)"},
		{name: "empty path", req: protocol.UtilityFileRead{ReadID: "r", Path: " "},
			errCode: 400, errText: "path is required and cannot be empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := f.m.FileRead(t.Context(), tc.req)
			if tc.errText != "" {
				wantError(t, err, tc.errCode, tc.errText)
				return
			}
			if err != nil {
				t.Fatalf("FileRead: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FileRead mismatch (-want +got):\n%s", diff)
			}
			if err := validFrame(got); err != nil {
				t.Errorf("result does not validate: %v", err)
			}
		})
	}
}
