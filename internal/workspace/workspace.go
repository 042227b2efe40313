// Package workspace confines file access to one directory tree. Every file
// path that comes from a model, a client or a manifest goes through a Root:
// Rel checks the path lexically, and every operation runs through an
// os.Root, which refuses `..` and symlink escapes at the system-call level.
// A path that would leave the tree yields an error for which
// errors.Is(err, ErrOutside) holds.
//
// Symbolic links are followed while they stay inside the tree. As with
// os.Root, a link whose target is absolute counts as leaving the tree even
// when the target happens to lie inside it; relative links are the portable
// way to link within a workspace.
package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrOutside is matched (errors.Is) by every error reporting a path that
// lies, or leads through a symbolic link, outside the workspace.
var ErrOutside = errors.New("path is outside the workspace")

// OutsideError reports a path that lies outside the workspace. It matches
// ErrOutside.
type OutsideError struct {
	// Path is the path as the caller gave it.
	Path string
}

// Error implements error.
func (e *OutsideError) Error() string { return "path is outside the workspace: " + Excerpt(e.Path) }

// Is reports whether target is ErrOutside.
func (e *OutsideError) Is(target error) bool { return target == ErrOutside }

// maxSymlinks bounds how many links Resolve follows for one path.
const maxSymlinks = 40

// Root is an open workspace directory. It is safe for concurrent use.
type Root struct {
	root  *os.Root
	dir   string // absolute, symlinks resolved
	given string // absolute and clean, as given to Open (may differ from dir)

	sharedMu sync.Mutex
	shared   map[any]any // see Shared
}

// Open opens dir as a workspace root. dir may be relative to the current
// directory; it must exist and be a directory.
func Open(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	return &Root{root: root, dir: resolved, given: abs}, nil
}

// Close releases the root's directory handle and closes the values kept
// by Shared that are io.Closers. Files already opened stay usable.
func (r *Root) Close() error {
	r.sharedMu.Lock()
	shared := r.shared
	r.shared = nil
	r.sharedMu.Unlock()
	for _, v := range shared {
		if c, ok := v.(io.Closer); ok {
			c.Close()
		}
	}
	return r.root.Close()
}

// Shared returns the value kept on r under key, making it with mk on first
// use, so that every user of one open workspace shares it (the file index
// of internal/workspace/index is kept this way). Values that are
// io.Closers are closed by Close.
func (r *Root) Shared(key any, mk func() any) any {
	r.sharedMu.Lock()
	defer r.sharedMu.Unlock()
	if v, ok := r.shared[key]; ok {
		return v
	}
	v := mk()
	if r.shared == nil {
		r.shared = map[any]any{}
	}
	r.shared[key] = v
	return v
}

// Dir returns the workspace directory: absolute, with symbolic links
// resolved.
func (r *Root) Dir() string { return r.dir }

// Rel returns path relative to the workspace root, cleaned, using the
// operating system's separator ("." for the root itself). path may be
// relative to the root or absolute; an absolute path must lie under the
// root (under Dir or under the directory as given to Open). A path that
// climbs out with `..` or lies elsewhere yields an *OutsideError. Rel is
// lexical: it does not look at the file system, so it does not see
// symbolic links (the operations of Root do).
func (r *Root) Rel(path string) (string, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return "", fmt.Errorf("invalid path %q: contains a NUL byte", Excerpt(path))
	}
	if path == "" {
		return ".", nil
	}
	if filepath.IsAbs(path) {
		clean := filepath.Clean(path)
		for _, base := range []string{r.dir, r.given} {
			if rel, ok := Within(base, clean); ok {
				return rel, nil
			}
		}
		return "", &OutsideError{Path: path}
	}
	clean := filepath.Clean(path)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", &OutsideError{Path: path}
	}
	return clean, nil
}

// Within reports path relative to base when path is base or lies under
// it; both must be clean and absolute (symbolic links already resolved
// when the answer must hold on disk).
func Within(base, path string) (string, bool) {
	if path == base {
		return ".", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if rest, ok := strings.CutPrefix(path, prefix); ok {
		return rest, true
	}
	return "", false
}

// Resolve returns the absolute real path of path after following every
// symbolic link in it, checking at each step that the path stays inside
// the workspace. A path that does not exist yet is checked as far as it
// exists; its missing tail is appended as written. A link out of the
// workspace, including a dangling one, yields an *OutsideError.
func (r *Root) Resolve(path string) (string, error) {
	rel, err := r.Rel(path)
	if err != nil {
		return "", err
	}
	resolved, err := r.resolve(path, rel)
	if err != nil {
		return "", err
	}
	return filepath.Join(r.dir, resolved), nil
}

// resolve follows the symbolic links of rel (clean, relative) inside the
// root and returns the real relative path. orig is used in errors.
func (r *Root) resolve(orig, rel string) (string, error) {
	var done []string
	todo := splitPath(rel)
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", &OutsideError{Path: orig}
			}
			done = done[:len(done)-1]
			continue
		}
		cand := filepath.Join(append(done, c)...)
		fi, err := r.root.Lstat(cand)
		if err != nil {
			if isEscape(err) {
				return "", &OutsideError{Path: orig}
			}
			// Missing (or under a non-directory): nothing further can be a
			// link; keep the rest as written.
			done = append(done, c)
			continue
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		links++
		if links > maxSymlinks {
			return "", fmt.Errorf("resolve %s: too many levels of symbolic links", orig)
		}
		target, err := r.root.Readlink(cand)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", orig, r.wrap(orig, err))
		}
		if filepath.IsAbs(target) {
			return "", &OutsideError{Path: orig}
		}
		todo = append(splitPath(target), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return filepath.Join(done...), nil
}

