package blobstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/maestro-run/maestro/internal/workspace"
)

// SyncStats counts what one SyncUp or SyncDown did.
type SyncStats struct {
	// Copied counts the files sent (or fetched), Bytes their bytes.
	Copied int
	Bytes  int64
	// Unchanged counts the files left alone: same size and SHA-256 on
	// both sides.
	Unchanged int
	// Deleted counts the objects removed because the file is gone
	// (SyncUp with mirror).
	Deleted int
}

// Add adds o to st.
func (st *SyncStats) Add(o SyncStats) {
	st.Copied += o.Copied
	st.Bytes += o.Bytes
	st.Unchanged += o.Unchanged
	st.Deleted += o.Deleted
}

// SyncUp copies the regular files under dir (a tree reached without
// following links; links and special files are left out) to the objects
// prefix/<path>, sending only those whose size or SHA-256 differ from the
// object's. With mirror, objects under prefix with no file left are
// deleted.
func SyncUp(ctx context.Context, s Store, dir *workspace.Dir, prefix string, mirror bool) (SyncStats, error) {
	var st SyncStats
	remote, err := s.List(ctx, prefix)
	if err != nil {
		return st, err
	}
	sizes := make(map[string]int64, len(remote))
	for _, o := range remote {
		sizes[o.Key] = o.Size
	}
	seen := map[string]bool{}
	err = dir.Walk(workspace.WalkLimits{}, func(rel string, e fs.DirEntry) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !e.Type().IsRegular() {
			return nil
		}
		key := Join(prefix, rel)
		if _, err := CheckKey(key); err != nil {
			return nil // a name no object can have (".blob-…")
		}
		seen[key] = true
		sent, n, err := putChanged(ctx, s, dir, rel, key, sizes)
		if err != nil {
			return err
		}
		if sent {
			st.Copied++
			st.Bytes += n
		} else {
			st.Unchanged++
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("sync %s to %s: %w", dir.Rel(), Join(s.Location(), prefix), err)
	}
	if mirror {
		for _, o := range remote {
			if !seen[o.Key] {
				if err := s.Delete(ctx, o.Key); err != nil {
					return st, err
				}
				st.Deleted++
			}
		}
	}
	return st, nil
}

// putChanged sends the file rel of dir as key unless the object there has
// its size and SHA-256 (sizes: the listed objects' sizes).
func putChanged(ctx context.Context, s Store, dir *workspace.Dir, rel, key string, sizes map[string]int64) (bool, int64, error) {
	f, err := dir.OpenFilePath(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil // removed meanwhile
	}
	if err != nil {
		return false, 0, fmt.Errorf("%s: %w", rel, err)
	}
	defer f.Close()
	n, sum, err := HashReader(f)
	if err != nil {
		return false, 0, fmt.Errorf("%s: hash: %w", rel, err)
	}
	if size, ok := sizes[key]; ok && size == n {
		if info, err := s.Stat(ctx, key); err == nil && info.SHA256 == sum {
			return false, n, nil
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, 0, fmt.Errorf("%s: %w", rel, err)
	}
	if err := s.Put(ctx, key, f, n, sum); err != nil {
		return false, 0, err
	}
	return true, n, nil
}

// SyncDown copies the objects under prefix into dir (prefix/<path> to
// <path>, directories created without following links), fetching only
// those whose size or SHA-256 differ from the local file's. Each file is
// written beside its place and renamed over it once its length and hash
// match the object's. Local files with no object are left alone.
func SyncDown(ctx context.Context, s Store, prefix string, dir *workspace.Dir) (SyncStats, error) {
	var st SyncStats
	remote, err := s.List(ctx, prefix)
	if err != nil {
		return st, err
	}
	for _, o := range remote {
		rel := strings.TrimPrefix(o.Key, strings.Trim(prefix, "/")+"/")
		if prefix == "" {
			rel = o.Key
		}
		got, err := fetchChanged(ctx, s, o, rel, dir)
		if err != nil {
			return st, fmt.Errorf("sync %s into %s: %w", Join(s.Location(), prefix), dir.Rel(), err)
		}
		if got {
			st.Copied++
			st.Bytes += o.Size
		} else {
			st.Unchanged++
		}
	}
	return st, nil
}

// fetchChanged writes object o to rel in dir unless the file there has
// its size and SHA-256.
func fetchChanged(ctx context.Context, s Store, o Info, rel string, dir *workspace.Dir) (bool, error) {
	rel, broken := workspace.CheckSlashPath(rel)
	if broken != "" {
		return false, fmt.Errorf("object %s: expected a path %s", o.Key, broken)
	}
	parent, base := path.Split(rel)
	sub, err := dir.MkdirPath(strings.TrimSuffix(parent, "/"), 0o755)
	if err != nil {
		return false, fmt.Errorf("%s: %w", rel, err)
	}
	defer sub.Close()
	if f, err := sub.Open(base); err == nil {
		fi, serr := f.Stat()
		same := false
		if serr == nil && fi.Mode().IsRegular() && fi.Size() == o.Size {
			if n, sum, herr := HashReader(f); herr == nil && n == o.Size {
				info, err := s.Stat(ctx, o.Key)
				same = err == nil && info.SHA256 == sum
			}
		}
		f.Close()
		if same {
			return false, nil
		}
	}
	r, info, err := s.Get(ctx, o.Key)
	if err != nil {
		return false, err
	}
	defer r.Close()
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := tmpPrefix + hex.EncodeToString(rnd[:])
	f, err := sub.Create(tmp, 0o644)
	if err != nil {
		return false, fmt.Errorf("%s: %w", rel, err)
	}
	var src io.Reader = r
	var cr *checkedReader
	if info.SHA256 != "" {
		cr = newCheckedReader(r, info.Size, info.SHA256)
		src = cr
	}
	_, err = io.Copy(f, &ctxReader{ctx: ctx, r: src})
	if err == nil && cr != nil {
		err = cr.verify()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = sub.Rename(tmp, sub, base)
	}
	if err != nil {
		sub.Remove(tmp)
		return false, fmt.Errorf("%s: %w", rel, err)
	}
	return true, nil
}
