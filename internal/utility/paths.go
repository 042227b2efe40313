package utility

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// resolvePath resolves p, absolute or relative to base (an absolute
// directory inside the workspace), to its absolute real path inside the
// workspace. A path that does not exist is resolved as far as it exists.
func (m *Manager) resolvePath(base, p string) (string, *Error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errorf(400, "Invalid path: %q", p)
	}
	joined := p
	if !filepath.IsAbs(p) {
		joined = filepath.Join(base, p)
	}
	abs, err := m.root.Resolve(joined)
	if err != nil {
		if errors.Is(err, workspace.ErrOutside) {
			return "", outsideError(joined)
		}
		return "", errorf(400, "Invalid path %s: %v", p, err)
	}
	return abs, nil
}

// OutsideWorkspace reports, without running it, whether a utility request
// names a path outside the workspace: the path (against its cwd) of
// utility_file_read, the cwd of utility_file_search and
// utility_command_start, the root_dir of utility_file_watch_start. Paths
// are resolved as the operations resolve them, a path that does not exist
// yet through its longest existing prefix. A transport that answers such
// a request itself (HTTP, wire contract §10) asks first; the operation
// still checks its paths when it runs.
func (m *Manager) OutsideWorkspace(msg protocol.Message) bool {
	var cwd, path string
	switch r := msg.(type) {
	case protocol.UtilityFileRead:
		cwd, path = r.Cwd, r.Path
	case protocol.UtilityFileSearch:
		cwd = r.Cwd
	case protocol.UtilityCommandStart:
		cwd = r.Cwd
	case protocol.UtilityFileWatchStart:
		path = r.RootDir
	default:
		return false
	}
	outside := func(e *Error) bool { return e != nil && e.Code == 403 }
	base := m.root.Dir()
	if cwd != "" {
		abs, e := m.resolvePath(base, cwd)
		if e != nil {
			return outside(e)
		}
		base = abs
	}
	if path == "" {
		return false
	}
	_, e := m.resolvePath(base, path)
	return outside(e)
}

// outsideError is the contract's error for a path outside the workspace,
// naming the absolute path the request leads to: its real path when it
// exists (as the reference server reports it), else the cleaned path.
func outsideError(abs string) *Error {
	shown := filepath.Clean(abs)
	if real, err := filepath.EvalSymlinks(shown); err == nil {
		shown = real
	}
	return errorf(403, "Path is outside workspace root: %s", shown)
}

// resolveDir resolves a request's cwd (empty: the workspace root) to an
// existing directory inside the workspace, returning its absolute real
// path.
func (m *Manager) resolveDir(cwd string) (string, *Error) {
	if cwd == "" {
		return m.root.Dir(), nil
	}
	abs, e := m.resolvePath(m.root.Dir(), cwd)
	if e != nil {
		return "", e
	}
	fi, err := m.root.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errorf(404, "Working directory not found: %s", cwd)
	case errors.Is(err, workspace.ErrOutside):
		return "", outsideError(abs)
	case err != nil:
		return "", errorf(400, "Working directory not accessible: %s", cwd)
	case !fi.IsDir():
		return "", errorf(400, "Working directory is not a directory: %s", cwd)
	}
	return abs, nil
}

// relToRoot returns abs (absolute, inside the workspace) relative to the
// workspace root, slash-separated ("." for the root).
func (m *Manager) relToRoot(abs string) string {
	rel, err := filepath.Rel(m.root.Dir(), abs)
	if err != nil {
		return "."
	}
	return filepath.ToSlash(rel)
}
