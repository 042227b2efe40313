// Package index is the workspace file index: the directories and file
// names of a workspace that .gitignore files do not exclude, listed once
// and kept fresh from file-system notifications, so that name searches
// (utility_file_search, Glob) and Grep's choice of files do not list the
// whole tree again on each call.
//
// The index is built on first use (Of, then Read). It lists the tree in
// parallel, gitignore-aware as the searches' walk
// (internal/workspace/walk), on Linux with getdents(2) on raw descriptors
// (scan_linux.go): .git and ignored entries are left out;
// regular files and symbolic links are kept (links are reported apart, as
// Glob lists them and the others skip them); devices, pipes and sockets
// are left out. Hidden entries are kept: utility_file_search skips them,
// Grep and Glob do not.
//
// Freshness: on Linux every indexed directory is watched with inotify.
// Each Read first drains the inotify descriptor without blocking and
// relists the directories whose entries changed (a changed .gitignore
// relists its directory's whole subtree), so a search sees every change
// made before it started — no goroutine reads events in the background,
// and an idle index costs no CPU. After a full listing the watches are
// added in the background, so the first search does not wait for them;
// the next Read waits, and lists again the directories whose change time
// says they changed since the listing began (watchTree). When the
// kernel's event queue
// overflowed, or a watch cannot be added (the inotify watch limit), the
// next Read lists the tree again; where inotify is missing, every Read
// does. Changes to .git/info/exclude are not watched.
//
// Memory: a file costs its name plus one byte (the names of a directory
// are kept in one string), twice that when a name of its directory has an
// upper-case letter (the lower-cased names are kept for searches), plus 4
// bytes (the characters its name holds and its length, FileMasks); a
// directory about 250 bytes (its node, path, watch and masks).
// BenchmarkIndex reports the bytes per file (about 66 on the Go source
// tree, 58 before the masks).
//
// Character masks (Dir.NameChars, FirstChars, FileMasks) let a name search
// pass over the names that lack a character of the query without reading
// them. A full listing leaves them out (they would lengthen a cold search):
// they are computed with the watches, in the background, and known from
// the Read after; a directory listed again gets them at once.
package index

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/workspace"
)

// sep ends each name in Dir.files and Dir.links ('/' never occurs in a
// name).
const sep = '/'

// Dir is an indexed directory. Its fields do not change while a Read
// callback sees it.
type Dir struct {
	name   string
	rel    string // root-relative, slash-separated; "." for the root
	parent *Dir
	rules  *gitignore.Stack // in effect inside, its own .gitignore included
	files  string           // names of regular files, each followed by sep
	lower  string           // files lower-cased (the same string when no name has an upper-case letter)
	chars  uint64           // CharMask of lower: the characters its names hold
	first  uint64           // CharMask of the first character of each name of lower
	masks  []uint32         // FileMask of each name of lower, in order
	links  string           // names of symbolic links, each followed by sep
	dirs   []*Dir           // subdirectories, sorted by name
	failed bool             // could not be opened or fully read
	align  bool             // each name of lower is at the same place as in files
	wd     int32            // inotify watch, -1 when none
	gone   bool             // dropped from the tree
}

// Name returns the directory's base name ("." for the root).
func (d *Dir) Name() string { return d.name }

// Rel returns the directory's path relative to the workspace root,
// slash-separated ("." for the root).
func (d *Dir) Rel() string { return d.rel }

// Rules returns the .gitignore rules in effect inside the directory.
func (d *Dir) Rules() *gitignore.Stack { return d.rules }

// Failed reports whether the directory could not be listed (or only in
// part); its entries are then what could be read.
func (d *Dir) Failed() bool { return d.failed }

// Dirs returns the subdirectories, sorted by name; the slice is the
// index's own.
func (d *Dir) Dirs() []*Dir { return d.dirs }

// Files yields the names of the regular files, in no particular order.
func (d *Dir) Files() iter.Seq[string] { return names(d.files) }

// Links yields the names of the symbolic links.
func (d *Dir) Links() iter.Seq[string] { return names(d.links) }

// FilesLower yields the names of the regular files with each one
// lower-cased (strings.ToLower), in the order of Files.
func (d *Dir) FilesLower() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		packed, lower := d.files, d.lower
		if packed == lower { // no upper-case letter: one string to split
			for packed != "" {
				i := strings.IndexByte(packed, sep)
				if !yield(packed[:i], packed[:i]) {
					return
				}
				packed = packed[i+1:]
			}
			return
		}
		for packed != "" {
			i := strings.IndexByte(packed, sep)
			j := strings.IndexByte(lower, sep)
			if !yield(packed[:i], lower[:j]) {
				return
			}
			packed, lower = packed[i+1:], lower[j+1:]
		}
	}
}

