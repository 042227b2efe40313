package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"strings"
)

// Trusted-parent access to agent-writable trees.
//
// Maestro touches some trees from outside the sandbox that an agent can
// rewrite from inside it: a queued job's input/ and output/, the hosted
// runner's snapshot root inside the workspace, and so on. An agent can
// replace any directory there with a symbolic link (output → /), so such
// trees are reached from a directory Maestro itself created and trusts
// (OpenTrusted) one component at a time, never following a link at any
// component — the top-level one included — and opening regular files
// only, without blocking on a FIFO. A refused link matches ErrOutside.

// ErrWalkLimit is matched (errors.Is) by the error Walk returns when the
// tree has more entries, or more levels, than its limits allow.
var ErrWalkLimit = errors.New("directory tree exceeds the walk limit")

// Default walk limits (WalkLimits zero values).
const (
	DefaultWalkEntries = 10_000
	DefaultWalkDepth   = 64
)

// WalkLimits bounds a Walk. Zero fields take the defaults.
type WalkLimits struct {
	// MaxEntries is the most entries visited (files, directories, links).
	MaxEntries int
	// MaxDepth is the deepest directory level entered (1 = d's entries).
	MaxDepth int
}

func (l WalkLimits) withDefaults() WalkLimits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultWalkEntries
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultWalkDepth
	}
	return l
}

// OpenTrusted opens dir, a directory Maestro created and trusts (a task's
// directory under the data directory, the hosted runner's state directory,
// a workspace root chosen by the operator), as a Dir. dir itself is opened
// as given; everything below it is reached with OpenPath, MkdirPath and the
// other Dir methods, which follow no symbolic link.
func OpenTrusted(dir string) (*Dir, error) {
	h, err := openTrustedHandle(dir)
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", dir, err)
	}
	return &Dir{h: h, rel: "."}, nil
}

// splitRel splits a slash-separated relative path into its components,
// refusing absolute paths, `..` and empty names. "" and "." yield none.
func splitRel(rel string) ([]string, error) {
	if strings.IndexByte(rel, 0) >= 0 {
		return nil, fmt.Errorf("invalid path %q: contains a NUL byte", Excerpt(rel))
	}
	if rel == "" || rel == "." {
		return nil, nil
	}
	if path.IsAbs(rel) {
		return nil, &OutsideError{Path: Excerpt(rel)}
	}
	var parts []string
	for _, p := range strings.Split(path.Clean(rel), "/") {
		switch p {
		case ".":
		case "..":
			return nil, &OutsideError{Path: Excerpt(rel)}
		default:
			parts = append(parts, p)
		}
	}
	return parts, nil
}

// linkError turns a refusal to follow a symbolic link (ELOOP from
// O_NOFOLLOW, or ENOTDIR for a link opened as a directory) into
// *OutsideError; other errors become *fs.PathError.
func (d *Dir) linkError(name string, err error) error {
	if d.h.isLink(name, err) {
		return &OutsideError{Path: d.join(name)}
	}
	return &fs.PathError{Op: "open", Path: d.join(name), Err: err}
}

// OpenPath opens the directory at rel, a slash-separated path below d.
// Every component is opened without following a symbolic link; a link
// anywhere on the way yields an *OutsideError.
func (d *Dir) OpenPath(rel string) (*Dir, error) {
	return d.walkPath(rel, false, 0)
}

// MkdirPath creates the missing directories of rel below d (mode perm,
// before the umask) and opens the last one, following no symbolic link at
// any component.
func (d *Dir) MkdirPath(rel string, perm fs.FileMode) (*Dir, error) {
	return d.walkPath(rel, true, perm)
}

func (d *Dir) walkPath(rel string, create bool, perm fs.FileMode) (*Dir, error) {
	parts, err := splitRel(rel)
	if err != nil {
		return nil, err
	}
	cur := &Dir{h: d.h, rel: d.rel}
	owned := false // cur.h must be closed when replaced
	for _, p := range parts {
		h, err := cur.h.openDir(p)
		if create && errors.Is(err, fs.ErrNotExist) {
			if merr := cur.h.mkdir(p, perm); merr != nil && !errors.Is(merr, fs.ErrExist) {
				err = merr
			} else {
				h, err = cur.h.openDir(p)
			}
		}
		if err != nil {
			lerr := cur.linkError(p, err)
			if owned {
				cur.h.close()
			}
			return nil, lerr
		}
		next := &Dir{h: h, rel: cur.join(p)}
		if owned {
			cur.h.close()
		}
		cur, owned = next, true
	}
	if !owned {
		// rel named d itself: hand out a handle of its own.
		h, err := d.h.dup()
		if err != nil {
			return nil, fmt.Errorf("open directory %s: %w", d.rel, err)
		}
		cur = &Dir{h: h, rel: d.rel}
	}
	return cur, nil
}

// OpenFilePath opens the regular file at rel below d for reading; no
// component is followed if it is a symbolic link, and a file that is not
// regular (a FIFO, a device, a socket) is refused without blocking.
func (d *Dir) OpenFilePath(rel string) (*os.File, error) {
	dir, base := path.Split(rel)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("open %s: not a file path", Excerpt(rel))
	}
	sub, err := d.OpenPath(dir)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	f, err := sub.h.open(base)
	if err != nil {
		return nil, sub.linkError(base, err)
	}
	return f, nil
}

