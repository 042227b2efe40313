//go:build !linux

package workspace

import (
	"fmt"
	"io/fs"
	"os"
)

// dirHandle is a directory opened as an os.Root of its own.
type dirHandle struct {
	root *os.Root
}

func openDirHandle(root *os.Root, rel string) (dirHandle, error) {
	sub, err := root.OpenRoot(rel)
	if err != nil {
		return dirHandle{}, err
	}
	return dirHandle{root: sub}, nil
}

func (h dirHandle) close() error { return h.root.Close() }

func (h dirHandle) readDir() ([]fs.DirEntry, error) {
	f, err := h.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

func (h dirHandle) openDir(name string) (dirHandle, error) {
	fi, err := h.root.Lstat(name)
	if err != nil {
		return dirHandle{}, err
	}
	if !fi.IsDir() {
		return dirHandle{}, fmt.Errorf("%s: not a directory", name)
	}
	sub, err := h.root.OpenRoot(name)
	if err != nil {
		return dirHandle{}, err
	}
	return dirHandle{root: sub}, nil
}

func (h dirHandle) open(name string) (*os.File, error) {
	fi, err := h.root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	return h.root.Open(name)
}

func (h dirHandle) readFile(name string, buf []byte, max int64) ([]byte, int64, error) {
	f, err := h.open(name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	return readSized(f, fi.Size(), max, buf)
}
