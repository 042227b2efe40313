// Package taskdir is the layout of a queued task's directory, shared by the
// API that reads and writes the agent's files (internal/server) and the
// queue that runs the task (internal/queue):
//
//	<dataDir>/tasks/<id>/    the task directory: Maestro creates it, the agent cannot write it
//	    work/                the agent's workspace: input/, output/, subtasks/ (results), skills/
//	    state/               Maestro's state of the task's runs: logs/ (run state, lock), subtasks/ (subtask runs)
//
// Only work/ is given to the agent (bound into the sandbox as its
// workspace), so the agent cannot replace the directories Maestro keeps its
// state in; and Maestro reaches into work/ only through the no-follow
// helper of internal/workspace opened from the task directory.
//
// A task directory of the layout before this one (the workspace was the
// task directory itself, with logs/ in it) is migrated the first time
// Open or Prepare sees it: its entries move into work/, except the run's
// logs/, which moves to state/logs/ when it is a real directory.
package taskdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/maestro-run/maestro/internal/workspace"
)

// Names of the task directory's entries.
const (
	// Work is the agent's workspace.
	Work = "work"
	// State holds Maestro's state of the task's runs (the engine's run
	// directory).
	State = "state"
	// migrating is work/ while a directory of the old layout is being
	// migrated: renamed to work/ once everything is in it.
	migrating = ".work-migrating"
)

// Perm is the mode of a task directory: only Maestro's user (and the
// agent, which runs as that user) can enter it. Its work/ and the files
// in it keep ordinary modes (the agent's umask decides those), so the
// task directory is what keeps the task's uploads, deliverables and state
// from other local users when the data directory is one they can list
// (`--data-dir /srv/maestro` made with the usual umask, or created by a
// worker on PostgreSQL).
const Perm fs.FileMode = 0o700

// create creates taskDir (and missing parents) with Perm, and restricts
// an existing one to Perm (task directories were 0755 before).
func create(taskDir string) error {
	if err := os.MkdirAll(taskDir, Perm); err != nil {
		return fmt.Errorf("create the task directory: %w", err)
	}
	if err := os.Chmod(taskDir, Perm); err != nil {
		return fmt.Errorf("restrict the task directory to its owner: %w", err)
	}
	return nil
}

// WorkDir is the agent's workspace in taskDir.
func WorkDir(taskDir string) string { return filepath.Join(taskDir, Work) }

// StateDir is Maestro's state directory in taskDir.
func StateDir(taskDir string) string { return filepath.Join(taskDir, State) }

// Prepare creates taskDir (and its parents, mode Perm; an existing one is
// restricted to Perm), work/ and state/, migrating a
// task directory of the old layout first. It returns the paths of work/
// and state/.
func Prepare(taskDir string) (work, state string, err error) {
	if err := create(taskDir); err != nil {
		return "", "", err
	}
	d, err := workspace.OpenTrusted(taskDir)
	if err != nil {
		return "", "", fmt.Errorf("open the task directory: %w", err)
	}
	defer d.Close()
	if err := migrate(d); err != nil {
		return "", "", err
	}
	for name, perm := range map[string]fs.FileMode{Work: 0o755, State: 0o700} {
		sub, err := d.MkdirPath(name, perm)
		if err != nil {
			return "", "", fmt.Errorf("create the task's %s/: %w", name, err)
		}
		sub.Close()
	}
	return WorkDir(taskDir), StateDir(taskDir), nil
}

// OpenWork opens the agent's workspace of taskDir for host-side access
// (nothing below it is followed), migrating a task directory of the old
// layout first. With mk, missing directories are created (the task
// directory with Perm, an existing one restricted to it); without,
// a missing task directory or workspace yields an error matching
// fs.ErrNotExist. Close the Dir when done.
func OpenWork(taskDir string, mk bool) (*workspace.Dir, error) {
	if mk {
		if err := create(taskDir); err != nil {
			return nil, err
		}
	}
	d, err := workspace.OpenTrusted(taskDir)
	if err != nil {
		return nil, fmt.Errorf("open the task directory: %w", err)
	}
	defer d.Close()
	if err := migrate(d); err != nil {
		return nil, err
	}
	var w *workspace.Dir
	if mk {
		w, err = d.MkdirPath(Work, 0o755)
	} else {
		w, err = d.OpenPath(Work)
	}
	if err != nil {
		return nil, fmt.Errorf("open the task's workspace: %w", err)
	}
	return w, nil
}

// migrate moves a task directory of the old layout (the workspace itself,
// with the run's logs/ in it) into work/ and state/. It is idempotent and
// safe against a crash or a second migrator at any step: entries go into
// .work-migrating/ first, the run's logs/ from there into state/, and
// .work-migrating/ becomes work/ last, so a work/ that exists is never
// migrated again (and nothing the agent later puts in work/ is ever taken
// for Maestro's state).
func migrate(d *workspace.Dir) error {
	ents, err := d.ReadDir()
	if err != nil {
		return fmt.Errorf("read the task directory: %w", err)
	}
	legacy, inProgress := false, false
	for _, e := range ents {
		switch e.Name() {
		case Work:
			return nil
		case State:
		case migrating:
			inProgress = true
		default:
			legacy = true
		}
	}
	if !legacy && !inProgress {
		return nil
	}
	m, err := d.MkdirPath(migrating, 0o755)
	if err != nil {
		return fmt.Errorf("migrate the task directory to work/ and state/: %w", err)
	}
	defer m.Close()
	for _, e := range ents {
		switch name := e.Name(); name {
		case State, migrating:
		default:
			if err := d.Rename(name, m, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("migrate the task directory: move %s into work/: %w", name, err)
			}
		}
	}
	// The run's state (logs/: run-state.json, the lock) moves out of the
	// workspace when it is a real directory; a link planted in its place
	// stays in work/ with the agent's files.
	if fi, err := m.Lstat("logs"); err == nil && fi.IsDir() {
		s, err := d.MkdirPath(State, 0o700)
		if err != nil {
			return fmt.Errorf("migrate the task directory: create state/: %w", err)
		}
		defer s.Close()
		if _, err := s.Lstat("logs"); errors.Is(err, fs.ErrNotExist) {
			if err := m.Rename("logs", s, "logs"); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("migrate the task directory: move logs/ into state/: %w", err)
			}
		}
	}
	if err := d.Rename(migrating, d, Work); err != nil {
		if _, lerr := d.Lstat(Work); lerr == nil {
			return nil // another migrator finished first
		}
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return nil
		}
		return fmt.Errorf("migrate the task directory: rename to work/: %w", err)
	}
	return nil
}
