package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// stdoutFilter passes on the JSON-RPC messages a stdio server writes on
// its stdout, one a line, and skips its other lines: a banner ("Server
// running on stdio"), a log line, a blank line. The go-sdk ended the
// connection at the first such line, so a server that Claude Code, Codex
// and the official TypeScript and Python SDKs use (they report such a
// line and read on) did not start under Maestro.
//
// A line is passed on when it is a JSON array (a batch) or a JSON object
// with a "jsonrpc" member; the SDK then decodes it. A line longer than
// max is passed on when it starts as JSON (the SDK's own bound refuses
// it, saying so), skipped otherwise; at most max bytes of a line are
// held.
type stdoutFilter struct {
	r   *bufio.Reader
	max int
	// skipped is told of each skipped line that is not blank (its first
	// bytes at most).
	skipped func(line []byte)

	line    []byte // the line being passed on
	pending []byte // what the SDK has not read of it yet
	long    bool   // the rest of a line over max streams through
	err     error  // the read error to return once pending is read
}

// skipHead bounds what is kept of a skipped line.
const skipHead = 200

func newStdoutFilter(r io.Reader, max int, skipped func([]byte)) *stdoutFilter {
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	return &stdoutFilter{r: bufio.NewReaderSize(r, 64<<10), max: max, skipped: skipped}
}

func (f *stdoutFilter) Read(p []byte) (int, error) {
	for {
		if len(f.pending) > 0 {
			n := copy(p, f.pending)
			f.pending = f.pending[n:]
			return n, nil
		}
		if f.err != nil {
			return 0, f.err
		}
		if f.long {
			chunk, err := f.r.ReadSlice('\n')
			if err != bufio.ErrBufferFull {
				f.long, f.err = false, err
			}
			f.line = append(f.line[:0], chunk...)
			f.pending = f.line
			continue
		}
		f.readLine()
	}
}

// readLine reads the next line, setting pending when it is to be passed
// on.
func (f *stdoutFilter) readLine() {
	line := f.line[:0]
	if cap(line) > 1<<20 {
		line = nil // a big message's buffer is not kept for the session
	}
	for {
		chunk, err := f.r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) <= f.max {
				continue
			}
			f.line = line
			t := bytes.TrimLeft(line, " \t\r")
			if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
				f.pending, f.long = line, true
				return
			}
			f.skip(t)
			f.discardLine()
			return
		}
		f.err = err
		f.line = line
		t := bytes.TrimSpace(line)
		switch {
		case len(line) > f.max:
			if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
				f.pending = line
			} else {
				f.skip(t)
			}
		case isMessage(t):
			// Without what surrounds it: the SDK refuses a space after
			// a message, the other SDKs do not.
			f.pending = append(t, '\n')
		case len(t) > 0:
			f.skip(t)
		}
		return
	}
}

// discardLine reads up to the end of the line.
func (f *stdoutFilter) discardLine() {
	for {
		_, err := f.r.ReadSlice('\n')
		if err != bufio.ErrBufferFull {
			f.err = err
			return
		}
	}
}

func (f *stdoutFilter) skip(line []byte) {
	if f.skipped != nil {
		f.skipped(line[:min(len(line), skipHead)])
	}
}

// isMessage reports whether line (trimmed) is a JSON-RPC message or
// batch, as far as the line tells.
func isMessage(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	switch line[0] {
	case '[':
		return json.Valid(line)
	case '{':
		// Not decoded, for what it costs (the SDK decodes it next):
		// a JSON object naming "jsonrpc" is taken for a message.
		return bytes.Contains(line, []byte(`"jsonrpc"`)) && json.Valid(line)
	}
	return false
}