// LowerNames returns the lower-cased names of the regular files, each
// followed by '/' (one string: a search can reject a whole directory
// whose names together do not hold the query's characters).
func (d *Dir) LowerNames() string { return d.lower }

// NameChars returns the CharMask of the lower-cased file names (of
// LowerNames without its separators): a query holding a character not in
// it is held by none of the names, nor is a subsequence of them.
func (d *Dir) NameChars() uint64 { return d.chars }

// FirstChars returns the union of the CharMasks of the first character
// (byte) of each lower-cased file name: a name can start with a text only
// if the text's first byte is in it.
func (d *Dir) FirstChars() uint64 { return d.first }

// setFiles sets the packed names of the regular files. Their character
// masks are computed now when masks is set; else they are unknown (all
// bits set, FileMasks nil) until the watches of a full listing are added
// (watchTree computes them, refresh sets them).
func (d *Dir) setFiles(packed string, masks bool) {
	d.files = packed
	// ToLower maps rune by rune, so each name is lower-cased as if alone
	// and no separator is made or lost; it returns packed itself when
	// nothing changes.
	d.lower = strings.ToLower(packed)
	// ASCII names keep their length when lower-cased.
	d.align = d.lower == packed || isASCII(packed)
	if masks {
		d.chars, d.first, d.masks = d.charMasks()
	} else {
		d.chars, d.first, d.masks = ^uint64(0), ^uint64(0), nil
	}
}

// charMasks computes NameChars, FirstChars and FileMasks.
func (d *Dir) charMasks() (chars, first uint64, masks []uint32) {
	if n := strings.Count(d.lower, string(sep)); n > 0 {
		masks = make([]uint32, 0, n)
	}
	bits := charBits()
	var m uint64
	at := 0
	for i := 0; i < len(d.lower); i++ {
		c := d.lower[i]
		if c != sep {
			m |= bits[c]
			continue
		}
		masks = append(masks, FoldMask(m)|uint32(min(i-at, maskLenMax))<<maskLenShift)
		chars |= m
		if i > at {
			first |= bits[d.lower[at]]
		}
		m, at = 0, i+1
	}
	return chars, first, masks
}

// charBits maps each byte to its charBit, made on first use.
var charBits = sync.OnceValue(func() *[256]uint64 {
	var t [256]uint64
	for c := range t {
		t[c] = charBit(byte(c))
	}
	return &t
})

// PackedNames returns the names of the regular files and their
// lower-cased forms, each followed by '/', when each lower-cased name is
// at the same place in the second string as the name in the first (ok);
// else ok is false, and FilesLower gives them.
func (d *Dir) PackedNames() (files, lower string, ok bool) {
	return d.files, d.lower, d.align
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// FileMasks returns a FileMask for each lower-cased file name, in the
// order of FilesLower; the slice is the index's own. It is nil when they
// are not known yet (nor are NameChars and FirstChars, then all bits
// set): the first Read after a full listing may see that.
func (d *Dir) FileMasks() []uint32 { return d.masks }

// A FileMask describes a file name in 32 bits: the FoldMask of its
// lower-cased form's CharMask, and its length in bytes (MaskLen) in the
// upper bits, so that a search can pass over names without reading them.
const (
	maskLenShift = 26
	maskLenMax   = 1<<(32-maskLenShift) - 1 // the length of this name or a longer one is not kept
)

// FoldMask folds a CharMask into the 26 bits of a FileMask (each of its
// bits joined to one of the letters' bits): a fold that lacks a bit of
// another's still says its text lacks a byte of the other's text.
func FoldMask(m uint64) uint32 {
	return uint32((m | m>>maskLenShift | m>>(2*maskLenShift)) & (1<<maskLenShift - 1))
}

// MaskLen returns the length of the lower-cased name a FileMask describes,
// or -1 when the mask does not say (a long name).
func MaskLen(m uint32) int {
	if n := int(m >> maskLenShift); n < maskLenMax {
		return n
	}
	return -1
}

// CharMask returns the set of the bytes of s as a 64-bit mask, a bit per
// class of bytes: one for each lower-case ASCII letter and digit and for
// '.', '_', '-' and ' '; the other bytes share the remaining bits. A mask
// that lacks a bit of another's says its text lacks a byte of the other.
func CharMask(s string) uint64 {
	var m uint64
	for i := 0; i < len(s); i++ {
		m |= charBit(s[i])
	}
	return m
}

// charBit maps a byte to its bit in a CharMask.
func charBit(c byte) uint64 {
	switch {
	case c-'a' < 26:
		return 1 << (c - 'a')
	case c-'0' < 10:
		return 1 << (26 + c - '0')
	case c == '.':
		return 1 << 36
	case c == '_':
		return 1 << 37
	case c == '-':
		return 1 << 38
	case c == ' ':
		return 1 << 39
	}
	return 1 << (40 + c%24) // 40..63
}

// FileCount returns the number of regular files.
func (d *Dir) FileCount() int { return strings.Count(d.files, string(sep)) }

func names(packed string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for packed != "" {
			i := strings.IndexByte(packed, sep)
			if !yield(packed[:i]) {
				return
			}
			packed = packed[i+1:]
		}
	}
}

