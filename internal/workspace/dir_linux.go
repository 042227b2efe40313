package workspace

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// dirHandle is an open directory; entries are opened with openat(2)
// relative to its descriptor, with O_NOFOLLOW. The descriptor is used
// through RawConn.Control, which keeps it from being closed (and its
// number reused) during the call.
type dirHandle struct {
	f  *os.File
	rc syscall.RawConn
}

func openDirHandle(root *os.Root, rel string) (dirHandle, error) {
	// O_NONBLOCK|O_DIRECTORY: a FIFO swapped in for the directory is
	// refused instead of blocking the open.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
	if err != nil {
		return dirHandle{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return dirHandle{}, err
	}
	if !fi.IsDir() {
		f.Close()
		return dirHandle{}, &fs.PathError{Op: "open", Path: rel, Err: syscall.ENOTDIR}
	}
	return newDirHandle(f)
}

func newDirHandle(f *os.File) (dirHandle, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return dirHandle{}, err
	}
	return dirHandle{f: f, rc: rc}, nil
}

// openat opens name relative to the directory.
func (h dirHandle) openat(name string, flags int) (int, error) {
	fd := -1
	var oerr error
	err := h.rc.Control(func(dirfd uintptr) {
		for {
			fd, oerr = syscall.Openat(int(dirfd), name, flags, 0)
			if oerr != syscall.EINTR {
				return
			}
		}
	})
	if err != nil {
		return -1, err
	}
	return fd, oerr
}

func (h dirHandle) close() error { return h.f.Close() }

// readDir lists the directory. Each entry's Info is read relative to the
// directory's own descriptor (os.File's would look the name up relative
// to the working directory, since the handle was opened with openat); it
// fails once the Dir is closed.
func (h dirHandle) readDir() ([]fs.DirEntry, error) {
	entries, err := h.f.ReadDir(-1)
	for i, e := range entries {
		entries[i] = handleEntry{DirEntry: e, h: h}
	}
	return entries, err
}

// handleEntry is a directory entry whose Info comes from fstatat on the
// directory it was listed from.
type handleEntry struct {
	fs.DirEntry
	h dirHandle
}

func (e handleEntry) Info() (fs.FileInfo, error) {
	fi, err := e.h.lstat(e.Name())
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: e.Name(), Err: err}
	}
	return fi, nil
}

func (h dirHandle) openDir(name string) (dirHandle, error) {
	fd, err := h.openat(name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
	if err != nil {
		return dirHandle{}, err
	}
	return newDirHandle(os.NewFile(uintptr(fd), name))
}

// openRegular opens a regular file without following links and without
// blocking on a FIFO swapped in after the directory was listed.
func (h dirHandle) openRegular(name string) (int, int64, error) {
	fd, err := h.openat(name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK)
	if err != nil {
		return -1, 0, err
	}
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return -1, 0, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return -1, 0, ErrNotRegular
	}
	return fd, st.Size, nil
}

func (h dirHandle) readFile(name string, buf []byte, max int64) ([]byte, int64, error) {
	fd, size, err := h.openRegular(name)
	if err != nil {
		return nil, 0, err
	}
	defer syscall.Close(fd)
	return readSized(fdReader(fd), size, max, buf)
}

// fdReader reads a file descriptor, retrying when interrupted.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (h dirHandle) open(name string) (*os.File, error) {
	fd, _, err := h.openRegular(name)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func fstat(fd int, st *syscall.Stat_t) error {
	for {
		err := syscall.Fstat(fd, st)
		if err != syscall.EINTR {
			return err
		}
	}
}

// Control calls fn with the directory's descriptor, which stays open
// during the call, for system calls this package does not wrap (the
// workspace index lists directories with getdents(2)). fn must not close
// it; descriptors it opens relative to it are its own to confine.
func (d *Dir) Control(fn func(fd uintptr)) error { return d.h.rc.Control(fn) }
