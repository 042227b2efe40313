// Package gitinfo reads what Maestro reports about the git repository
// holding a workspace (the current branch, for session_info's git_branch)
// straight from the repository's metadata files.
//
// Those files lie in the workspace, where the agent can write, so every
// read is defensive: only regular files are read, opened without blocking
// (a FIFO planted as .git or .git/HEAD cannot hang the caller), and at
// most MaxMetadataBytes of each (HEAD linked to /dev/zero cannot grow
// memory). Anything unexpected means "no git information", logged at
// debug level, never an error: the branch is a courtesy.
package gitinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/maestro-run/maestro/internal/workspace"
)

// MaxMetadataBytes bounds each metadata file read (HEAD, a .git file): a
// real one holds one line.
const MaxMetadataBytes = 4 << 10

// Branch returns the current branch of the git repository holding dir
// (dir itself or its nearest ancestor with a .git entry), or nil outside
// git, on a detached HEAD, or when the metadata is not what git writes (a
// .git or HEAD that is a FIFO, a device, a link to one, or too large). log
// receives the reason at debug level (nil discards it).
func Branch(dir string, log *slog.Logger) *string {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	branch, err := branch(dir)
	if err != nil {
		log.Debug("no git branch for the workspace", "dir", dir, "err", err)
		return nil
	}
	return branch
}

func branch(dir string) (*string, error) {
	gitPath, st, err := findGit(dir)
	if err != nil || gitPath == "" {
		return nil, err
	}
	headPath := filepath.Join(gitPath, "HEAD")
	switch {
	case st.IsDir():
	case st.Mode().IsRegular():
		// A worktree or submodule: ".git" is a file "gitdir: <path>".
		data, err := readSmall(gitPath)
		if err != nil {
			return nil, err
		}
		gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
		if !ok {
			return nil, fmt.Errorf("%s: not a gitdir file", gitPath)
		}
		if !filepath.IsAbs(gitdir) {
			gitdir = filepath.Join(filepath.Dir(gitPath), gitdir)
		}
		headPath = filepath.Join(gitdir, "HEAD")
	default:
		return nil, fmt.Errorf("%s is %s, not a directory or a regular file", gitPath, workspace.KindOf(st.Mode()))
	}
	data, err := readSmall(headPath)
	if err != nil {
		return nil, err
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "ref: refs/heads/")
	if !ok {
		return nil, nil // detached HEAD
	}
	return &ref, nil
}

// findGit returns the .git entry of dir or of its nearest ancestor that
// has one, with its information (a link followed); "" when there is none.
func findGit(dir string) (string, fs.FileInfo, error) {
	for d := dir; ; d = filepath.Dir(d) {
		gitPath := filepath.Join(d, ".git")
		st, err := os.Stat(gitPath)
		switch {
		case err == nil:
			return gitPath, st, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", nil, err
		}
		if filepath.Dir(d) == d {
			return "", nil, nil
		}
	}
}

// readSmall reads the regular file at path if it holds at most
// MaxMetadataBytes. The file is checked before it is opened (so a device
// is never opened) and again on the opened descriptor, opened without
// blocking (so a FIFO swapped in between cannot hang the read).
func readSmall(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file", path, workspace.KindOf(st.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := workspace.ReadRegular(f, path, MaxMetadataBytes)
	if err != nil {
		return nil, fmt.Errorf("read git metadata: %w", err)
	}
	return data, nil
}
