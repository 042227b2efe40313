package index

import (
	"context"
	"errors"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/maestro-run/maestro/internal/gitignore"
)

// On Linux the index lists directories with getdents(2) on raw
// descriptors: each directory is opened relative to its parent's
// descriptor with O_NOFOLLOW (as workspace.Dir does, so a directory
// swapped for a link is not followed), its entries are read into one
// reused 64 KiB buffer per worker and taken by the type getdents reports,
// without an os.File, a DirEntry or an Lstat per entry. Only the names
// kept are copied, once per directory (Dir.files).

// maxIgnoreFile bounds the .gitignore file read in each directory (as
// internal/workspace/walk does).
const maxIgnoreFile = 1 << 20

// direntBuf is the size of a worker's getdents buffer.
const direntBuf = 64 << 10

// rawDir is an open directory whose descriptor its queued subdirectories
// share; the last to be opened closes it.
type rawDir struct {
	fd   int
	mu   sync.Mutex
	refs int
}

// release drops a reference to the directory; the last closes it.
func (r *rawDir) release() {
	r.mu.Lock()
	r.refs--
	last := r.refs == 0
	r.mu.Unlock()
	if last {
		unix.Close(r.fd)
	}
}

// scanTask is a directory to list: its node, and its parent's
// descriptor, or for the top of the scan (parent nil) its own, opened
// through the workspace root.
type scanTask struct {
	parent *rawDir
	d      *Dir
	fd     int // the top's descriptor
}