// lookup returns the subdirectory at rel below d (rel relative to d).
func (d *Dir) lookup(rel string) *Dir {
	for rel != "" && rel != "." {
		name, rest, _ := strings.Cut(rel, "/")
		i, ok := slices.BinarySearchFunc(d.dirs, name, func(c *Dir, n string) int { return strings.Compare(c.name, n) })
		if !ok {
			return nil
		}
		d, rel = d.dirs[i], rest
	}
	return d
}

func (d *Dir) depth() int {
	if d.rel == "." {
		return 0
	}
	return strings.Count(d.rel, "/") + 1
}

// Index is the file index of one workspace. It is safe for concurrent
// use; Reads share it, a Read that must apply changes waits for the others.
type Index struct {
	root       *workspace.Root
	newWatcher func() (watcher, error)
	stopped    context.Context // cancelled by Close, which stops a listing under way
	stop       context.CancelFunc

	mu      sync.RWMutex
	top     *Dir
	w       watcher // nil: not watching, each Read lists the tree again
	byWD    map[int32]*Dir
	failed  map[*Dir]bool // directories listed again on each Read
	noWatch bool          // watching failed: do not try again
	closed  bool
	scans   int // full listings of the tree (for tests)

	// setup is closed when the watches of the last full listing are in
	// place (watchTree); nil when none are being added. Until then the
	// tree is only read: refresh and Close wait for it before changing
	// anything, the watches included.
	setup *watchSetup
}

// watchSetup is the outcome of watchTree, read once setup.done is closed.
type watchSetup struct {
	done    chan struct{}
	limit   bool   // a watch could not be added: stop watching
	recheck []*Dir // directories that may have changed before their watch
	masks   []dirMasks
}

// dirMasks are the character masks of a directory's names, computed by
// watchTree and set by refresh (a Read may be looking at them meanwhile).
type dirMasks struct {
	d            *Dir
	chars, first uint64
	masks        []uint32
}

type indexKey struct{}

// Of returns the index of root, shared by every user of root (it is kept
// by root.Shared and closed with root).
func Of(root *workspace.Root) *Index {
	return root.Shared(indexKey{}, func() any { return New(root) }).(*Index)
}

// New returns an index of root, not yet built; Of shares one per root.
func New(root *workspace.Root) *Index {
	stopped, stop := context.WithCancel(context.Background())
	return &Index{root: root, newWatcher: newWatcher, stopped: stopped, stop: stop}
}

// Close releases the watches. Reads after Close fail.
func (x *Index) Close() error {
	x.stop()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.setup != nil {
		<-x.setup.done // stopped early by x.stop
		x.setup = nil
	}
	x.closed = true
	x.top = nil
	return x.stopWatching()
}

func (x *Index) stopWatching() error {
	var err error
	if x.w != nil {
		err = x.w.close()
	}
	x.w, x.byWD = nil, nil
	return err
}

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("workspace index closed")

// Warm builds the index if it is not built yet, and waits for its
// watches (serve sessions do it eagerly, so that their first search is
// warm).
func (x *Index) Warm(ctx context.Context) error {
	if _, err := x.Read(ctx, ".", func(*Dir) {}); err != nil {
		return err
	}
	return x.refresh(ctx)
}

