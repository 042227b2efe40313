//go:build !linux

package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// On systems other than Linux, trusted-parent access is built on os.Root
// with an Lstat before each step: best effort (a link swapped in between
// the check and the open is followed as os.Root allows, within the root).

func openTrustedHandle(dir string) (dirHandle, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return dirHandle{}, err
	}
	return dirHandle{root: root}, nil
}

func (h dirHandle) dup() (dirHandle, error) {
	sub, err := h.root.OpenRoot(".")
	if err != nil {
		return dirHandle{}, err
	}
	return dirHandle{root: sub}, nil
}

func (h dirHandle) mkdir(name string, perm fs.FileMode) error { return h.root.Mkdir(name, perm) }

func (h dirHandle) create(name string, perm fs.FileMode) (*os.File, error) {
	return h.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

func (h dirHandle) rename(oldName string, to dirHandle, newName string) error {
	if fi, err := to.root.Lstat(newName); err == nil && fi.IsDir() {
		return errors.New("rename: target is a directory")
	}
	return os.Rename(filepath.Join(h.root.Name(), oldName), filepath.Join(to.root.Name(), newName))
}

func (h dirHandle) remove(name string) error { return h.root.Remove(name) }

func (h dirHandle) lstat(name string) (fs.FileInfo, error) { return h.root.Lstat(name) }

func (h dirHandle) isLink(name string, err error) bool {
	fi, lerr := h.root.Lstat(name)
	return lerr == nil && fi.Mode()&fs.ModeSymlink != 0
}
