package index

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestChangedSince: a directory changed now is reported changed since a
// moment ago, not since a time to come.
func TestChangedSince(t *testing.T) {
	w, err := newWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	dir := t.TempDir()
	write(t, dir, "f", "")
	if !w.changedSince(dir, time.Now().Add(-changeMargin)) {
		t.Error("a directory changed just now is not reported changed")
	}
	if w.changedSince(dir, time.Now().Add(time.Hour)) {
		t.Error("a directory is reported changed in the future")
	}
	if !w.changedSince(filepath.Join(dir, "missing"), time.Now()) {
		t.Error("a directory that cannot be read must count as changed")
	}
}

// TestWarmWaitsForWatches: after Warm (serve sessions' eager build) the
// watches are in place, so the session's first search waits for nothing.
func TestWarmWaitsForWatches(t *testing.T) {
	dir := seedTree(t)
	x := New(openRoot(t, dir))
	defer x.Close()
	if err := x.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.setup != nil || x.w == nil || len(x.byWD) == 0 {
		t.Fatalf("after Warm: setup pending %v, watching %v, %d watches", x.setup != nil, x.w != nil, len(x.byWD))
	}
}

// lateSelfWatcher holds back the events of a directory about itself
// (removed, moved, watch ended) until the next drain: the kernel queues
// them after its parent's, so a read of the queue may end between the two.
type lateSelfWatcher struct {
	watcher
	held []event
}

func (l *lateSelfWatcher) drain(fn func(event)) error {
	held := l.held
	l.held = nil
	for _, ev := range held {
		fn(ev)
	}
	return l.watcher.drain(func(ev event) {
		if ev.self {
			l.held = append(l.held, ev)
			return
		}
		fn(ev)
	})
}

// TestIndexReplacedDirectory: a directory moved away and another made
// under its name, its own events read after its parent's. The parent's
// listing keeps the node of that name (and the old watch, which follows
// the directory moved); the moved one, watched again under its new name,
// gets the same watch from the kernel. The replacement must be listed
// anew, and the moved one must stay watched when the old node is dropped.
func TestIndexReplacedDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "c/d/a.go", "")
	root := openRoot(t, dir)
	x := New(root)
	defer x.Close()
	x.newWatcher = func() (watcher, error) {
		w, err := newWatcher()
		if err != nil {
			return nil, err
		}
		return &lateSelfWatcher{watcher: w}, nil
	}
	if err := x.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	if err := os.Rename(p("c/d"), p("c/e")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "c/d/b.go", "")
	check := func(when string) {
		t.Helper()
		if got, want := indexListing(t, x), walkListing(t, root); !slices.Equal(got, want) {
			t.Fatalf("%s:\nindex %q\nwalk  %q", when, got, want)
		}
	}
	check("after c/d moved to c/e and c/d made again")
	check("after the moved directory's own events")
	write(t, dir, "c/e/later.go", "")
	check("after a file made in the moved directory")
	write(t, dir, "c/d/later.go", "")
	check("after a file made in the new directory")
}