// Read brings the index up to date and calls fn with the directory at
// base (root-relative, slash-separated) under a read lock: fn must not
// keep the Dir or block. ok is false, and fn not called, when base is not
// an indexed directory (missing, ignored, not a directory): the caller
// then walks the tree itself.
func (x *Index) Read(ctx context.Context, base string, fn func(*Dir)) (ok bool, err error) {
	if err := x.refresh(ctx); err != nil {
		return false, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.top == nil {
		return false, ErrClosed
	}
	d := x.top.lookup(path.Clean(base))
	if d == nil {
		return false, nil
	}
	fn(d)
	return true, nil
}

// refresh applies the changes notified since the last Read, or lists the
// whole tree when it must.
func (x *Index) refresh(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(x.stopped, cancel)()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	dirty := map[*Dir]bool{} // true: list the subtree again
	mark := func(d *Dir, subtree bool) { dirty[d] = dirty[d] || subtree }
	if st := x.setup; st != nil {
		// The first search after a full listing waits for its watches.
		select {
		case <-st.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		x.setup = nil
		if st.limit {
			x.noWatch = true
			x.stopWatching()
		}
		for _, m := range st.masks {
			m.d.chars, m.d.first, m.d.masks = m.chars, m.first, m.masks
		}
		for _, d := range st.recheck {
			mark(d, false)
		}
	}
	if x.top == nil || x.w == nil {
		return x.rebuild(ctx)
	}
	overflow := false
	err := x.w.drain(func(ev event) {
		if ev.overflow {
			overflow = true
			return
		}
		d := x.byWD[ev.wd]
		if d == nil || d.gone {
			return
		}
		switch {
		case ev.self:
			// The directory itself was removed or moved: look at it again
			// (its parent lists it again too).
			if ev.ignored {
				delete(x.byWD, ev.wd)
				d.wd = -1
			}
			mark(d, true)
		case ev.name == gitignore.FileName:
			mark(d, true) // its rules changed
		case ev.entries:
			mark(d, false)
			// A subdirectory of that name, indexed, may have been removed
			// or moved and another made in its place: its node (kept by
			// name when d is listed again) and its watch are the old
			// one's, so its subtree is listed again. Its own watch says
			// so too, but maybe only in a later read of the events.
			if c := d.lookup(ev.name); c != nil && c != d {
				mark(c, true)
			}
		}
	})
	if err != nil || overflow {
		return x.rebuild(ctx)
	}
	for d := range x.failed {
		mark(d, false)
	}
	if len(dirty) == 0 {
		return nil
	}
	// Parents first: a directory dropped or listed again with its parent
	// needs nothing more.
	order := make([]*Dir, 0, len(dirty))
	for d := range dirty {
		order = append(order, d)
	}
	slices.SortFunc(order, func(a, b *Dir) int { return cmp.Compare(a.depth(), b.depth()) })
	for _, d := range order {
		if d.gone {
			continue
		}
		var err error
		if dirty[d] {
			err = x.rescan(ctx, d)
		} else {
			err = x.relist(ctx, d)
		}
		if err != nil {
			return err
		}
		if x.w == nil {
			return x.rebuild(ctx) // a watch could not be added
		}
	}
	return nil
}

// rebuild lists the whole tree, watching it again.
func (x *Index) rebuild(ctx context.Context) error {
	if x.top != nil {
		x.drop(x.top)
		x.top = nil
	}
	x.stopWatching()
	x.failed = map[*Dir]bool{}
	if !x.noWatch {
		w, err := x.newWatcher()
		if err != nil {
			x.noWatch = true
		} else {
			x.w, x.byWD = w, map[int32]*Dir{}
		}
	}
	x.scans++
	since := time.Now()
	top, err := x.scan(ctx, ".", nil, false)
	if err != nil {
		x.stopWatching()
		return fmt.Errorf("index the workspace: %w", err)
	}
	x.top = top
	if x.w != nil {
		st := &watchSetup{done: make(chan struct{})}
		x.setup = st
		go x.watchTree(top, x.w, since, st)
	}
	return nil
}

// changeMargin is how long before a full listing started a directory's
// change time (ctime) may lie and still be taken for a change made during
// the listing: file-system timestamps come from a clock that lags the
// real time by up to a scheduler tick.
const changeMargin = 2 * time.Second

// watchTree adds the watches of a full listing, in the background, so
// that the first search does not wait for them (about a third of the
// cost of a cold search on the Go source tree: one inotify_add_watch per
// directory). A change made to a directory between its listing and its
// watch would go unnotified, so each directory's change time is read once
// it is watched; one changed since the listing began (or less than
// changeMargin before) is listed again by the next refresh. It also
// computes the directories' character masks (Dir.FileMasks), left out of
// the listing for the same reason. Nothing else
// changes the tree while it runs: refresh and Close wait for st.done.
func (x *Index) watchTree(top *Dir, w watcher, since time.Time, st *watchSetup) {
	defer close(st.done)
	since = since.Add(-changeMargin)
	var rec func(d *Dir) bool
	rec = func(d *Dir) bool {
		if x.stopped.Err() != nil {
			return false
		}
		m := dirMasks{d: d}
		m.chars, m.first, m.masks = d.charMasks()
		st.masks = append(st.masks, m)
		abs := path.Join(x.root.Dir(), d.rel)
		wd, err := w.add(abs, -1)
		switch {
		case errors.Is(err, errWatchLimit):
			st.limit = true
			return false
		case err != nil:
			// Gone or unreadable since: its listing is checked again.
			st.recheck = append(st.recheck, d)
		default:
			d.wd = wd
			x.byWD[wd] = d
			if w.changedSince(abs, since) {
				st.recheck = append(st.recheck, d)
			}
		}
		for _, c := range d.dirs {
			if !rec(c) {
				return false
			}
		}
		return true
	}
	rec(top)
}

// drop removes d and its subtree from the index, releasing their watches.
func (x *Index) drop(d *Dir) {
	d.gone = true
	delete(x.failed, d)
	// A directory moved is watched again under its new name before its
	// old node is dropped (when the old name was made again meanwhile):
	// the kernel gave the new node the same watch, which then stays.
	if d.wd >= 0 && x.w != nil && x.byWD[d.wd] == d {
		x.w.remove(d.wd)
		delete(x.byWD, d.wd)
	}
	d.wd = -1
	for _, c := range d.dirs {
		x.drop(c)
	}
}

// rescan lists the subtree of d again (its rules changed, or it was
// replaced), putting the new listing in its place.
func (x *Index) rescan(ctx context.Context, d *Dir) error {
	if d.parent == nil {
		return x.rebuild(ctx)
	}
	p := d.parent
	x.drop(d)
	i := slices.Index(p.dirs, d)
	nd, err := x.scan(ctx, d.rel, p, true)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		// Gone, or no longer a directory: its parent's listing says what
		// it is now.
		if i >= 0 {
			p.dirs = slices.Delete(p.dirs, i, i+1)
		}
		return x.relist(ctx, p)
	}
	if i < 0 {
		p.dirs = append(p.dirs, nd)
		slices.SortFunc(p.dirs, func(a, b *Dir) int { return strings.Compare(a.name, b.name) })
		return nil
	}
	p.dirs[i] = nd
	return nil
}

// relist lists directory d again: its files, and which subdirectories
// appeared (listed with their subtrees) or disappeared (dropped).
func (x *Index) relist(ctx context.Context, d *Dir) error {
	od, err := x.root.OpenDir(d.rel)
	if err != nil {
		for _, c := range d.dirs {
			x.drop(c)
		}
		d.setFiles("", true)
		d.links, d.dirs, d.failed = "", nil, true
		x.failed[d] = true
		return nil
	}
	entries, err := od.ReadDir()
	od.Close()
	d.failed = err != nil
	if d.failed {
		x.failed[d] = true
	} else {
		delete(x.failed, d)
	}
	var files, links strings.Builder
	var sub []string
	for _, e := range entries {
		kind := entryKind(d, e)
		switch kind {
		case kindFile:
			files.WriteString(e.Name())
			files.WriteByte(sep)
		case kindLink:
			links.WriteString(e.Name())
			links.WriteByte(sep)
		case kindDir:
			sub = append(sub, e.Name())
		}
	}
	d.setFiles(files.String(), true)
	d.links = links.String()
	slices.Sort(sub)
	old := d.dirs
	dirs := make([]*Dir, 0, len(sub))
	// Drop first: a directory moved within the tree is watched again
	// under its new name.
	for _, c := range old {
		if _, found := slices.BinarySearch(sub, c.name); !found {
			x.drop(c)
		}
	}
	for _, name := range sub {
		i, found := slices.BinarySearchFunc(old, name, func(c *Dir, n string) int { return strings.Compare(c.name, n) })
		if found {
			dirs = append(dirs, old[i])
			continue
		}
		nd, err := x.scan(ctx, path.Join(d.rel, name), d, true)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // gone again
		}
		dirs = append(dirs, nd)
	}
	d.dirs = dirs
	return nil
}

type kind uint8

const (
	kindNone kind = iota
	kindFile
	kindLink
	kindDir
)

// entryKind says how an entry of d is indexed (kindNone: not at all).
func entryKind(d *Dir, e fs.DirEntry) kind {
	typ := e.Type()
	var k kind
	switch {
	case typ.IsDir():
		k = kindDir
	case typ.IsRegular():
		k = kindFile
	case typ&fs.ModeSymlink != 0:
		k = kindLink
	default:
		return kindNone // devices, pipes, sockets
	}
	if d.rules.Match(path.Join(d.rel, e.Name()), k == kindDir) {
		return kindNone
	}
	return k
}
