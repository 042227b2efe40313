package index

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchMask: entries created, removed or moved in; a file written and
// closed (only a .gitignore matters); the directory itself removed or
// moved. Links are not followed and only directories are watched.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// inotify is a non-blocking inotify descriptor, read only when the index
// is read (no goroutine waits on it).
type inotify struct {
	fd  int
	buf []byte
}

func newWatcher() (watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	return &inotify{fd: fd}, nil
}

func (n *inotify) add(dir string, fd int) (int32, error) {
	var wd int
	var err error = unix.ENOENT
	if fd >= 0 {
		// The descriptor's magic link in /proc names the directory it
		// holds, wherever it is now (removed too): followed, not refused.
		wd, err = unix.InotifyAddWatch(n.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask&^unix.IN_DONT_FOLLOW)
	}
	if errors.Is(err, unix.ENOENT) {
		// No descriptor, or no /proc: by its path.
		wd, err = unix.InotifyAddWatch(n.fd, dir, watchMask)
	}
	if err != nil {
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) {
			return -1, fmt.Errorf("watch %s: %w (%w)", dir, errWatchLimit, err)
		}
		return -1, fmt.Errorf("watch %s: %w", dir, err)
	}
	return int32(wd), nil
}

func (n *inotify) remove(wd int32) {
	// Fails when the kernel removed the watch already (directory gone).
	_, _ = unix.InotifyRmWatch(n.fd, uint32(wd))
}

// drain reads the queued events until none is left.
func (n *inotify) drain(fn func(event)) error {
	if n.buf == nil {
		n.buf = make([]byte, 64<<10)
	}
	for {
		k, err := unix.Read(n.fd, n.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read inotify events: %w", err)
		}
		if k <= 0 {
			return nil
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			raw := (*unix.InotifyEvent)(unsafe.Pointer(&n.buf[off]))
			end := off + unix.SizeofInotifyEvent + int(raw.Len)
			if end > k {
				break
			}
			name := n.buf[off+unix.SizeofInotifyEvent : end]
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			m := raw.Mask
			fn(event{
				wd:       raw.Wd,
				name:     string(name),
				overflow: m&unix.IN_Q_OVERFLOW != 0,
				self:     m&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0,
				ignored:  m&unix.IN_IGNORED != 0,
				entries:  m&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0,
			})
			off = end
		}
	}
}

func (n *inotify) changedSince(dir string, since time.Time) bool {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_CTIME, &st); err != nil {
		return true
	}
	return !time.Unix(st.Ctime.Sec, int64(st.Ctime.Nsec)).Before(since)
}

func (n *inotify) close() error { return unix.Close(n.fd) }
