package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// ErrNotRegular is matched (errors.Is) by every error reporting a file
// that is not a regular file (a FIFO, a device, a socket) where one was
// needed.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError reports a path naming something other than a regular
// file. It matches ErrNotRegular.
type NotRegularError struct {
	// Path is the path as the caller gave it.
	Path string
	// Mode is the file's mode as found on the opened file.
	Mode fs.FileMode
}

// Error implements error: "not a regular file: PATH (a FIFO)".
func (e *NotRegularError) Error() string {
	return "not a regular file: " + Excerpt(e.Path) + " (" + KindOf(e.Mode) + ")"
}

// Is reports whether target is ErrNotRegular.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// KindOf names the kind of file of mode with its article, for messages:
// "a FIFO", "a character device", "a directory", ….
func KindOf(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "an irregular file"
	}
}

// TooLargeError reports a file larger than a read's limit. It matches
// ErrTooLarge.
type TooLargeError struct {
	Path string
	// Size is the file's size when it was opened, or the bytes read when
	// it grew past Max while being read.
	Size int64
	Max  int64
}

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: %d bytes, over the limit of %d bytes", Excerpt(e.Path), e.Size, e.Max)
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// openNonblock opens path for reading without ever blocking in open(2):
// O_NONBLOCK makes opening a FIFO with no writer return at once. The
// kind of file is then taken from the opened descriptor (fstat), so
// nothing can be swapped in between the check and the read. Regular
// files are accepted, and directories when dirOK; anything else is
// refused with a *NotRegularError.
func (r *Root) openNonblock(path string, dirOK bool) (*os.File, fs.FileInfo, error) {
	rel, err := r.Rel(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := r.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, r.wrap(path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() && !(dirOK && fi.IsDir()) {
		f.Close()
		return nil, nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	return f, fi, nil
}

// OpenRegular opens the named regular file for reading and returns it with
// its information, taken from the opened file. Anything else — a
// directory, a FIFO, a device, a socket — is refused with a
// *NotRegularError, without blocking: a FIFO with no writer does not hang
// the caller.
func (r *Root) OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	return r.openNonblock(path, false)
}

// ReadFileMax reads the named regular file whole if it holds at most max
// bytes. A larger file is refused with a *TooLargeError before anything
// is read, and a file that grows past max while being read is refused
// too, so memory stays bounded by max. What is not a regular file is
// refused as by OpenRegular.
func (r *Root) ReadFileMax(path string, max int64) ([]byte, error) {
	f, _, err := r.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadRegular(f, path, max)
}

// ReadRegular reads the opened file f, named path in errors, whole if it
// is a regular file of at most max bytes. The kind and size are taken
// from f itself (fstat), so nothing swapped in after the open is read:
// anything but a regular file is refused with a *NotRegularError, a
// larger file with a *TooLargeError before anything is read, and a file
// that grows past max while being read with a *TooLargeError too, so
// memory stays bounded by max. How f was opened (without following
// links, without blocking on a FIFO) is the caller's policy; f is not
// closed.
func ReadRegular(f fs.File, path string, max int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", Excerpt(path), err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	if fi.Size() > max {
		return nil, &TooLargeError{Path: path, Size: fi.Size(), Max: max}
	}
	data := make([]byte, 0, fi.Size()+1)
	data, err = readUpTo(f, data, max)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, &TooLargeError{Path: path, Size: int64(len(data)), Max: max}
		}
		return nil, fmt.Errorf("read %s: %w", Excerpt(path), err)
	}
	return data, nil
}

// readUpTo appends what r holds to buf, failing with ErrTooLarge once
// more than max bytes were read in all.
func readUpTo(r io.Reader, buf []byte, max int64) ([]byte, error) {
	lr := io.LimitReader(r, max-int64(len(buf))+1)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return buf, ErrTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// fsys is the fs.FS of a Root: os.Root's, except that files are opened
// without blocking and only regular files and directories are opened at
// all, so a walker or an fs.ReadFile meeting a FIFO gets an error instead
// of hanging.
type fsys struct {
	r    *Root
	base fs.FS // r.root.FS(), for the calls that open nothing
}

func (f fsys) valid(op, name string) error {
	if !fs.ValidPath(name) || strings.ContainsRune(name, 0) {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return nil
}

func (f fsys) open(op, name string, dirOK bool) (*os.File, fs.FileInfo, error) {
	if err := f.valid(op, name); err != nil {
		return nil, nil, err
	}
	file, fi, err := f.r.openNonblock(name, dirOK)
	if err != nil {
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			err = &fs.PathError{Op: op, Path: name, Err: err}
		}
		return nil, nil, err
	}
	return file, fi, nil
}

// Open implements fs.FS.
func (f fsys) Open(name string) (fs.File, error) {
	file, _, err := f.open("open", name, true)
	if err != nil {
		return nil, err
	}
	return file, nil
}

// ReadDir implements fs.ReadDirFS.
func (f fsys) ReadDir(name string) ([]fs.DirEntry, error) {
	file, fi, err := f.open("readdir", name, true)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
	}
	entries, err := file.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// ReadFile implements fs.ReadFileFS: regular files only, never blocking.
func (f fsys) ReadFile(name string) ([]byte, error) {
	file, fi, err := f.open("readfile", name, false)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data := make([]byte, 0, fi.Size()+512)
	data, err = readUpTo(file, data, 1<<62)
	if err != nil {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: err}
	}
	return data, nil
}

// Stat implements fs.StatFS.
func (f fsys) Stat(name string) (fs.FileInfo, error) { return fs.Stat(f.base, name) }

// Lstat implements fs.ReadLinkFS.
func (f fsys) Lstat(name string) (fs.FileInfo, error) { return fs.Lstat(f.base, name) }

// ReadLink implements fs.ReadLinkFS.
func (f fsys) ReadLink(name string) (string, error) { return fs.ReadLink(f.base, name) }
