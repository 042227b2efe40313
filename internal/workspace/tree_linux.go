package workspace

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func openTrustedHandle(dir string) (dirHandle, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return dirHandle{}, err
	}
	return newDirHandle(os.NewFile(uintptr(fd), dir))
}

// control runs fn with the directory's descriptor, kept open for the call.
func (h dirHandle) control(fn func(dirfd int) error) error {
	var ferr error
	if err := h.rc.Control(func(dirfd uintptr) {
		for {
			ferr = fn(int(dirfd))
			if ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

func (h dirHandle) dup() (dirHandle, error) {
	fd, err := h.openat(".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC)
	if err != nil {
		return dirHandle{}, err
	}
	return newDirHandle(os.NewFile(uintptr(fd), h.f.Name()))
}

func (h dirHandle) mkdir(name string, perm fs.FileMode) error {
	return h.control(func(dirfd int) error { return unix.Mkdirat(dirfd, name, uint32(perm.Perm())) })
}

func (h dirHandle) create(name string, perm fs.FileMode) (*os.File, error) {
	fd := -1
	err := h.control(func(dirfd int) error {
		var err error
		fd, err = unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func (h dirHandle) rename(oldName string, to dirHandle, newName string) error {
	return h.control(func(olddirfd int) error {
		return to.control(func(newdirfd int) error {
			return unix.Renameat(olddirfd, oldName, newdirfd, newName)
		})
	})
}

func (h dirHandle) remove(name string) error {
	err := h.control(func(dirfd int) error { return unix.Unlinkat(dirfd, name, 0) })
	if err == unix.EISDIR || err == unix.EPERM {
		// A directory: unlink(2) says EISDIR on Linux (EPERM elsewhere).
		if derr := h.control(func(dirfd int) error { return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR) }); derr == nil || err == unix.EISDIR {
			return derr
		}
	}
	return err
}

func (h dirHandle) lstat(name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if err := h.control(func(dirfd int) error {
		return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}); err != nil {
		return nil, err
	}
	return statInfo{name: name, st: st}, nil
}

// isLink reports whether err, from opening name without following links,
// was caused by name being a symbolic link.
func (h dirHandle) isLink(name string, err error) bool {
	if errors.Is(err, syscall.ELOOP) {
		return true
	}
	if !errors.Is(err, syscall.ENOTDIR) {
		return false
	}
	fi, lerr := h.lstat(name)
	return lerr == nil && fi.Mode()&fs.ModeSymlink != 0
}

// statInfo is an fs.FileInfo from an lstat.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s statInfo) Name() string       { return s.name }
func (s statInfo) Size() int64        { return s.st.Size }
func (s statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s statInfo) Sys() any           { return &s.st }
func (s statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
