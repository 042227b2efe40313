package tool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/workspace"
)

// Limits of the Read tool.
const (
	// ReadDefaultLimit is how many lines Read returns when no limit is given.
	ReadDefaultLimit = 2000
	// ReadMaxLineChars is where Read cuts a long line (in characters).
	ReadMaxLineChars = 2000
	// ReadMaxFileBytes is the largest file Read returns without a range
	// by default (FileLimits.MaxFileBytes).
	ReadMaxFileBytes = DefaultMaxFileBytes
	// ReadMaxOutputBytes bounds the text of one Read result; the lines
	// after it are left for a further call.
	ReadMaxOutputBytes = 256 << 10
	// binarySniffBytes is how much of a file is examined to decide whether
	// it is binary.
	binarySniffBytes = 8 << 10
)

// ReadInput is the input of the Read tool.
type ReadInput struct {
	Path   string `json:"path" jsonschema:"file to read, relative to the workspace root"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line to return (1-based); default 1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"maximum number of lines to return; default 2000"`
}

const readDescription = `Read a text file of the workspace. Lines come numbered (line number, tab, text). ` +
	`By default up to 2000 lines from the start; use offset (1-based line) and limit to read other parts. ` +
	`Lines longer than 2000 characters are cut. Binary files are not shown. To list a directory, use Glob.`

// NewRead returns the Read tool: numbered lines of one file of root, with
// the default limits.
func NewRead(root *workspace.Root) Tool { return NewReadWith(root, FileLimits{}) }

// NewReadWith returns the Read tool with the given limits: a file over
// lim.MaxFileBytes is read only by ranges.
func NewReadWith(root *workspace.Root, lim FileLimits) Tool {
	return New("Read", readDescription, true, func(ctx context.Context, in ReadInput, _ Call) (Result, error) {
		return readFile(ctx, root, in, lim.maxFileBytes()), nil
	})
}

func readFile(ctx context.Context, root *workspace.Root, in ReadInput, maxBytes int64) Result {
	if in.Path == "" {
		return Failf(CodeInvalidInput, "path is required")
	}
	if in.Offset < 0 || in.Limit < 0 {
		return Failf(CodeInvalidInput, "offset and limit must not be negative")
	}
	shown := workspace.Excerpt(in.Path)
	// Opened without blocking; the kind of file is judged on the opened
	// descriptor, so a FIFO or device is refused, never read.
	f, fi, err := root.OpenRegular(in.Path)
	if err != nil {
		if isDirError(err) {
			return Failf(CodeInvalidInput, "%s is a directory, not a file; use Glob to list its files (for example pattern %q)", shown, globHint(shown))
		}
		return fileErrorResult(in.Path, err)
	}
	defer f.Close()
	ranged := in.Offset > 0 || in.Limit > 0
	if fi.Size() > maxBytes && !ranged {
		return Failf(CodeTooLarge, "%s is %d bytes, over the %s limit for a whole read; read a range with offset and limit (for example offset 1, limit 500)",
			shown, fi.Size(), sizeText(maxBytes))
	}

	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(binarySniffBytes)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return fileErrorResult(in.Path, err)
	}
	if len(head) == 0 {
		return Result{Content: fmt.Sprintf("(%s is empty)", shown)}
	}
	if looksBinary(head) {
		return Result{Content: fmt.Sprintf("%s: binary file, %d bytes; not shown", shown, fi.Size())}
	}

	offset := max(in.Offset, 1)
	limit := in.Limit
	if limit == 0 {
		limit = ReadDefaultLimit
	}
	var (
		out      strings.Builder
		lineNo   int
		last     int  // last line written
		cutLines int  // lines cut at ReadMaxLineChars
		outFull  bool // stopped at ReadMaxOutputBytes
		more     bool // lines remain after the last one written
		lineBuf  []byte
	)
	for {
		if lineNo%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return Errorf("read %s: %v", shown, err)
			}
		}
		line, total, err := readLine(br, lineBuf[:0], ReadMaxLineChars*utf8.UTFMax)
		lineBuf = line
		if total == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fileErrorResult(in.Path, err)
		}
		lineNo++
		if lineNo < offset {
			continue
		}
		if lineNo >= offset+limit || outFull {
			more = true
			break
		}
		text, cut := cutLine(line, total, ReadMaxLineChars)
		if cut {
			cutLines++
		}
		if out.Len()+len(text) > ReadMaxOutputBytes && last > 0 {
			outFull = true
			more = true
			break
		}
		fmt.Fprintf(&out, "%6d\t%s\n", lineNo, text)
		last = lineNo
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if last == 0 {
		return Failf(CodeInvalidInput, "%s has %d lines; offset %d is past the end", shown, lineNo, offset)
	}
	if more {
		// Count the rest when that is cheap, to tell the model the size.
		totalLines := ""
		if fi.Size() <= maxBytes {
			if n, err := countLines(br); err == nil {
				totalLines = fmt.Sprintf(" of %d", lineNo+n)
			}
		}
		reason := ""
		if outFull {
			reason = fmt.Sprintf(" (output limit of %d KiB reached)", ReadMaxOutputBytes>>10)
		}
		fmt.Fprintf(&out, "\n[showing lines %d-%d%s%s; call Read with offset %d to continue]\n",
			offset, last, totalLines, reason, last+1)
	}
	if cutLines > 0 {
		fmt.Fprintf(&out, "[%d line(s) longer than %d characters were cut]\n", cutLines, ReadMaxLineChars)
	}
	return Result{Content: out.String()}
}

