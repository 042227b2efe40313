package blobstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Local is a Store in a directory: the object key is the file <dir>/<key>.
// Every access goes through an os.Root of the directory, so no key (nor a
// link planted in the directory) reaches outside it. It is the default
// store, one machine's: serve and its workers share the data directory.
type Local struct {
	dir  string
	root *os.Root
}

// Modes of what a Local store creates: its objects are tasks' uploads and
// deliverables, not for other local users to read whatever the mode of
// the directory the operator named (`--artifacts /srv/artifacts`).
const (
	localDirPerm  fs.FileMode = 0o700
	localFilePerm fs.FileMode = 0o600
)

// OpenLocal opens (creating it, mode 0700) the directory dir as a Store.
// The directories and objects it creates are its owner's only.
func OpenLocal(dir string) (*Local, error) {
	if err := os.MkdirAll(dir, localDirPerm); err != nil {
		return nil, fmt.Errorf("create the blob directory: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open the blob directory: %w", err)
	}
	return &Local{dir: dir, root: root}, nil
}

// Close releases the directory.
func (l *Local) Close() error { return l.root.Close() }

// Location is the directory.
func (l *Local) Location() string { return l.dir }

// Put writes the body to a temporary file beside the key's and renames it
// over the key once its length and hash are checked.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, sum string) error {
	key, err := CheckKey(key)
	if err != nil {
		return err
	}
	if err := checkSum(sum); err != nil {
		return err
	}
	tmp, f, err := l.createTemp(key)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			l.root.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, &ctxReader{ctx: ctx, r: newCheckedReader(r, size, sum)}); err != nil {
		return fmt.Errorf("put blob %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put blob %s: %w", key, err)
	}
	if err := l.root.Rename(tmp, key); err != nil {
		return fmt.Errorf("put blob %s: %w", key, err)
	}
	ok = true
	return nil
}

// putDirAttempts bounds createTemp's retries: each one needs a
// concurrent Delete that emptied the directory, or a concurrent Put that
// created it, in that very moment.
const putDirAttempts = 100

// createTemp creates key's directories and a new temporary file in its
// directory. A Delete that empties a directory removes it (and its empty
// parents), so a concurrent Delete can remove the directory between
// MkdirAll and the file's creation (or one of its parents during
// MkdirAll): that is retried. Once the temporary file exists its
// directory is not empty, and the rename over the key cannot lose it.
func (l *Local) createTemp(key string) (string, *os.File, error) {
	dir := path.Dir(key)
	for attempt := 1; ; attempt++ {
		err := l.root.MkdirAll(dir, localDirPerm)
		if err != nil {
			// ErrExist: os.Root's MkdirAll does not take a directory
			// that a concurrent Put created first; the next attempt does.
			if (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist)) && attempt < putDirAttempts {
				continue
			}
			return "", nil, fmt.Errorf("put blob %s: create its directory: %w", key, err)
		}
		var rnd [8]byte
		rand.Read(rnd[:])
		tmp := path.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:]))
		f, err := l.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, localFilePerm)
		if err == nil {
			return tmp, f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt >= putDirAttempts {
			return "", nil, fmt.Errorf("put blob %s: %w", key, err)
		}
	}
}

// Get opens the file of key.
func (l *Local) Get(ctx context.Context, key string) (io.ReadSeekCloser, Info, error) {
	info, err := l.Stat(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	f, err := l.root.Open(info.Key)
	if err != nil {
		return nil, Info{}, fmt.Errorf("get blob %s: %w", info.Key, err)
	}
	return f, info, nil
}

// Stat describes the file of key, hashing it.
func (l *Local) Stat(ctx context.Context, key string) (Info, error) {
	key, err := CheckKey(key)
	if err != nil {
		return Info{}, err
	}
	f, err := l.root.Open(key)
	if err != nil {
		return Info{}, fmt.Errorf("stat blob %s: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("stat blob %s: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, fmt.Errorf("stat blob %s: not a file: %w", key, ErrNotExist)
	}
	n, sum, err := HashReader(&ctxReader{ctx: ctx, r: f})
	if err != nil {
		return Info{}, fmt.Errorf("stat blob %s: hash: %w", key, err)
	}
	return Info{Key: key, Size: n, SHA256: sum, Modified: fi.ModTime()}, nil
}

// List walks the directory of prefix (SHA256 left empty).
func (l *Local) List(ctx context.Context, prefix string) ([]Info, error) {
	start := "."
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		var err error
		if start, err = CheckKey(prefix); err != nil {
			return nil, err
		}
	}
	var out []Info
	err := fs.WalkDir(l.root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		out = append(out, Info{Key: p, Size: fi.Size(), Modified: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list blobs under %q: %w", prefix, err)
	}
	return out, nil // WalkDir visits in lexical order
}

// Delete removes the file of key and then its directories left empty.
func (l *Local) Delete(ctx context.Context, key string) error {
	key, err := CheckKey(key)
	if err != nil {
		return err
	}
	if err := l.root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if l.root.Remove(dir) != nil {
			break // not empty (or gone)
		}
	}
	return nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