// Lstat describes the entry name of d without following a link.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fi, err := d.h.lstat(name)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: d.join(name), Err: err}
	}
	return fi, nil
}

// Create creates the new file name in d for writing (mode perm before the
// umask). An existing entry of that name, a link included, is an error
// matching fs.ErrExist.
func (d *Dir) Create(name string, perm fs.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := d.h.create(name, perm)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: d.join(name), Err: err}
	}
	return f, nil
}

// WriteFileAtomic replaces the entry name of d with a regular file holding
// data: the data goes to a new temporary file in d, is synced, and is
// renamed over name. A symbolic link at name is replaced, never followed.
func (d *Dir) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	return d.WriteStreamAtomic(name, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteStreamAtomic is WriteFileAtomic for what fill writes: name is
// replaced only when fill and the sync succeed, else it is left as it was
// and the temporary file is removed.
func (d *Dir) WriteStreamAtomic(name string, perm fs.FileMode, fill func(io.Writer) error) error {
	if err := checkName(name); err != nil {
		return err
	}
	var (
		tmp string
		f   *os.File
		err error
	)
	for range 10 {
		tmp = "." + name + ".maestro-" + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
		if len(tmp) > 255 {
			tmp = ".maestro-" + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
		}
		f, err = d.Create(tmp, perm)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", d.join(name), err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			d.h.remove(tmp)
		}
	}()
	if err := fill(f); err != nil {
		return fmt.Errorf("write %s: %w", d.join(name), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", d.join(name), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", d.join(name), err)
	}
	if err := d.h.rename(tmp, d.h, name); err != nil {
		return fmt.Errorf("write %s: replace: %w", d.join(name), err)
	}
	ok = true
	return nil
}

// Rename moves the entry oldName of d to newName in to (which may be d).
// Neither name is followed if it is a link; an entry already at newName is
// replaced as rename(2) does.
func (d *Dir) Rename(oldName string, to *Dir, newName string) error {
	if err := checkName(oldName); err != nil {
		return err
	}
	if err := checkName(newName); err != nil {
		return err
	}
	if err := d.h.rename(oldName, to.h, newName); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(oldName), New: to.join(newName), Err: err}
	}
	return nil
}

// Remove removes the entry name of d: a file, a link (not its target) or
// an empty directory.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := d.h.remove(name); err != nil {
		return &fs.PathError{Op: "remove", Path: d.join(name), Err: err}
	}
	return nil
}

// RemoveAll removes the entry name of d and, if it is a directory, its
// whole tree, following no link. A missing entry is not an error.
func (d *Dir) RemoveAll(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	fi, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		sub, err := d.OpenDir(name)
		if err != nil {
			return d.linkError(name, err)
		}
		entries, err := sub.ReadDir()
		if err == nil {
			for _, e := range entries {
				if rerr := sub.RemoveAll(e.Name()); rerr != nil && err == nil {
					err = rerr
				}
			}
		}
		sub.Close()
		if err != nil {
			return err
		}
	}
	err = d.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Walk visits the tree below d depth-first, in the order the system lists
// each directory, calling fn with each entry's slash-separated path
// relative to d. Symbolic links are reported as links and never followed.
// fn returning fs.SkipDir for a directory skips its contents; any other
// error stops the walk and is returned. Exceeding lim stops the walk with
// an error matching ErrWalkLimit after fn has seen lim.MaxEntries entries.
func (d *Dir) Walk(lim WalkLimits, fn func(rel string, e fs.DirEntry) error) error {
	lim = lim.withDefaults()
	seen := 0
	var walk func(dir *Dir, prefix string, depth int) error
	walk = func(dir *Dir, prefix string, depth int) error {
		if depth > lim.MaxDepth {
			return fmt.Errorf("%w: deeper than %d levels at %s", ErrWalkLimit, lim.MaxDepth, Excerpt(prefix))
		}
		entries, err := dir.ReadDir()
		if err != nil {
			return err
		}
		for _, e := range entries {
			if seen >= lim.MaxEntries {
				return fmt.Errorf("%w: more than %d entries", ErrWalkLimit, lim.MaxEntries)
			}
			seen++
			rel := e.Name()
			if prefix != "" {
				rel = prefix + "/" + e.Name()
			}
			err := fn(rel, e)
			if e.IsDir() {
				if errors.Is(err, fs.SkipDir) {
					continue
				}
				if err != nil {
					return err
				}
				sub, err := dir.OpenDir(e.Name())
				if err != nil {
					return dir.linkError(e.Name(), err)
				}
				err = walk(sub, rel, depth+1)
				sub.Close()
				if err != nil {
					return err
				}
				continue
			}
			if err != nil && !errors.Is(err, fs.SkipDir) {
				return err
			}
		}
		return nil
	}
	// A handle of its own: d's listing offset may be at its end already.
	top, err := d.OpenPath(".")
	if err != nil {
		return err
	}
	defer top.Close()
	return walk(top, "", 1)
}
