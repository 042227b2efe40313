package utility

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// file_read limits (wire contract §10.3).
const (
	DefaultReadLimit = 400     // lines
	MaxReadLimit     = 2000    // lines
	MaxReadBytes     = 2 << 20 // bytes; larger files are refused
	binarySniffBytes = 2048    // a NUL byte in these marks a binary file
)

// readBufs recycles file buffers between reads.
var readBufs = sync.Pool{New: func() any { return new([]byte) }}

// FileRead answers utility_file_read: lines of a text file inside the
// workspace. The runtime reports a failure as an error whose request_id is
// req.ReadID.
func (m *Manager) FileRead(ctx context.Context, req protocol.UtilityFileRead) (protocol.UtilityFileReadResult, error) {
	if err := ctx.Err(); err != nil {
		return protocol.UtilityFileReadResult{}, errorf(400, "utility_file_read cancelled: %v", err)
	}
	res, e := m.fileRead(req)
	if e != nil {
		return protocol.UtilityFileReadResult{}, e
	}
	return res, nil
}

func (m *Manager) fileRead(req protocol.UtilityFileRead) (protocol.UtilityFileReadResult, *Error) {
	if strings.TrimSpace(req.Path) == "" {
		return protocol.UtilityFileReadResult{}, errorf(400, "path is required and cannot be empty")
	}
	cwd, e := m.resolveDir(req.Cwd)
	if e != nil {
		return protocol.UtilityFileReadResult{}, e
	}
	abs, e := m.resolvePath(cwd, req.Path)
	if e != nil {
		return protocol.UtilityFileReadResult{}, e
	}
	offset := 1
	if req.Offset != nil {
		offset = max(1, *req.Offset)
	}
	limit := DefaultReadLimit
	if req.Limit != nil {
		limit = min(max(1, *req.Limit), MaxReadLimit)
	}

	bufp := readBufs.Get().(*[]byte)
	defer func() {
		if cap(*bufp) <= 2*MaxReadBytes {
			readBufs.Put(bufp)
		}
	}()
	data, e := m.readText(abs, req.Path, (*bufp)[:0])
	*bufp = data[:0]
	if e != nil {
		return protocol.UtilityFileReadResult{}, e
	}

	content, start, end, total, e := lineWindow(data, offset, limit)
	if e != nil {
		return protocol.UtilityFileReadResult{}, e
	}
	rel, err := filepath.Rel(cwd, abs)
	if err != nil || rel == "." {
		rel = abs
	}
	return protocol.UtilityFileReadResult{
		ReadID:       req.ReadID,
		Path:         abs,
		RelativePath: rel,
		Cwd:          cwd,
		Content:      content,
		StartLine:    start,
		EndLine:      end,
		TotalLines:   total,
		Truncated:    end < total,
	}, nil
}

// readText reads the regular text file at abs (shown to the client as
// given) into buf. The file is opened without blocking and its kind taken
// from the opened descriptor: a FIFO, a device or a socket is refused at
// once (a FIFO used to block the read, and the runtime's shutdown after
// it, for good).
func (m *Manager) readText(abs, given string, buf []byte) ([]byte, *Error) {
	f, fi, err := m.root.OpenRegular(abs)
	var notRegular *workspace.NotRegularError
	switch {
	case errors.Is(err, workspace.ErrOutside):
		return buf, outsideError(abs)
	case errors.Is(err, fs.ErrNotExist):
		return buf, errorf(404, "File not found: %s", given)
	case errors.As(err, &notRegular) && notRegular.Mode.IsDir():
		return buf, errorf(400, "Path is a directory, not a file: %s", given)
	case notRegular != nil:
		return buf, errorf(400, "Not a regular file: %s (%s)", given, workspace.KindOf(notRegular.Mode))
	case err != nil:
		return buf, errorf(400, "File not readable: %s", given)
	}
	defer f.Close()
	if fi.Size() > MaxReadBytes {
		return buf, tooLarge(given, fi.Size())
	}
	if need := int(fi.Size()) + 1; cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	// Read at most one byte more than allowed, to notice a file that grew.
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
		n, err := f.Read(buf[len(buf):min(cap(buf), MaxReadBytes+1)])
		buf = buf[:len(buf)+n]
		if len(buf) > MaxReadBytes {
			return buf, tooLarge(given, int64(len(buf)))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return buf, errorf(400, "File not readable: %s", given)
		}
	}
	if bytes.IndexByte(buf[:min(len(buf), binarySniffBytes)], 0) >= 0 {
		return buf, errorf(400, "utility_file_read only supports text files: %s", given)
	}
	return buf, nil
}

func tooLarge(given string, size int64) *Error {
	return errorf(400, "File too large: %s (%d bytes, max: %d bytes)", given, size, MaxReadBytes)
}

// lineWindow cuts limit lines starting at line offset (1-based) out of
// data. CRLF line ends count as LF and a final line end does not start
// another line. It returns the lines joined with LF, the first and last
// line numbers (0, 0 for an empty file) and the number of lines.
func lineWindow(data []byte, offset, limit int) (content string, start, end, total int, e *Error) {
	body := data
	if bytes.HasSuffix(body, []byte("\r\n")) {
		body = body[:len(body)-2]
	} else if bytes.HasSuffix(body, []byte("\n")) {
		body = body[:len(body)-1]
	}
	if len(body) > 0 {
		total = bytes.Count(body, []byte("\n")) + 1
	}
	if offset > total && (total > 0 || offset > 1) {
		return "", 0, 0, 0, errorf(400, "Offset %d is beyond end of file (%d lines total)", offset, total)
	}
	if total == 0 {
		return "", 0, 0, 0, nil
	}
	from := 0
	for range offset - 1 {
		from += bytes.IndexByte(body[from:], '\n') + 1
	}
	to := from
	n := 0
	for n < limit {
		i := bytes.IndexByte(body[to:], '\n')
		n++
		if i < 0 {
			to = len(body)
			break
		}
		to += i
		if n < limit {
			to++
		}
	}
	seg := body[from:to]
	if to < len(body) {
		// seg stops before a line end: drop the CR of a CRLF.
		seg = bytes.TrimSuffix(seg, []byte("\r"))
	}
	start, end = offset, min(total, offset+limit-1)
	return textOf(seg), start, end, total, nil
}

// textOf returns seg as a string with CRLF turned into LF and invalid
// UTF-8 replaced by U+FFFD.
func textOf(seg []byte) string {
	var s string
	if bytes.IndexByte(seg, '\r') >= 0 {
		s = string(bytes.ReplaceAll(seg, []byte("\r\n"), []byte("\n")))
	} else {
		s = string(seg)
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}