// readLine reads one line without its newline, keeping at most keep bytes
// of it in dst; total is the full length of the line, including what was
// dropped. At the end of the input it returns io.EOF with the last
// (unterminated) line, if any.
func readLine(br *bufio.Reader, dst []byte, keep int) (line []byte, total int, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		total += len(chunk)
		if room := keep - len(dst); room > 0 {
			dst = append(dst, chunk[:min(len(chunk), room)]...)
		}
		switch {
		case err == nil:
			dst = bytes.TrimSuffix(dst, []byte("\n"))
			return bytes.TrimSuffix(dst, []byte("\r")), total - 1, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return bytes.TrimSuffix(dst, []byte("\r")), total, err
		}
	}
}

// countLines counts the remaining lines of r (a last line without a
// newline counts).
func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	n, lastNL := 0, true
	for {
		m, err := r.Read(buf)
		if m > 0 {
			n += bytes.Count(buf[:m], []byte{'\n'})
			lastNL = buf[m-1] == '\n'
		}
		if errors.Is(err, io.EOF) {
			if !lastNL {
				n++
			}
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// cutLine returns line cut to maxChars characters, with a marker when
// something was dropped. total is the full byte length of the line as read
// (it may include a carriage return that line no longer has).
func cutLine(line []byte, total, maxChars int) (string, bool) {
	whole := total <= len(line)+1
	if whole && len(line) <= maxChars {
		return strings.ToValidUTF8(string(line), "\uFFFD"), false
	}
	end, chars := 0, 0
	for end < len(line) && chars < maxChars {
		_, n := utf8.DecodeRune(line[end:])
		end += n
		chars++
	}
	if whole && end == len(line) {
		return strings.ToValidUTF8(string(line), "\uFFFD"), false
	}
	return strings.ToValidUTF8(string(line[:end]), "\uFFFD") +
		fmt.Sprintf("… [line cut: %d bytes in all]", total), true
}

// looksBinary reports whether the start of a file looks like binary data:
// a NUL byte, or mostly bytes that are not valid UTF-8 text.
func looksBinary(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if utf8.Valid(head) {
		return false
	}
	bad := 0
	for i := 0; i < len(head); {
		r, n := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && n == 1 {
			// An incomplete rune at the very end is not evidence.
			if len(head)-i < utf8.UTFMax && !utf8.FullRune(head[i:]) {
				break
			}
			bad++
		}
		i += n
	}
	return bad*10 > len(head) // more than 10% invalid
}

// fileErrorResult turns a file-system error into the error Result the
// model sees, naming the path (at most a bounded prefix of it).
func fileErrorResult(path string, err error) Result {
	shown := workspace.Excerpt(path)
	switch {
	case errors.Is(err, workspace.ErrOutside):
		// These errors name the path themselves, bounded.
		return Failf(CodeWorkspaceViolation, "%s", workspace.Excerpt(err.Error()))
	case errors.Is(err, workspace.ErrNotRegular):
		return Failf(CodeInvalidInput, "%s", workspace.Excerpt(err.Error()))
	case errors.Is(err, fs.ErrNotExist):
		return Failf(CodeNotFound, "file not found: %s", shown)
	case errors.Is(err, fs.ErrPermission):
		return Failf(CodePermission, "permission denied: %s", shown)
	default:
		return Errorf("%s: %s", shown, workspace.Excerpt(err.Error()))
	}
}

// isDirError reports whether err refuses a directory where a regular file
// was wanted.
func isDirError(err error) bool {
	var nr *workspace.NotRegularError
	return errors.As(err, &nr) && nr.Mode.IsDir()
}

// globHint suggests a Glob pattern listing a directory.
func globHint(dir string) string {
	dir = filepath.ToSlash(filepath.Clean(dir))
	if dir == "." {
		return "*"
	}
	return dir + "/*"
}
