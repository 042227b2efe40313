package hostedrunner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/maestro-run/maestro/internal/workspace"
)

// Size caps of what a restore reads from the snapshot root (the agent can
// write there: it is inside the workspace by default).
const (
	MaxManifestBytes    = 64 << 20
	MaxSessionFileBytes = 1 << 30
)

// The runner's files and the agent's workspace. Maestro's live state (the
// session log and its lock) lives in Config.StateDir, by default under
// MAESTRO_HOME, out of the agent's reach. The snapshot root stays where the
// contract puts it (inside the workspace by default), so everything the
// runner reads or writes there goes through the no-follow helper of
// internal/workspace, opened from the workspace root as the trusted parent:
// a symbolic link planted at any component is refused, never followed,
// and only regular files are read, without blocking and with a size cap.

// insideWorkspace returns dir relative to the workspace root (slash
// path) when dir lies inside it, lexically or once the root's own links
// are resolved (the root is the operator's choice and trusted).
func insideWorkspace(root, dir string) (string, bool) {
	dir = filepath.Clean(dir)
	if rel, ok := workspace.Within(root, dir); ok {
		return filepath.ToSlash(rel), true
	}
	if real, err := filepath.EvalSymlinks(root); err == nil && real != root {
		if rel, ok := workspace.Within(real, dir); ok {
			return filepath.ToSlash(rel), true
		}
	}
	return "", false
}

// openDir opens dir (creating it and its parents with mode perm when
// create is set). Inside the workspace it is reached from the workspace
// root without following any link; elsewhere dir is the operator's and
// is opened as trusted.
func openDir(root, dir string, create bool, perm fs.FileMode) (*workspace.Dir, error) {
	rel, inside := insideWorkspace(root, dir)
	if !inside {
		if create {
			if err := os.MkdirAll(dir, perm); err != nil {
				return nil, err
			}
		}
		return workspace.OpenTrusted(dir)
	}
	ws, err := workspace.OpenTrusted(root)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	if create {
		return ws.MkdirPath(rel, perm)
	}
	return ws.OpenPath(rel)
}

// dirError says what could not be opened, and that a link was refused
// when that is the reason.
func dirError(what, dir string, err error) error {
	if errors.Is(err, workspace.ErrOutside) {
		return fmt.Errorf("%s %s: a component is a symbolic link (refused: nothing inside the workspace is followed): %w", what, dir, err)
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s %s: a component is not a directory: %w", what, dir, err)
	}
	return fmt.Errorf("%s %s: %w", what, dir, err)
}

// openStateDir opens (creating it) the runner's state directory and its
// sessions directory.
func openStateDir(cfg Config) (*workspace.Dir, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("the state directory is not set (--state-dir / MAESTRO_HOSTED_RUNNER_STATE_DIR)")
	}
	if rel, ok := insideWorkspace(cfg.WorkspaceRoot, cfg.StateDir); ok && rel == "." {
		return nil, fmt.Errorf("state directory %s is the workspace root: choose a directory of its own (default under MAESTRO_HOME)", cfg.StateDir)
	}
	d, err := openDir(cfg.WorkspaceRoot, cfg.StateDir, true, 0o700)
	if err != nil {
		return nil, dirError("open the state directory", cfg.StateDir, err)
	}
	defer d.Close()
	s, err := d.MkdirPath("sessions", 0o700)
	if err != nil {
		return nil, dirError("open the state directory", filepath.Join(cfg.StateDir, "sessions"), err)
	}
	return s, nil
}

// snapshotPath is the path of the file name in the snapshot root.
func (c Config) snapshotPath(name string) string { return filepath.Join(c.SnapshotRoot, name) }

// readRegular reads the regular file name of d, at most max bytes,
// without following a link.
func readRegular(d *workspace.Dir, name string, max int64) ([]byte, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return workspace.ReadRegular(f, name, max)
}
