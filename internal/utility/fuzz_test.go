package utility

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzUTF8Chunker checks that output split anywhere comes out as valid
// UTF-8 chunks whose concatenation is the whole output's text.
func FuzzUTF8Chunker(f *testing.F) {
	f.Add([]byte("héllo 😀 wörld"), uint8(2), uint8(5))
	f.Add([]byte("a\xffb\xe2\x82"), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint8) {
		i := min(int(a), len(data))
		j := min(i+int(b), len(data))
		var c utf8Chunker
		var got strings.Builder
		for _, part := range [][]byte{data[:i], data[i:j], data[j:]} {
			s := c.chunk(part)
			if !utf8.ValidString(s) {
				t.Fatalf("chunk %q is not valid UTF-8", s)
			}
			got.WriteString(s)
		}
		got.WriteString(c.flush())
		if want := validText(data); got.String() != want {
			t.Fatalf("chunks of %q = %q, want %q", data, got.String(), want)
		}
	})
}

// FuzzLineWindow checks the line window's invariants on any input.
func FuzzLineWindow(f *testing.F) {
	f.Add([]byte("alpha\nbeta\ngamma\n"), 1, 2)
	f.Add([]byte("a\r\nb\r\n\r\n"), 2, 1)
	f.Add([]byte("\n"), 1, 400)
	f.Fuzz(func(t *testing.T, data []byte, offset, limit int) {
		offset = max(1, offset%5000)
		limit = min(max(1, limit%3000), MaxReadLimit)
		content, start, end, total, e := lineWindow(data, offset, limit)
		if e != nil {
			if offset <= total {
				t.Fatalf("offset %d of %d lines refused: %s", offset, total, e.Message)
			}
			return
		}
		if total == 0 {
			if content != "" || start != 0 || end != 0 {
				t.Fatalf("empty file gave %q %d..%d", content, start, end)
			}
			return
		}
		if start != offset || end < start || end > total || end-start+1 > limit {
			t.Fatalf("window %d..%d of %d lines for offset %d limit %d", start, end, total, offset, limit)
		}
		if n := strings.Count(content, "\n") + 1; n != end-start+1 {
			t.Fatalf("content has %d lines, want %d", n, end-start+1)
		}
		if !utf8.ValidString(content) || strings.Contains(content, "\r\n") && !bytes.Contains(data, []byte("\r\r\n")) {
			t.Fatalf("content %q is not normalised", content)
		}
	})
}

// FuzzSplitArgv checks that splitting never panics and that a line
// without quotes or backslashes splits like strings.Fields.
func FuzzSplitArgv(f *testing.F) {
	f.Add(`printf '%s|' "a b" c\ d`)
	f.Add("a  b\tc")
	f.Fuzz(func(t *testing.T, line string) {
		args, e := splitArgv(line)
		if e != nil {
			return
		}
		if !strings.ContainsAny(line, `'"\`) && strings.Join(args, "\x00") != strings.Join(strings.Fields(line), "\x00") {
			t.Fatalf("splitArgv(%q) = %q, want strings.Fields", line, args)
		}
	})
}
