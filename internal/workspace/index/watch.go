package index

import (
	"errors"
	"time"
)

// watcher is the source of change notifications (inotify on Linux).
type watcher interface {
	// add watches directory dir (absolute) and returns its watch id; an
	// error wrapping errWatchLimit means no more can be added. When fd is
	// not -1 it is the directory open, and the watch is on that very
	// directory even if another one has taken its path since it was
	// opened (dir then only names it). The watch id is the one the
	// directory has already when it is watched (under another name).
	add(dir string, fd int) (int32, error)
	remove(wd int32)
	// drain calls fn for each event queued so far, without blocking.
	drain(fn func(event)) error
	// changedSince reports whether directory dir (absolute) changed
	// (its change time) at or after since, or cannot be told.
	changedSince(dir string, since time.Time) bool
	close() error
}

// event is one notification.
type event struct {
	wd       int32
	name     string // the entry's name in the watched directory ("" for the directory itself)
	overflow bool   // events were lost: list the tree again
	self     bool   // the directory itself was removed or moved, or its watch ended
	ignored  bool   // its watch ended
	entries  bool   // an entry was created, removed or moved in or out
}

// errWatchLimit: the system's watch limit was reached.
var errWatchLimit = errors.New("no more file-system watches")
