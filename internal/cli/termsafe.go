package cli

import (
	"bytes"
	"fmt"
	"io"
)

// termSafe wraps w, a stream `maestro tasks` writes a server's text to (a
// task's title and body, comments, an agent's output and results, job
// errors) or `maestro run` draws a run on (the model's text, tool output,
// errors), so that the control characters in that text are shown, not
// obeyed: anyone who can create a task or comment, any model, and any
// file or command output a tool shows could otherwise clear the screen,
// move the cursor over earlier lines, set the window title or write the
// clipboard (OSC 52) of whoever runs `tasks show`, `tasks logs` or
// `maestro run`. ESC is shown as ^[, other C0 controls as
// ^G and the like, DEL as ^?, and a C1 control (U+0080-U+009F) as \u009b;
// new lines and tabs pass, and so does a carriage return before a new
// line (dropped, also when the stream's chunks part the two). With styles (a colour terminal), the renderer's own
// styles (newStyles) pass whole: a Write carries each in one piece. A
// server's text holding one of those exact sequences passes too: colour,
// bold or dim, nothing that moves, hides or clears.
func termSafe(w io.Writer, styles bool) io.Writer { return &termSafeWriter{w: w, styles: styles} }

type termSafeWriter struct {
	w      io.Writer
	styles bool
	cr     bool // the last Write ended with a carriage return, not yet shown
}

// termStyles are the escape sequences the renderer writes itself.
var termStyles = func() [][]byte {
	st := newStyles(true)
	var seqs [][]byte
	for _, s := range []string{st.dim, st.bold, st.green, st.red, st.yellow, st.cyan, st.reset} {
		seqs = append(seqs, []byte(s))
	}
	return seqs
}()

// termUnsafe reports whether p holds a byte termSafeWriter rewrites.
func termUnsafe(p []byte) bool {
	for _, c := range p {
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || c == 0xc2 {
			return true
		}
	}
	return false
}

func (t *termSafeWriter) Write(p []byte) (int, error) {
	if !t.cr && !termUnsafe(p) {
		return t.w.Write(p)
	}
	var b bytes.Buffer
	b.Grow(len(p) + 16)
	if t.cr && len(p) > 0 {
		// The carriage return that ended the last chunk: a CRLF parted
		// between two chunks, or a bare one.
		if p[0] != '\n' {
			b.WriteString("^M")
		}
		t.cr = false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\n' || c == '\t':
			b.WriteByte(c)
		case c == '\r' && i+1 < len(p) && p[i+1] == '\n':
			// A CRLF line end: the LF ends the line.
		case c == '\r' && i+1 == len(p):
			// Its line feed may come with the next chunk.
			t.cr = true
		case c == 0x1b:
			if s := styleAt(p[i:]); s != nil && t.styles {
				b.Write(s)
				i += len(s) - 1
			} else {
				b.WriteString("^[")
			}
		case c < 0x20:
			b.WriteByte('^')
			b.WriteByte(c + '@')
		case c == 0x7f:
			b.WriteString("^?")
		case c == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, p[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	if _, err := t.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// termSafeString is s with its control characters shown as termSafe
// shows them (no styles pass): for a label drawn by a writer of its own,
// such as the spinner's.
func termSafeString(s string) string {
	if !termUnsafe([]byte(s)) {
		return s
	}
	var b bytes.Buffer
	w := &termSafeWriter{w: &b}
	_, _ = w.Write([]byte(s))
	if w.cr {
		b.WriteString("^M")
	}
	return b.String()
}

// styleAt is the renderer's style sequence p starts with, if any.
func styleAt(p []byte) []byte {
	for _, s := range termStyles {
		if bytes.HasPrefix(p, s) {
			return s
		}
	}
	return nil
}