// scan lists the subtree at rel (its parent, nil for the root, is
// already indexed), watching each directory before it is listed when
// watch is set (else the caller watches the subtree after, watchTree).
func (x *Index) scan(ctx context.Context, rel string, parent *Dir, watch bool) (*Dir, error) {
	od, err := x.root.OpenDir(rel)
	if err != nil {
		return nil, err
	}
	topFD := -1
	cerr := od.Control(func(fd uintptr) {
		topFD, err = unix.Openat(int(fd), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	od.Close()
	if err = errors.Join(cerr, err); err != nil {
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	top := &Dir{name: path.Base(rel), rel: rel, parent: parent, wd: -1,
		rules: gitignore.New(x.root.FS()).Dir(rel)}
	s := &rawScan{x: x, inline: watch && x.w != nil, masks: watch, w: x.w}
	s.cond.L = &s.mu
	s.tasks = []scanTask{{d: top, fd: topFD}}
	var wg sync.WaitGroup
	workers := make([]*rawWorker, runtime.GOMAXPROCS(0))
	for i := range workers {
		w := &rawWorker{s: s}
		workers[i] = w
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
	for _, w := range workers {
		for _, d := range w.nodes {
			if d.failed {
				x.failed[d] = true
			}
			if d.wd >= 0 {
				x.byWD[d.wd] = d
			}
			slices.SortFunc(d.dirs, func(a, b *Dir) int { return strings.Compare(a.name, b.name) })
		}
	}
	if s.limit {
		x.stopWatching()
	}
	if err := ctx.Err(); err != nil {
		for _, w := range workers {
			for _, d := range w.nodes {
				if d.wd >= 0 && x.w != nil {
					x.w.remove(d.wd)
					delete(x.byWD, d.wd)
				}
			}
		}
		return nil, err
	}
	return top, nil
}

// rawScan is the shared state of one scan: a LIFO queue of directories
// that knows when all work is done (empty, and no directory being listed,
// since listing one may queue more).
type rawScan struct {
	x      *Index
	w      watcher
	inline bool // watch each directory before listing it
	masks  bool // compute the names' character masks as listed (Dir.setFiles)

	mu      sync.Mutex
	cond    sync.Cond
	tasks   []scanTask
	active  int
	waiting int  // workers waiting in pop
	limit   bool // a watch could not be added: stop watching
}

// release closes what a task not listed holds.
func (t scanTask) release() {
	if t.parent != nil {
		t.parent.release()
	} else {
		unix.Close(t.fd)
	}
}

func (s *rawScan) pop(ctx context.Context) (scanTask, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.tasks) == 0 && s.active > 0 {
		s.waiting++
		s.cond.Wait()
		s.waiting--
	}
	if len(s.tasks) == 0 {
		return scanTask{}, false
	}
	t := s.tasks[len(s.tasks)-1]
	s.tasks = s.tasks[:len(s.tasks)-1]
	if ctx.Err() != nil {
		// Drop the work left: release the descriptors.
		rest := append(s.tasks, t)
		s.tasks = nil
		s.mu.Unlock()
		for _, r := range rest {
			r.release()
		}
		s.mu.Lock()
		s.cond.Broadcast()
		return scanTask{}, false
	}
	s.active++
	return t, true
}

// done marks a popped directory listed, queueing its subdirectories. It
// wakes waiting workers only when there is work for them or none is left
// (each wake-up is a futex call and a thread switch).
func (s *rawScan) done(sub []scanTask) {
	s.mu.Lock()
	s.tasks = append(s.tasks, sub...)
	s.active--
	waiting, finished := s.waiting, s.active == 0 && len(s.tasks) == 0
	s.mu.Unlock()
	switch {
	case waiting == 0:
	case finished || len(sub) > 1 && waiting > 1:
		s.cond.Broadcast()
	case len(sub) > 0:
		s.cond.Signal()
	}
}

// rawWorker lists directories on one goroutine with its own buffers.
type rawWorker struct {
	s     *rawScan
	buf   []byte // getdents
	names []byte // the entries of the directory being listed
	ents  []rawEntry
	path  []byte // root-relative path of an entry, for the rules
	files []byte
	links []byte
	sub   []scanTask
	nodes []*Dir // every directory this worker listed
}

// rawEntry is an entry of the directory being listed: its name is
// names[off:end].
type rawEntry struct {
	off, end int32
	typ      uint8 // DT_*
}

func (w *rawWorker) run(ctx context.Context) {
	w.buf = make([]byte, direntBuf)
	for {
		t, ok := w.s.pop(ctx)
		if !ok {
			return
		}
		w.sub = w.sub[:0]
		w.list(t)
		w.s.done(w.sub)
	}
}

// list opens and lists the directory of t, queueing its subdirectories.
func (w *rawWorker) list(t scanTask) {
	d := t.d
	w.nodes = append(w.nodes, d)
	fd := t.fd
	if t.parent != nil {
		var err error
		fd, err = openDirAt(t.parent.fd, d.name)
		t.parent.release()
		if err != nil {
			d.failed = true
			return
		}
	}
	if w.s.inline {
		// Watched once open and before it is listed: the watch is on the
		// directory listed (its path may name another one by now, when it
		// was replaced: its removal is then notified), and a change after
		// the listing is notified.
		w.watch(d, fd)
	}
	self := &rawDir{fd: fd, refs: 1}
	defer self.release()
	d.failed = w.read(fd) != nil
	rules := d.rules
	for _, e := range w.ents {
		if t.parent == nil {
			break // the top's own rules are in d.rules already
		}
		if string(w.names[e.off:e.end]) == gitignore.FileName && (e.typ == unix.DT_REG || e.typ == unix.DT_UNKNOWN) {
			if data, err := readSmall(fd, gitignore.FileName); err == nil {
				rules = rules.Push(gitignore.Parse(d.rel, data))
			}
			break
		}
	}
	d.rules = rules
	w.files, w.links = w.files[:0], w.links[:0]
	w.path = w.path[:0]
	if d.rel != "." {
		w.path = append(append(w.path, d.rel...), '/')
	}
	dirLen := len(w.path)
	for _, e := range w.ents {
		name := w.names[e.off:e.end]
		typ := e.typ
		if typ == unix.DT_UNKNOWN {
			typ = statType(fd, string(name))
		}
		var k kind
		switch typ {
		case unix.DT_DIR:
			k = kindDir
		case unix.DT_REG:
			k = kindFile
		case unix.DT_LNK:
			k = kindLink
		default:
			continue // devices, pipes, sockets
		}
		w.path = append(w.path[:dirLen], name...)
		// Match does not keep its argument.
		if rules.Match(unsafe.String(unsafe.SliceData(w.path), len(w.path)), k == kindDir) {
			continue
		}
		switch k {
		case kindFile:
			w.files = append(append(w.files, name...), sep)
		case kindLink:
			w.links = append(append(w.links, name...), sep)
		case kindDir:
			n := string(name)
			c := &Dir{name: n, rel: string(w.path), parent: d, rules: rules, wd: -1}
			d.dirs = append(d.dirs, c)
			w.sub = append(w.sub, scanTask{parent: self, d: c})
		}
	}
	d.setFiles(string(w.files), w.s.masks)
	d.links = string(w.links)
	if len(w.sub) > 0 {
		self.mu.Lock()
		self.refs += len(w.sub)
		self.mu.Unlock()
	}
}

// watch adds the watch of d, open as fd, before it is listed (a rescan).
func (w *rawWorker) watch(d *Dir, fd int) {
	wd, err := w.s.w.add(path.Join(w.s.x.root.Dir(), d.rel), fd)
	switch {
	case errors.Is(err, errWatchLimit):
		w.s.mu.Lock()
		w.s.limit = true
		w.s.mu.Unlock()
	case err == nil:
		d.wd = wd
	}
	// Other errors: the directory cannot be listed either.
}

// openDirAt opens the subdirectory name of parentFD, refusing a link.
func openDirAt(parentFD int, name string) (int, error) {
	for {
		fd, err := unix.Openat(parentFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// read lists the entries of fd into w.names and w.ents ("." and ".."
// left out).
func (w *rawWorker) read(fd int) error {
	w.names, w.ents = w.names[:0], w.ents[:0]
	for {
		n, err := unix.Getdents(fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("getdents: %w", err)
		}
		if n <= 0 {
			return nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2),
			// d_type (1), d_name (NUL-terminated).
			reclen := int(*(*uint16)(unsafe.Pointer(&w.buf[off+16])))
			typ := w.buf[off+18]
			name := w.buf[off+19 : off+reclen]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if len(name) == 0 || name[0] == '.' && (len(name) == 1 || len(name) == 2 && name[1] == '.') {
				continue
			}
			start := int32(len(w.names))
			w.names = append(w.names, name...)
			w.ents = append(w.ents, rawEntry{off: start, end: int32(len(w.names)), typ: typ})
		}
	}
}

// statType is the DT_* type of an entry the listing gave no type for.
func statType(dirFD int, name string) uint8 {
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return unix.DT_UNKNOWN
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFLNK:
		return unix.DT_LNK
	}
	return unix.DT_UNKNOWN
}

// readSmall reads the regular file name of directory dirFD, refusing a
// link, a file that is not regular and one over maxIgnoreFile bytes.
func readSmall(dirFD int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxIgnoreFile {
		return nil, fmt.Errorf("%s: not a small regular file", name)
	}
	data := make([]byte, st.Size)
	n := 0
	for n < len(data) {
		m, err := unix.Read(fd, data[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return data[:n], nil
}