func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}

// isEscape reports whether err is os.Root's refusal of a path that leaves
// the root. os.Root does not export that error, so it is recognised by its
// text; TestEscapeDetection pins the behaviour.
func isEscape(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err != nil && pe.Err.Error() == "path escapes from parent"
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err != nil && le.Err.Error() == "path escapes from parent"
	}
	return false
}

// wrap turns os.Root's escape errors into *OutsideError naming orig and
// returns other errors unchanged.
func (r *Root) wrap(orig string, err error) error {
	if isEscape(err) {
		return &OutsideError{Path: orig}
	}
	return err
}

// ReadFile reads the named regular file whole. Anything else is refused
// as by OpenRegular; use ReadFileMax to bound the size read.
func (r *Root) ReadFile(path string) ([]byte, error) {
	return r.ReadFileMax(path, 1<<62)
}

// WriteFile replaces the named file with data, atomically: the data goes to
// a temporary file beside the target, which is then renamed over it.
// Missing parent directories are created (mode 0755). An existing file
// keeps its permission bits; a new one gets perm (before the umask). If the
// path is a symbolic link inside the workspace, the file it points to is
// replaced and the link kept; a link leading out of the workspace, even a
// dangling one, is refused with an *OutsideError. An existing target that
// is neither a regular file nor a directory (a FIFO, a device) is refused
// with a *NotRegularError.
func (r *Root) WriteFile(path string, data []byte, perm fs.FileMode) error {
	rel, err := r.Rel(path)
	if err != nil {
		return err
	}
	resolved, err := r.resolve(path, rel)
	if err != nil {
		return err
	}
	if resolved == "." {
		return fmt.Errorf("write %s: is a directory", path)
	}
	mode := perm
	keepMode := false
	switch fi, err := r.root.Stat(resolved); {
	case err == nil && fi.IsDir():
		return fmt.Errorf("write %s: is a directory", path)
	case err == nil && !fi.Mode().IsRegular():
		return &NotRegularError{Path: path, Mode: fi.Mode()}
	case err == nil:
		mode, keepMode = fi.Mode().Perm(), true
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("write %s: %w", path, r.wrap(path, err))
	}
	dir := filepath.Dir(resolved)
	if dir != "." {
		if err := r.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write %s: create parent directories: %w", path, r.wrap(path, err))
		}
	}
	tmp, f, err := r.createTemp(dir, filepath.Base(resolved), mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, r.wrap(path, err))
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			r.root.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if keepMode {
		if err := f.Chmod(mode); err != nil {
			return fmt.Errorf("write %s: keep mode: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := r.root.Rename(tmp, resolved); err != nil {
		return fmt.Errorf("write %s: replace: %w", path, r.wrap(path, err))
	}
	ok = true
	return nil
}

// createTemp creates a new, empty temporary file in dir (relative to the
// root) named after base.
func (r *Root) createTemp(dir, base string, mode fs.FileMode) (string, *os.File, error) {
	for range 10 {
		name := filepath.Join(dir, "."+base+".maestro-"+strconv.FormatUint(rand.Uint64(), 36)+".tmp")
		f, err := r.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create temporary file: %w", err)
		}
		return name, f, nil
	}
	return "", nil, errors.New("create temporary file: too many name collisions")
}

// Stat returns information about the named file, following symbolic links
// (inside the workspace only).
func (r *Root) Stat(path string) (fs.FileInfo, error) {
	rel, err := r.Rel(path)
	if err != nil {
		return nil, err
	}
	fi, err := r.root.Stat(rel)
	if err != nil {
		return nil, r.wrap(path, err)
	}
	return fi, nil
}

// Lstat returns information about the named file without following a
// final symbolic link.
func (r *Root) Lstat(path string) (fs.FileInfo, error) {
	rel, err := r.Rel(path)
	if err != nil {
		return nil, err
	}
	fi, err := r.root.Lstat(rel)
	if err != nil {
		return nil, r.wrap(path, err)
	}
	return fi, nil
}

// Open opens the named regular file or directory for reading. It never
// blocks: anything else (a FIFO, a device, a socket) is refused with a
// *NotRegularError, checked on the opened file.
func (r *Root) Open(path string) (*os.File, error) {
	f, _, err := r.openNonblock(path, true)
	return f, err
}

// MkdirAll creates the named directory and any missing parents.
func (r *Root) MkdirAll(path string, perm fs.FileMode) error {
	rel, err := r.Rel(path)
	if err != nil {
		return err
	}
	if err := r.root.MkdirAll(rel, perm); err != nil {
		return r.wrap(path, err)
	}
	return nil
}

// Remove removes the named file or empty directory (a symbolic link itself,
// not its target).
func (r *Root) Remove(path string) error {
	rel, err := r.Rel(path)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("remove %s: refusing to remove the workspace root", path)
	}
	if err := r.root.Remove(rel); err != nil {
		return r.wrap(path, err)
	}
	return nil
}

// FS returns the workspace as an fs.FS (also fs.StatFS, fs.ReadFileFS,
// fs.ReadDirFS and fs.ReadLinkFS) for walking. Its names are slash-separated
// and relative, as io/fs requires. It opens only regular files and
// directories, never blocking (a FIFO is refused with a *NotRegularError).
func (r *Root) FS() fs.FS { return fsys{r: r, base: r.root.FS()} }
