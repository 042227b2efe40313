package stdio

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// collect reads every line of in with limit max.
func collect(in []byte, max int, oneByte bool) []line {
	var r io.Reader = bytes.NewReader(in)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	lines := make(chan line)
	stop := make(chan struct{})
	defer close(stop)
	go readLines(r, max, lines, stop)
	var out []line
	for l := range lines {
		out = append(out, l)
	}
	return out
}

func TestReadLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 70_000) // longer than the reader's buffer
	tests := []struct {
		name string
		in   string
		max  int
		want []string // "!" marks a line reported too long
	}{
		{"lines", "a\nbb\n", 10, []string{"a", "bb"}},
		{"last line without newline", "a\nbb", 10, []string{"a", "bb"}},
		{"empty lines are lines", "\n\na\n", 10, []string{"", "", "a"}},
		{"exactly the limit", "abc\n", 3, []string{"abc"}},
		{"one over the limit", "abcd\nok\n", 3, []string{"!", "ok"}},
		{"over the limit at the end", "ok\nabcd", 3, []string{"ok", "!"}},
		{"long line within a large limit", long + "\nz\n", 100_000, []string{long, "z"}},
		{"long line over the limit", long + "\nz\n", 60_000, []string{"!", "z"}},
		{"nothing", "", 10, nil},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			var got []string
			for _, l := range collect([]byte(tt.in), tt.max, oneByte) {
				if l.tooLong {
					got = append(got, "!")
				} else {
					got = append(got, string(l.data))
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Errorf("%s (one byte reads %v): got %d lines %.60q, want %.60q", tt.name, oneByte, len(got), got, tt.want)
			}
		}
	}
}

// FuzzReadLines: whatever the input, lines never exceed the limit, and the
// lines read (with the too-long ones) account for every newline.
func FuzzReadLines(f *testing.F) {
	f.Add([]byte("a\nb\n"), 4)
	f.Add([]byte("{\"type\":\"hello\"}\n\n\r\nxxxxxxxxxxxx"), 3)
	f.Add(bytes.Repeat([]byte("y"), 100_000), 70_000)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 1 || max > 1<<20 {
			return
		}
		lines := collect(in, max, false)
		newlines := bytes.Count(in, []byte("\n"))
		want := newlines
		if len(in) > 0 && in[len(in)-1] != '\n' {
			want++
		}
		if len(lines) != want {
			t.Fatalf("%d lines for %d newlines (trailing %v)", len(lines), newlines, want > newlines)
		}
		var rebuilt [][]byte
		for _, l := range lines {
			if len(l.data) > max {
				t.Fatalf("a line of %d bytes passed the limit %d", len(l.data), max)
			}
			if l.tooLong {
				return // the text of a skipped line is gone
			}
			rebuilt = append(rebuilt, l.data)
		}
		got := bytes.Join(rebuilt, []byte("\n"))
		if !bytes.Equal(got, bytes.TrimSuffix(in, []byte("\n"))) {
			t.Fatalf("lines do not rebuild the input")
		}
	})
}
