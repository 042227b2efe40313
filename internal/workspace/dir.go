package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrTooLarge is returned by Dir.ReadFile for a file larger than the
// limit given; read it with Dir.Open instead.
var ErrTooLarge = errors.New("file too large to read whole")

// Dir is an open directory of the workspace, for walkers that visit many
// files: entries are opened relative to it by name (one path component,
// never following a symbolic link), which costs one system call instead of
// one per component of a path. A Dir is confined like its Root: it is
// opened through the root, and names cannot leave it. Close it when done;
// a Dir may be used by several goroutines at once.
type Dir struct {
	h   dirHandle
	rel string // slash-separated, relative to the workspace root
}

// OpenDir opens the named directory of the workspace.
func (r *Root) OpenDir(path string) (*Dir, error) {
	rel, err := r.Rel(path)
	if err != nil {
		return nil, err
	}
	h, err := openDirHandle(r.root, rel)
	if err != nil {
		return nil, r.wrap(path, err)
	}
	return &Dir{h: h, rel: filepath.ToSlash(rel)}, nil
}

// Rel returns the directory's path relative to the workspace root,
// slash-separated ("." for the root).
func (d *Dir) Rel() string { return d.rel }

// Close releases the directory.
func (d *Dir) Close() error { return d.h.close() }

// ReadDir returns the directory's entries in the order the system lists
// them. Entry types come from the listing; a symbolic link is reported as
// one, not followed.
func (d *Dir) ReadDir() ([]fs.DirEntry, error) {
	entries, err := d.h.readDir()
	if err != nil {
		return entries, fmt.Errorf("read directory %s: %w", d.rel, err)
	}
	return entries, nil
}

// OpenDir opens the subdirectory name (a single path component) of d.
// A symbolic link is refused.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	h, err := d.h.openDir(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	return &Dir{h: h, rel: d.join(name)}, nil
}

// ReadFile reads the regular file name (a single path component) of d,
// reusing buf's storage when it is large enough. A file larger than max
// bytes is not read: ReadFile returns ErrTooLarge and the file's size.
// A symbolic link or a file that is not regular is refused.
func (d *Dir) ReadFile(name string, buf []byte, max int64) (data []byte, size int64, err error) {
	if err := checkName(name); err != nil {
		return nil, 0, err
	}
	data, size, err = d.h.readFile(name, buf, max)
	if err != nil && !errors.Is(err, ErrTooLarge) {
		err = &fs.PathError{Op: "read", Path: d.join(name), Err: err}
	}
	return data, size, err
}

// Open opens the regular file name (a single path component) of d for
// reading. A symbolic link or a file that is not regular is refused.
func (d *Dir) Open(name string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := d.h.open(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	return f, nil
}

func (d *Dir) join(name string) string {
	if d.rel == "." {
		return name
	}
	return d.rel + "/" + name
}

// readSized reads a file of size bytes from r into buf, grown when too
// small; a file that shrank since its size was taken gives what it still
// holds. A file larger than max is refused with ErrTooLarge.
func readSized[R io.Reader](r R, size, max int64, buf []byte) ([]byte, int64, error) {
	if size > max {
		return nil, size, fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
	}
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, size, err
		}
	}
	return buf[:n], size, nil
}

// checkName accepts only a single, plain path component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`+"\x00") {
		return fmt.Errorf("invalid entry name %q: want a single path component", name)
	}
	return nil
}
